"""How many CPUs a process on this machine may use, which is what a thread count must fit.

`os.cpu_count()` is the machine's; a job gets less. Slurm and `taskset` narrow the process's
affinity mask (a 64-core node's login shell sees 64, a job on 8 of its CPUs sees 8), and Docker's
`--cpus` and Kubernetes' CPU limits give a cgroup CPU quota, which no mask shows. A Slurm site
without task/affinity or task/cgroup binds nothing at all: there the job's own variables are the
only record of its allocation (slurm_cpus). A thread count worked out from the machine's total
oversubscribes exactly those jobs. Linux only: elsewhere, and where a file here cannot be read,
the figures fall back to `os.cpu_count()`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

PHYSICAL_CORES = "physical-cores"  # a recipe's thread count worked out here: physical_cores()

CPUINFO = Path("/proc/cpuinfo")
SELF_CGROUP = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def allowed_cpus() -> frozenset[int] | None:
    """The CPUs this process may run on; None where the platform cannot tell."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is None:
        return None
    try:
        return frozenset(getaffinity(0))
    except OSError:
        return None


def cpu_quota(self_cgroup: Path = SELF_CGROUP, root: Path = CGROUP_ROOT) -> float | None:
    """The tightest CPU quota of this process's cgroup and its parents, in CPUs (cgroup v2's
    cpu.max, v1's cpu.cfs_quota_us over cpu.cfs_period_us); None where none is set."""
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return None
    quotas = []
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        if controllers == "":  # v2's single hierarchy
            quotas += [q for d in _dirs(root, path) if (q := _v2_quota(d / "cpu.max")) is not None]
        elif "cpu" in controllers.split(","):
            mount = root / controllers
            if not mount.is_dir():
                mount = root / "cpu"
            quotas += [q for d in _dirs(mount, path) if (q := _v1_quota(d)) is not None]
    return min(quotas) if quotas else None


def slurm_cpus(environ: Mapping[str, str] | None = None) -> int | None:
    """The CPUs Slurm gave this process, from the job's variables; None outside a job. In a step
    (an `srun` task) that is one task's share: SLURM_CPUS_PER_TASK, else the node's CPUs over the
    step's tasks there. In the batch script (or an `salloc` shell) it is the job's CPUs on this
    node, which everything the script launches there shares."""
    env = os.environ if environ is None else environ
    if not env.get("SLURM_JOB_ID"):
        return None
    on_node = _count(env.get("SLURM_CPUS_ON_NODE"))
    if _in_batch_script(env):
        return on_node
    per_task = _count(env.get("SLURM_CPUS_PER_TASK"))
    if per_task is not None:
        return per_task
    # "2(x3),1": the first figure is this node's when the step's nodes come in the usual order
    tasks = _count(re.split(r"[(,]", env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or "")[0])
    return max(1, on_node // tasks) if on_node is not None and tasks else on_node


def slurm_batch_tasks(environ: Mapping[str, str] | None = None) -> int:
    """The tasks of the Slurm batch job whose script this process runs in; 0 outside one, and
    inside an srun step (whose tasks are already started). The probe's DDP check starts that many
    ranks with srun, as the job's own launches do."""
    env = os.environ if environ is None else environ
    return (_count(env.get("SLURM_NTASKS")) or 0) if env.get("SLURM_JOB_ID") and _in_batch_script(env) else 0


def _in_batch_script(env: Mapping[str, str]) -> bool:
    """A job's batch script (or an salloc shell) rather than one of its srun steps."""
    return "SLURM_STEP_ID" not in env


def usable_cpus() -> int:
    """Logical CPUs this process may use: its affinity mask, cut to its cgroup's quota and to its
    Slurm allocation."""
    allowed = allowed_cpus()
    return within_quota(_within_job(len(allowed) if allowed else os.cpu_count() or 1), cpu_quota())


def physical_cores() -> int:
    """One thread per core, as torch's own default, on the cores this process may use."""
    try:
        text = CPUINFO.read_text()
    except OSError:
        text = ""
    allowed = allowed_cpus()
    cpus = cores_in(text, allowed) or (len(allowed) if allowed else os.cpu_count() or 1)
    return within_quota(_within_job(cpus), cpu_quota())


def cores_in(cpuinfo: str, allowed: frozenset[int] | None) -> int:
    """Distinct (package, core) pairs of /proc/cpuinfo among the allowed CPUs (all where None);
    0 where the text gives no topology."""
    cores: set[tuple[str, str]] = set()
    processor = package = core = None
    for line in [*cpuinfo.splitlines(), ""]:
        if not line.strip():
            if core is not None and (allowed is None or processor is None or int(processor) in allowed):
                cores.add((package or "0", core))
            processor = package = core = None
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "processor" and value.isdigit():
            processor = value
        elif key == "physical id":
            package = value
        elif key == "core id":
            core = value
    return len(cores)


def within_quota(cpus: int, quota: float | None) -> int:
    """A quota of 2.5 CPUs runs 2 threads: a third would be throttled, and an OpenMP team waits
    for its slowest thread."""
    return max(1, min(cpus, int(quota)) if quota is not None else cpus)


def _within_job(cpus: int) -> int:
    job = slurm_cpus()
    return min(cpus, job) if job is not None else cpus


def _count(text: str | None) -> int | None:
    """A positive count from a Slurm variable; None where it is absent or not one."""
    return int(text) if text is not None and text.isdigit() and int(text) > 0 else None


def _dirs(mount: Path, path: str) -> list[Path]:
    """The cgroup's own folder and its parents' up to the mount, the own one first. Inside a
    container the path may name the host's hierarchy, which is not mounted: the mount's root then."""
    parts = [p for p in path.strip("/").split("/") if p]
    found = [mount.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]
    return [d for d in found if d.is_dir()] or [mount]


def _v2_quota(cpu_max: Path) -> float | None:
    try:
        quota, _, period = cpu_max.read_text().strip().partition(" ")
        return int(quota) / int(period) if quota != "max" and int(period) > 0 else None
    except (OSError, ValueError):
        return None


def _v1_quota(folder: Path) -> float | None:
    try:
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None
