"""`envkit probe`: run the probe in any conda env (envkit-made or not) and, for an envkit env,
record its health: the record says what the last probe found."""

from __future__ import annotations

from pathlib import Path

from envkit.commands import Result
from envkit.create import probe_and_keep
from envkit.errors import ExitCode


def probe(prefix: Path) -> Result:
    report, kept = probe_and_keep(prefix)
    return Result("probe", report, int(ExitCode.OK if report.healthy else ExitCode.FINDINGS), (kept,) if kept else ())
