"""`envkit audit`: static rules over existing envs, optionally the live probe, optionally safe fixes."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from envkit.audit.engine import EnvAudit, audit_many
from envkit.audit.fix import FixPlan, apply_fix, plan_fix
from envkit.audit.inventory import cuda_driver_version
from envkit.audit.rules import RULES, SEVERITY_ORDER, Rule, lookup
from envkit.commands import Result
from envkit.envs import all_envs, find_env
from envkit.errors import ExitCode, UsageError


@dataclass(frozen=True)
class AuditOutcome:
    audits: tuple[EnvAudit, ...]
    min_severity: str
    fixes: tuple[FixPlan, ...]
    applied: tuple[str, ...]


def explain(rule_id: str) -> Result:
    rule = lookup(rule_id)
    if rule is None:
        raise UsageError(f"unknown audit rule '{rule_id}'", hint="'envkit audit --explain EK001'; see the README for the catalog")
    return Result("audit explain", rule)


def list_rules() -> tuple[Rule, ...]:
    return RULES


def _at_or_above(audits: list[EnvAudit], min_severity: str) -> list[EnvAudit]:
    floor = SEVERITY_ORDER[min_severity]
    return [replace(a, findings=tuple(f for f in a.findings if SEVERITY_ORDER[f.severity] >= floor)) for a in audits]


def audit(
    targets: list[str],
    *,
    all_envs_flag: bool = False,
    probe: bool = False,
    fix: bool = False,
    min_severity: str = "info",
    confirm_fix: Callable[[FixPlan], bool] | None = None,
) -> Result:
    if min_severity not in SEVERITY_ORDER:
        raise UsageError(f"--min-severity {min_severity!r}: expected info, warning or error")
    if all_envs_flag:
        prefixes = all_envs()
    elif targets:
        prefixes = [find_env(t) for t in targets]
    elif os.environ.get("CONDA_PREFIX"):
        prefixes = [find_env(os.environ["CONDA_PREFIX"])]
    else:
        raise UsageError(
            "no env to audit: no NAME or PREFIX given and no env is active (CONDA_PREFIX unset)",
            hint="pass an env name, a prefix, or --all",
        )
    audits = _at_or_above(audit_many(prefixes, probe=probe, cuda_driver=cuda_driver_version()), min_severity)
    fixes: list[FixPlan] = []
    applied: list[str] = []
    if fix:
        for a in audits:
            fixable = [f for f in a.findings if f.fixable]
            if not fixable:
                continue
            plan = plan_fix(Path(a.prefix), fixable)
            fixes.append(plan)
            if plan.changes and (confirm_fix is None or confirm_fix(plan)):
                applied += [str(p) for p in apply_fix(plan)]
        if applied:
            audits = _at_or_above(audit_many([a.prefix for a in audits], cuda_driver=cuda_driver_version()), min_severity)
    failing = any(f.severity == "error" for a in audits for f in a.findings) or any(a.error for a in audits)
    return Result(
        "audit", AuditOutcome(tuple(audits), min_severity, tuple(fixes), tuple(applied)), int(ExitCode.FINDINGS if failing else ExitCode.OK)
    )
