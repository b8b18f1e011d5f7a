"""Run the catalog over one or many envs; merge live-probe findings when asked."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from envkit.audit.inventory import Inventory, read_inventory
from envkit.audit.rules import RULES, SEVERITY_ORDER, Rule, Severity
from envkit.errors import EnvkitError
from envkit.probe.model import ProbeReport


@dataclass(frozen=True)
class Finding:
    rule_id: str
    slug: str
    severity: Severity
    title: str
    evidence: str
    fix: str
    fixable: bool


@dataclass(frozen=True)
class EnvAudit:
    prefix: Path
    findings: tuple[Finding, ...]
    envkit_managed: bool
    packages: int
    error: str | None = None

    @property
    def worst(self) -> Severity | None:
        if not self.findings:
            return None
        return max((f.severity for f in self.findings), key=lambda s: SEVERITY_ORDER[s])


def findings_for(inv: Inventory, rules: tuple[Rule, ...] = RULES) -> list[Finding]:
    out = []
    for rule in rules:
        for evidence in rule.check(inv):
            out.append(Finding(rule.id, rule.slug, rule.severity, rule.title, evidence, rule.fix, rule.safe_fix is not None))
    return out


def probe_findings(report: ProbeReport) -> list[Finding]:
    out = []
    for check in report.checks:
        if check.status in ("fail", "warn"):
            severity: Severity = "error" if check.status == "fail" else "warning"
            evidence = check.evidence.splitlines()[0] if check.evidence else check.title
            out.append(Finding(f"PROBE:{check.id}", f"probe-{check.id}", severity, f"probe: {check.title}", evidence, check.remedy, False))
    return out


def audit_env(prefix: Path, *, probe: bool = False, cuda_driver: str | None = None) -> EnvAudit:
    inv = read_inventory(prefix, cuda_driver=cuda_driver)
    findings = findings_for(inv)
    if probe:
        from envkit.probe.runner import run_probe

        try:
            findings += probe_findings(run_probe(prefix))
        except EnvkitError as exc:
            findings.append(Finding("PROBE:run", "probe-run", "error", "probe could not run", exc.message, exc.hint or "", False))
    return EnvAudit(prefix, tuple(findings), inv.record is not None, len(inv.packages))


def audit_many(prefixes: list[Path], *, probe: bool = False, cuda_driver: str | None = None) -> list[EnvAudit]:
    """Static audits are I/O bound and run in parallel; a broken env is reported, not fatal."""

    def one(prefix: Path) -> EnvAudit:
        try:
            return audit_env(prefix, probe=probe, cuda_driver=cuda_driver)
        except EnvkitError as exc:
            return EnvAudit(prefix, (), False, 0, error=exc.message)

    if len(prefixes) == 1:
        return [one(prefixes[0])]
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(one, prefixes))
