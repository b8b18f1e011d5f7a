"""One verdict on an env's health, read from its record, behind every command that speaks of it:
`list`, `toolchain`, `audit` (EK043) and through it `conda doctor`, `create` and `probe`.

The verdict is the last probe's, and says where it came from: a probe on a date (with the checks
that warned or failed), or none yet, where only the static audit speaks. A probe that passed on a
machine without a GPU leaves the GPU part "not yet proven on a GPU"; one that passed on a GPU node
says which ("proven on a GPU on gpu-node-3"), since a probe run on a login node proves nothing
about the nodes a job gets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from envkit.core.errors import one_line

if TYPE_CHECKING:
    from envkit.prefix.envrecord import EnvRecord

HealthState = Literal["healthy", "warn", "unhealthy", "not probed"]


@dataclass(frozen=True)
class LoadedLibrary:
    """A BLAS or OpenMP library the probe found mapped into its process."""

    kind: str
    api: str
    path: str


@dataclass(frozen=True)
class Health:
    state: HealthState
    basis: str  # "probe at DATE on HOST (Slurm job N)" or "not probed: the static audit alone"
    gpu: str | None  # "proven on a GPU", "not yet proven on a GPU", or None (no GPU part)
    warned: tuple[str, ...] = ()  # the probe checks that warned
    failed: tuple[str, ...] = ()
    loaded: tuple[LoadedLibrary, ...] = ()

    def line(self) -> str:
        """The verdict in one line: `warn (probe at 2026-12-05T10:00:00+00:00: runtimes warned)`."""
        details = [self.basis]
        if self.failed:
            details.append(", ".join(self.failed) + " failed")
        if self.warned:
            details.append(", ".join(self.warned) + " warned")
        if self.gpu:
            details.append(self.gpu)
        return f"{self.state} ({'; '.join(details)})"


# radon cc 22: reads a record that may be old or hand-edited: each missing or odd part is a branch, never a crash
def health_of(record: EnvRecord | None) -> Health:
    """The verdict an env's record keeps (envkit.install.create.keep_verdict), as a Health."""
    probe = record.probe if record is not None else None
    if probe is None:
        return Health("not probed", "not probed: the static audit alone", None)
    checks = probe.get("checks") if isinstance(probe.get("checks"), dict) else {}
    assert isinstance(checks, dict)
    failed = tuple(sorted(str(k) for k, v in checks.items() if v == "fail"))
    warned = tuple(sorted(str(k) for k, v in checks.items() if v == "warn"))
    status = probe.get("status")
    state: HealthState = "unhealthy" if status == "fail" or failed else "warn" if status == "warn" or warned else "healthy"
    when = probe.get("at")
    node, job = _one_line(probe.get("node")), _one_line(probe.get("slurm_job"))
    basis = f"probe at {when}" if isinstance(when, str) else "probe (date not kept)"
    basis += (f" on {node}" if node else "") + (f" (Slurm job {job})" if job else "")
    gpu = probe.get("gpu")
    gpu_line = None
    if isinstance(gpu, dict):
        gpu_line = ("proven on a GPU" + (f" on {node}" if node else "")) if gpu.get("proven") else "not yet proven on a GPU"
    libs = probe.get("loaded")
    loaded = tuple(
        LoadedLibrary(str(lib.get("kind", "")), str(lib.get("api", "")), str(lib.get("path", "")))
        for lib in (libs if isinstance(libs, list) else [])
        if isinstance(lib, dict)
    )
    return Health(state, basis, gpu_line, warned, failed, loaded)


def _one_line(value: object) -> str:
    """A name the record keeps, fit for one line: a hand-edited record must not break it."""
    return one_line(value)[:200] if isinstance(value, str) else ""
