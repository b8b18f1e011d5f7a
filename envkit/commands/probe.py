"""`envkit probe`: run the probe in any conda env (envkit-made or not) and, for an envkit env,
record its health: the record says what the last probe found."""

from __future__ import annotations

from pathlib import Path

from envkit.commands import Result
from envkit.create import keep_verdict
from envkit.errors import ExitCode
from envkit.probe.runner import run_probe
from envkit.record import record_digest


def probe(prefix: Path) -> Result:
    basis = record_digest(prefix)
    report = run_probe(prefix)
    kept = keep_verdict(prefix, report.summary(), report.healthy, basis)
    return Result("probe", report, int(ExitCode.OK if report.healthy else ExitCode.FINDINGS), (kept,) if kept else ())
