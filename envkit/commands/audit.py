"""`envkit audit`: static rules over existing envs, optionally the live probe, optionally safe fixes.

Fixes are planned by `audit` and applied by `apply_fixes`, so the caller can show the findings
and the diff before anything is written, and ask."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path

from envkit.audit.catalog import ConsistencyRule
from envkit.audit.engine import EnvAudit, audit_many
from envkit.audit.fix import FixOutdated, FixPlan, apply_fix, plan_fix
from envkit.audit.inventory import cuda_arch_version, cuda_driver_version
from envkit.audit.rules import RULES, SEVERITY_ORDER, Rule, lookup
from envkit.commands import Result
from envkit.commands.arguments import env_args, given, json_flag, override_frozen_flag
from envkit.core.errors import ExitCode, UsageError
from envkit.core.fsutil import LockBusy
from envkit.install.transaction import settle_before_change
from envkit.prefix.envs import all_envs, find_env, select_env
from envkit.prefix.protect import frozen_env
from envkit.ui.console import Out, TextTable, escape
from envkit.ui.terminal import UI
from envkit.ui.views import STATUS_STYLE, findings_view

RULES_PAGE = "docs/reference/rules.md"


@dataclass(frozen=True)
class AuditOutcome:
    """The audits of every env asked for, and the fixes planned or applied."""

    audits: tuple[EnvAudit, ...]
    min_severity: str
    fixes: tuple[FixPlan, ...]
    applied: tuple[str, ...]
    searched: tuple[str, ...] = ()  # where --all looked, for an empty result
    fail_on: str = "error"  # the lowest severity that makes the exit code 1
    hidden: int = 0  # findings below min_severity, counted and not shown


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("targets", nargs="*", metavar="NAME|PREFIX", help="envs to audit (default: -n/-p, else the active env)")
    env_args(p)
    p.add_argument("--all", action="store_true", help="every env conda knows about, its base included")
    p.add_argument("--probe", action="store_true", help="also run the live probe")
    p.add_argument("--fix", action="store_true", help="apply safe fixes (activation scripts, envkit's record); shows the diff first")
    p.add_argument("-y", "--yes", action="store_true", help="apply fixes without asking (required off a terminal)")
    override_frozen_flag(p, "with --fix, fix")
    p.add_argument("--explain", type=given, metavar="RULE", help="explain one rule (EK001, RC003, or a slug) and exit")
    p.add_argument("--list-rules", action="store_true", help="list the rule catalog and exit")
    p.add_argument(
        "--min-severity",
        default="info",
        choices=("info", "warning", "error"),
        help="report findings of this severity and above (default: info)",
    )
    p.add_argument(
        "--fail-on",
        default="error",
        choices=("info", "warning", "error"),
        help="exit 1 on a finding of this severity or above (default: error; warning makes drift, EK024, fail CI)",
    )
    json_flag(p)


def invoke(args: argparse.Namespace, ui: UI) -> Result[AuditOutcome] | Result[Rule | ConsistencyRule] | Result[tuple[Rule, ...]]:
    if args.explain is not None:
        return explain(args.explain)
    if args.list_rules:
        return Result("audit rules", list_rules(), view=rules_view)
    result = audit(
        args.targets,
        name=args.name,
        prefix=args.prefix,
        all_envs_flag=args.all,
        probe=args.probe,
        fix=args.fix,
        min_severity=args.min_severity,
        fail_on=args.fail_on,
        override_frozen=args.override_frozen,
    )
    if not result.data.fixes:
        return result
    if args.yes:
        return apply_fixes(result)
    if ui.as_json:
        return not_applied(result, "pass -y to apply them (no confirmation is asked with --json)")
    result.show(ui.out)
    if not ui.interactive:
        return replace(not_applied(result, "no terminal to confirm on: re-run with -y to apply them"), view=None)
    if ui.ask("Apply these changes?"):
        applied = apply_fixes(result)
        after_only(applied).show(ui.out)
        return replace(applied, view=None)
    return replace(not_applied(result, "aborted: nothing was changed"), view=None)


def explain(rule_id: str) -> Result[Rule | ConsistencyRule]:
    rule = lookup(rule_id)
    if rule is None:
        raise UsageError(
            f"unknown rule '{rule_id}'", hint="audit rules are EK001...; recipe rules RC001...; see 'envkit audit --list-rules'"
        )
    return Result("audit explain", rule, view=explain_view)


def list_rules() -> tuple[Rule, ...]:
    return RULES


def _at_or_above(audits: list[EnvAudit], min_severity: str) -> list[EnvAudit]:
    floor = SEVERITY_ORDER[min_severity]
    return [replace(a, findings=tuple(f for f in a.findings if SEVERITY_ORDER[f.severity] >= floor)) for a in audits]


def _exit_code(audits: tuple[EnvAudit, ...] | list[EnvAudit], fail_on: str) -> int:
    floor = SEVERITY_ORDER[fail_on]
    failing = any(SEVERITY_ORDER[f.severity] >= floor for a in audits for f in a.findings) or any(a.error for a in audits)
    return int(ExitCode.FINDINGS if failing else ExitCode.OK)


def _targets(targets: list[str], name: str | None, prefix: str | None, all_envs_flag: bool, fix: bool) -> list[Path]:
    """The envs to audit. With --fix the audit changes them: what an interrupted envkit left is
    settled first; a plain audit only reads, and says what is pending."""
    if all_envs_flag:
        from envkit.core.notices import notify
        from envkit.prefix.leftovers import pending

        found = all_envs()
        for said in filter(None, map(pending, found)):
            notify(f"{said}; nothing was changed")
        return found
    if fix:  # --fix changes the envs: settling interrupted work is its first step
        for target in targets:
            settle_before_change(target, None)
        if name or prefix or not targets:
            settle_before_change(name, prefix)
    if targets or name or prefix:
        found = [find_env(t) for t in targets]
        if name or prefix:
            found.append(select_env(name, prefix))
        return list(dict.fromkeys(found))
    return [select_env(None, None)]


# radon cc 23: targets, --all, --probe and --fix combine; each combination's rule is a line
def audit(
    targets: list[str],
    *,
    name: str | None = None,
    prefix: str | None = None,
    all_envs_flag: bool = False,
    probe: bool = False,
    fix: bool = False,
    min_severity: str = "info",
    fail_on: str = "error",
    override_frozen: bool = False,
) -> Result[AuditOutcome]:
    """`fail_on`: the lowest severity that makes the exit code 1 (a CI that gates on drift, EK024,
    a warning, passes "warning"). An env marked frozen (CEP 22) gets no fixes unless
    `override_frozen`: the others of an --all audit still do, and it is said which were left."""
    for flag, value in (("--min-severity", min_severity), ("--fail-on", fail_on)):
        if value not in SEVERITY_ORDER:
            raise UsageError(f"{flag} {value!r}: expected info, warning or error")
    if SEVERITY_ORDER[fail_on] < SEVERITY_ORDER[min_severity]:
        raise UsageError(
            f"--fail-on {fail_on} would fail on findings that --min-severity {min_severity} does not show",
            hint=f"lower --min-severity to {fail_on}, or raise --fail-on",
        )
    prefixes = _targets(targets, name, prefix, all_envs_flag, fix)
    everything = audit_many(prefixes, probe=probe, cuda_driver=cuda_driver_version(), cuda_arch=cuda_arch_version())
    audits = _at_or_above(everything, min_severity)
    hidden = sum(len(a.findings) for a in everything) - sum(len(a.findings) for a in audits)
    fixes: list[FixPlan] = []
    held: list[str] = []
    if fix:
        for a in audits:
            fixable = [f for f in a.findings if f.fixable]
            frozen = None if override_frozen or not fixable else frozen_env(Path(a.prefix))
            if frozen is not None:
                refused = frozen.refusal("fix")
                held.append(f"--fix: {refused.message} ({refused.hint})")
            elif fixable:
                plan = plan_fix(Path(a.prefix), fixable)
                if plan.changes:
                    fixes.append(plan)
    searched = tuple(str(p) for p in _searched()) if all_envs_flag and not prefixes else ()
    outcome = AuditOutcome(tuple(audits), min_severity, tuple(fixes), (), searched, fail_on, hidden)
    said: tuple[str, ...] = tuple(held)
    if fix and not fixes and not held and any(a.findings for a in audits):  # asked to fix, and silence would read as done
        said = ("--fix: none of these findings has a fix envkit applies itself; each one's fix line says what to do",)
    return Result("audit", outcome, _exit_code(audits, fail_on), said, view=audit_view)


def _searched() -> list[Path]:
    from envkit.prefix.envs import conda_root, environments_txt, envs_dir

    root = conda_root()
    return [p for p in (root, envs_dir(), environments_txt()) if p is not None]


def apply_fixes(result: Result[AuditOutcome]) -> Result[AuditOutcome]:
    """Write the planned fixes, then audit those envs again: the result is the state after. An env
    that changed since its plan, or is locked by another envkit, is left alone and said so (exit 2)."""
    outcome = result.data
    applied: list[str] = []
    skipped: list[str] = []
    for plan in outcome.fixes:
        try:
            applied += [str(p) for p in apply_fix(plan)]
        except (FixOutdated, LockBusy) as exc:
            skipped.append(f"fixes not applied: {exc.message} ({exc.hint})")
    fixed = {plan.prefix for plan in outcome.fixes}
    again = {a.prefix: a for a in audit_many(sorted(fixed), cuda_driver=cuda_driver_version(), cuda_arch=cuda_arch_version())}
    audits = _at_or_above([again.get(a.prefix, a) for a in outcome.audits], outcome.min_severity)
    after = replace(outcome, audits=tuple(audits), applied=tuple(applied))
    if skipped:
        return Result("audit", after, int(ExitCode.USAGE), tuple(skipped), tuple(skipped), view=audit_view)
    return Result("audit", after, _exit_code(audits, outcome.fail_on), view=audit_view)


def not_applied(result: Result[AuditOutcome], why: str) -> Result[AuditOutcome]:
    return replace(result, messages=(*result.messages, f"fixes not applied: {why}"))


def after_only(result: Result[AuditOutcome]) -> Result[AuditOutcome]:
    """What to show once fixes are applied on a terminal, where the findings were shown before."""
    return replace(result, data=replace(result.data, fixes=()))


def audit_view(c: Out, out: AuditOutcome) -> None:
    if not out.audits:
        c.print("no envs found; looked at " + ", ".join(escape(p) for p in out.searched))
        return
    if len(out.audits) > 1:
        table = TextTable("env", "packages", "envkit", "errors", "warnings", "info")
        for a in out.audits:
            counts = {s: sum(1 for f in a.findings if f.severity == s) for s in ("error", "warning", "info")}
            table.add_row(
                escape(str(a.prefix)),
                str(a.packages),
                "yes" if a.envkit_managed else "",
                str(counts["error"]),
                str(counts["warning"]),
                str(counts["info"]),
            )
        c.print(table)
    for a in out.audits:
        if a.error:
            c.print(f"[red]error[/red] {escape(str(a.prefix))}: {escape(a.error)}")
            continue
        if len(out.audits) == 1 or a.findings:
            clean = "[green]clean[/green]" if not out.hidden else f"nothing at or above {out.min_severity}"
            c.print(f"[bold]{escape(str(a.prefix))}[/bold]: " + (f"{len(a.findings)} finding(s)" if a.findings else clean))
        findings_view(c, a.findings)
    if out.hidden:
        c.print(f"{out.hidden} finding(s) below {out.min_severity} not shown (--min-severity info shows them)")
    for plan in out.fixes:
        c.print(f"[bold]fix[/bold] {escape(str(plan.prefix))}: " + escape("; ".join(plan.reasons)))
        c.file.write(plan.diff)
    for path in out.applied:
        c.print(f"  wrote {escape(path)}")


def explain_view(c: Out, rule: Rule | ConsistencyRule) -> None:
    c.print(f"[bold]{rule.id}[/bold] ({rule.slug}) [{STATUS_STYLE[rule.severity]}]{rule.severity}[/]: {escape(rule.title)}")
    c.print(f"\n[bold]Why[/bold]\n{escape(rule.rationale)}")
    c.print(f"\n[bold]Fix[/bold]\n{escape(rule.fix)}" + ("\n(safe fix: envkit audit --fix applies it)" if rule.safe_fix else ""))
    c.print("\n[bold]Sources[/bold]\n" + "\n".join(rule.sources))
    c.print(f"\n[bold]Docs[/bold]\n{rule_doc_link(rule.id)}")


def rule_doc_link(rule_id: str) -> str:
    """Where a rule is documented: its own anchor on the generated rules page."""
    return f"{RULES_PAGE}#{rule_id.lower()}"


def rules_view(c: Out, rules: tuple[Rule, ...]) -> None:
    for rule in rules:
        c.print(escape(f"{rule.id}  {rule.severity:7}  {rule.slug:28} {rule.title}"))
