"""`envkit audit`: static rules over existing envs, optionally the live probe, optionally safe fixes.

Fixes are planned by `audit` and applied by `apply_fixes`, so the caller can show the findings
and the diff before anything is written, and ask."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from envkit.audit.engine import EnvAudit, audit_many
from envkit.audit.fix import FixOutdated, FixPlan, apply_fix, plan_fix
from envkit.audit.inventory import cuda_arch_version, cuda_driver_version
from envkit.audit.recipe_rules import RULES_BY_ID as RECIPE_RULES
from envkit.audit.recipe_rules import ConsistencyRule
from envkit.audit.rules import RULES, SEVERITY_ORDER, Rule, lookup
from envkit.commands import Result
from envkit.core.errors import ExitCode, UsageError
from envkit.core.fsutil import LockBusy
from envkit.install.transaction import settle_before_change
from envkit.prefix.envs import all_envs, find_env, select_env
from envkit.prefix.protect import frozen_env


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


def explain(rule_id: str) -> Result:
    rule: Rule | ConsistencyRule | None = lookup(rule_id) or RECIPE_RULES.get(rule_id.strip().upper())
    if rule is None:
        raise UsageError(
            f"unknown rule '{rule_id}'", hint="audit rules are EK001...; recipe rules RC001...; see 'envkit audit --list-rules'"
        )
    return Result("audit explain", rule)


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
) -> Result:
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
    return Result("audit", outcome, _exit_code(audits, fail_on), said)


def _searched() -> list[Path]:
    from envkit.prefix.envs import conda_root, environments_txt, envs_dir

    root = conda_root()
    return [p for p in (root, envs_dir(), environments_txt()) if p is not None]


def fixes_pending(result: Result) -> bool:
    return isinstance(result.data, AuditOutcome) and bool(result.data.fixes)


def apply_fixes(result: Result) -> Result:
    """Write the planned fixes, then audit those envs again: the result is the state after. An env
    that changed since its plan, or is locked by another envkit, is left alone and said so (exit 2)."""
    outcome: AuditOutcome = result.data
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
        return Result("audit", after, int(ExitCode.USAGE), tuple(skipped), tuple(skipped))
    return Result("audit", after, _exit_code(audits, outcome.fail_on))


def not_applied(result: Result, why: str) -> Result:
    return replace(result, messages=(*result.messages, f"fixes not applied: {why}"))


def after_only(result: Result) -> Result:
    """What to show once fixes are applied on a terminal, where the findings were shown before."""
    outcome: AuditOutcome = result.data
    return replace(result, data=replace(outcome, fixes=()))
