"""`envkit create`: resolve -> check -> solve -> plan -> (confirm) -> create -> activation -> probe."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envkit.audit.engine import Finding, audit_plan
from envkit.commands import Result
from envkit.create import CreatedEnv, create_env, ensure_creatable, update_record_probe
from envkit.envs import target_prefix
from envkit.errors import ExitCode, UsageError
from envkit.probe.model import ProbeReport
from envkit.probe.runner import run_probe, spec_for
from envkit.recipe.compile import compile_recipe
from envkit.recipe.consistency import require_consistent
from envkit.recipe.loader import load_recipe
from envkit.solve import Plan, solve_recipe


@dataclass(frozen=True)
class CreateRequest:
    recipe: str
    name: str | None = None
    prefix: str | None = None
    channels: tuple[str, ...] = ()
    override_channels: bool = False
    mirrors: tuple[tuple[str, str], ...] = ()
    dry_run: bool = False
    force: bool = False
    probe: bool = True


@dataclass(frozen=True)
class CreateOutcome:
    plan: Plan
    dry_run: bool
    created: CreatedEnv | None
    probe: ProbeReport | None
    aborted: bool = False
    findings: tuple[Finding, ...] = ()  # the audit's rules over the plan, before anything is installed
    refused: bool = False  # error findings the recipe does not force: nothing was written


def create(
    request: CreateRequest,
    *,
    show_plan: Callable[[Plan, tuple[Finding, ...]], None] | None = None,
    confirm: Callable[[Plan], bool] | None = None,
    reporter: Any | None = None,
) -> Result:
    if request.name and request.prefix:
        raise UsageError("give either -n NAME or -p PREFIX, not both")
    recipe = load_recipe(request.recipe)
    recipe_findings = require_consistent(recipe)
    compiled = compile_recipe(recipe)
    prefix = target_prefix(request.name or (None if request.prefix else recipe.name), request.prefix)
    if not request.dry_run:
        ensure_creatable(prefix, force=request.force)  # before the solve: say it now, not after a plan
    outcome = solve_recipe(
        compiled,
        prefix,
        extra_channels=list(request.channels),
        override_channels=request.override_channels,
        mirrors=dict(request.mirrors),
        warnings=tuple(f"{f.rule.id}: {f.message}" for f in recipe_findings),
    )
    plan = outcome.plan
    findings = tuple(audit_plan(plan, recipe.force))
    blocking = [f for f in findings if f.severity == "error"]
    if blocking:
        refused = CreateOutcome(plan, request.dry_run, None, None, findings=findings, refused=True)
        errors = tuple(f"{f.rule_id} {f.title}: {f.evidence}" for f in blocking)
        why = (
            f"the plan fails the audit ({', '.join(dict.fromkeys(f.rule_id for f in blocking))}): nothing was written",
            "fix the recipe (each finding says how), or accept a rule's risk by adding its id to the recipe's force: list",
        )
        return Result("create", refused, int(ExitCode.FINDINGS), why, errors)
    if request.dry_run:
        return Result("create", CreateOutcome(plan, True, None, None, findings=findings))
    if show_plan is not None:
        show_plan(plan, findings)
    if confirm is not None and not confirm(plan):
        outcome_aborted = CreateOutcome(plan, False, None, None, aborted=True, findings=findings)
        return Result("create", outcome_aborted, int(ExitCode.OK), ("aborted: nothing was changed",))
    created = create_env(plan, outcome.records, recipe.origin, force=request.force, reporter=reporter)
    if not request.probe:
        return Result("create", CreateOutcome(plan, False, created, None, findings=findings))
    report = run_probe(prefix, spec_for(prefix, recipe))
    update_record_probe(prefix, report.summary(), report.healthy)
    messages: tuple[str, ...] = ()
    code = ExitCode.OK
    if not report.healthy:
        code = ExitCode.FINDINGS
        messages = (
            f"the env was created but its probe failed; it is kept at {prefix} and marked unhealthy in etc/envkit/record.json",
            f"fix: follow each failed check's remedy, then 'envkit probe -p {prefix}'; or remove it with 'rm -rf {prefix}'",
        )
    return Result("create", CreateOutcome(plan, False, created, report, findings=findings), int(code), messages)
