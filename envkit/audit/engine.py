"""Run the catalog over one or many envs; merge live-probe findings when asked."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.audit.inventory import Inventory, cuda_driver_version, plan_inventory, read_inventory
from envkit.audit.rules import RULES, SEVERITY_ORDER, Rule, Severity
from envkit.core.errors import EnvkitError
from envkit.prefix.installed import CondaPackage

if TYPE_CHECKING:
    from envkit.prefix.kernels import KernelSpec
    from envkit.probe.model import ProbeReport
    from envkit.solve.plan import Plan


@dataclass(frozen=True)
class Finding:
    """One rule's verdict on one env or plan, in words a person acts on (rendered, or JSON for CI)."""

    rule_id: str
    slug: str
    severity: Severity
    title: str
    evidence: str
    fix: str
    fixable: bool
    forced: bool = False  # an error the recipe accepts under `force:`; shown as a warning


@dataclass(frozen=True)
class EnvAudit:
    """All findings for one prefix; `error` when the env could not be read at all."""

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
            out.append(Finding(rule.id, rule.slug, rule.severity, rule.title, evidence, rule.fix_for(inv), rule.safe_fix is not None))
    return out


def _pip_names(specs: tuple[str, ...]) -> list[str]:
    if not specs:
        return []
    from packaging.requirements import Requirement  # costs ~50 ms: loaded for pip lists only
    from packaging.utils import canonicalize_name

    return [str(canonicalize_name(Requirement(spec).name)) for spec in specs]


def inventory_of_plan(plan: Plan, *, machine: bool = True) -> Inventory:
    """The env a plan will make, as the audit's rules see an env (no files yet). `machine=False`:
    the plan is for no machine in particular (a lock, which the whole team installs), so this
    machine's CPU and driver are not judged, as for another platform."""
    from envkit.solve import backend

    packages = [CondaPackage(p.name, p.version, p.build, p.channel, p.depends) for p in plan.packages]
    here = machine and plan.platform == backend.native_platform()
    return plan_inventory(
        plan.prefix,
        packages,
        _pip_names(plan.pip_specs),
        plan.activation,
        cuda_driver=cuda_driver_version() if here else None,
        # the GPUs the plan was solved for: this machine's, or the ones its recipe declares
        cuda_arch=next((v.partition("=")[2] for v in plan.virtual_packages if v.startswith("__cuda_arch=")), None),
        machine=here,
    )


def audit_plan(plan: Plan, force: tuple[str, ...] = (), *, machine: bool = True) -> list[Finding]:
    """The audit's static rules over a solved plan, before anything is installed: one catalog, two
    moments. An error the recipe names under `force:` becomes a warning, marked forced."""
    findings = findings_for(inventory_of_plan(plan, machine=machine))
    return [replace(f, severity="warning", forced=True) if f.severity == "error" and f.rule_id in force else f for f in findings]


def probe_findings(report: ProbeReport) -> list[Finding]:
    out = []
    for check in report.checks:
        if check.status in ("fail", "warn"):
            severity: Severity = "error" if check.status == "fail" else "warning"
            evidence = check.evidence.splitlines()[0] if check.evidence else check.title
            out.append(Finding(f"PROBE:{check.id}", f"probe-{check.id}", severity, f"probe: {check.title}", evidence, check.remedy, False))
    return out


def audit_env(
    prefix: Path,
    *,
    probe: bool = False,
    cuda_driver: str | None = None,
    cuda_arch: str | None = None,
    kernels: tuple[KernelSpec, ...] | None = None,
) -> EnvAudit:
    inv = read_inventory(prefix, cuda_driver=cuda_driver, cuda_arch=cuda_arch, kernels=kernels)
    findings = findings_for(inv)
    if probe:
        try:
            from envkit.probe.runner import run_probe

            findings += probe_findings(run_probe(prefix))
        except EnvkitError as exc:
            findings.append(Finding("PROBE:run", "probe-run", "error", "probe could not run", exc.message, exc.hint or "", False))
    return EnvAudit(prefix, tuple(findings), inv.record is not None, len(inv.packages))


def _audit_one(prefix: Path, probe: bool, cuda_driver: str | None, cuda_arch: str | None, kernels: tuple[KernelSpec, ...]) -> EnvAudit:
    try:
        return audit_env(prefix, probe=probe, cuda_driver=cuda_driver, cuda_arch=cuda_arch, kernels=kernels)
    except EnvkitError as exc:
        return EnvAudit(prefix, (), False, 0, error=" ".join(exc.lines()))  # with its hint: the fix is what an unreadable env needs most


def audit_many(
    prefixes: list[Path], *, probe: bool = False, cuda_driver: str | None = None, cuda_arch: str | None = None
) -> list[EnvAudit]:
    """`cuda_driver`, `cuda_arch`: this machine's __cuda and __cuda_arch. A broken env is reported,
    not fatal. Static audits are dominated by JSON parsing (CPU, GIL), so many envs are split across
    forked processes; probes wait on subprocesses, so threads do."""
    from envkit.prefix.envs import all_envs
    from envkit.prefix.kernels import installed_kernels, kernel_dirs

    kernels = installed_kernels(kernel_dirs(tuple(dict.fromkeys([*prefixes, *all_envs()]))))  # Jupyter's: read once for all
    workers = min(len(prefixes), os.cpu_count() or 1)
    if workers <= 1 or len(prefixes) < 4:
        return [_audit_one(p, probe, cuda_driver, cuda_arch, kernels) for p in prefixes]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    if probe or not _single_threaded():
        # a fork copies only the thread that forks: a lock another thread held (rattler's runtime,
        # a probe's pipe reader) stays held for ever in the child
        with ThreadPoolExecutor(max_workers=workers) as threads:
            return list(threads.map(lambda p: _audit_one(p, probe, cuda_driver, cuda_arch, kernels), prefixes))
    chunks = [prefixes[i::workers] for i in range(workers)]
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
        parts = list(pool.map(_audit_chunk, chunks, [cuda_driver] * workers, [cuda_arch] * workers, [kernels] * workers))
    by_prefix = {a.prefix: a for part in parts for a in part}
    return [by_prefix[p] for p in prefixes]


def _single_threaded() -> bool:
    """Whether this process runs one thread (native ones too, which `threading` does not see)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # no /proc: assume the worst
        return False


def _audit_chunk(prefixes: list[Path], cuda_driver: str | None, cuda_arch: str | None, kernels: tuple[KernelSpec, ...]) -> list[EnvAudit]:
    return [_audit_one(p, False, cuda_driver, cuda_arch, kernels) for p in prefixes]
