"""`envkit probe`: run the probe in any conda env (envkit-made or not) and, for an envkit env,
record its health: the record says what the last probe found."""

from __future__ import annotations

from pathlib import Path

from envkit.commands import Result
from envkit.create import update_record_probe
from envkit.errors import ExitCode
from envkit.probe.runner import run_probe


def probe(prefix: Path) -> Result:
    report = run_probe(prefix)
    update_record_probe(prefix, report.summary(), report.healthy)
    return Result("probe", report, int(ExitCode.OK if report.healthy else ExitCode.FINDINGS))
