"""Typed probe results, parsed from the probe script's versioned JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal

from envkit.core.errors import ProbeError
from envkit.probe.inenv import PROBE_VERSION

Status = Literal["pass", "warn", "fail", "skip"]


@dataclass(frozen=True)
class CheckResult:
    """One probe check's verdict, with the evidence behind it and what to do about a failure."""

    id: str
    title: str
    status: Status
    evidence: str
    remedy: str
    data: dict[str, Any]
    seconds: float | None = None


@dataclass(frozen=True)
class ProbeReport:
    """Every check the probe ran in one env, how long it took, and where it ran: the host, and the
    Slurm job when a scheduler ran it (`envkit probe --slurm`), since a GPU is proven only on the
    node that has one."""

    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = ("status",)

    prefix: str
    python: str
    seconds: float
    checks: tuple[CheckResult, ...]
    node: str = ""
    slurm_job: str = ""
    platform: str = ""  # where it ran (a Slurm job's node, for --slurm)
    machine: tuple[str, ...] = ()  # the virtual packages there (__glibc=2.36, __cuda=12.4, __cuda_arch=9.0)

    @property
    def status(self) -> Status:
        statuses = {c.status for c in self.checks}
        return "fail" if "fail" in statuses else "warn" if "warn" in statuses else "pass"

    @property
    def healthy(self) -> bool:
        return self.status != "fail"

    def summary(self) -> dict[str, Any]:
        """What the env's record keeps of the last probe. `gpu` says whether the GPU part was proven
        on the machine that ran it: an env made on a login node says 'not proven' until a probe on
        a GPU node passes."""
        gpu = next((c for c in self.checks if c.id == "gpu"), None)
        runtimes = next((c for c in self.checks if c.id == "runtimes"), None)
        libraries = (runtimes.data.get("libraries") if runtimes else None) or []
        return {
            "status": self.status,
            "seconds": self.seconds,
            "checks": {c.id: c.status for c in self.checks},
            "failed": [c.id for c in self.checks if c.status == "fail"],
            "warned": [c.id for c in self.checks if c.status == "warn"],
            # what the probe's process had mapped: `envkit toolchain` shows it beside the packages
            "loaded": [
                {"kind": str(lib.get("kind", "")), "api": str(lib.get("api", "")), "path": str(lib.get("path", ""))}
                for lib in libraries
                if isinstance(lib, dict)
            ],
            "gpu": None if gpu is None else {"proven": gpu.status == "pass", "status": gpu.status, "evidence": gpu.evidence[:300]},
            "node": self.node,
            "slurm_job": self.slurm_job,
        }

    def dumps(self) -> str:
        """The report in the probe's own JSON, which parse_report reads back: how a Slurm job hands
        its report to the envkit that submitted it."""
        return json.dumps({"envkit_probe": PROBE_VERSION, **asdict(self)})


def parse_report(text: str) -> ProbeReport:
    try:
        doc = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ProbeError(
            "the probe printed no JSON report", hint="run 'envkit probe' with the env's python on PATH to see its output"
        ) from None
    if doc.get("envkit_probe") != PROBE_VERSION:
        raise ProbeError(f"unsupported probe report version {doc.get('envkit_probe')!r}")
    checks = []
    for c in doc["checks"]:
        status = c["status"]
        if status not in ("pass", "warn", "fail", "skip"):
            raise ProbeError(f"probe check {c.get('id')!r} has unknown status {status!r}")
        checks.append(
            CheckResult(c["id"], c["title"], status, c.get("evidence", ""), c.get("remedy", ""), c.get("data", {}), c.get("seconds"))
        )
    where = {key: doc[key] for key in ("node", "slurm_job", "platform") if isinstance(doc.get(key), str)}
    machine = doc.get("machine")
    seen = tuple(str(v) for v in machine) if isinstance(machine, list) else ()
    return ProbeReport(doc["prefix"], doc["python"], doc["seconds"], tuple(checks), **where, machine=seen)
