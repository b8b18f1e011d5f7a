"""`envkit probe`: run the probe in any conda env (envkit-made or not)."""

from __future__ import annotations

from envkit.commands import Result
from envkit.envs import find_env
from envkit.errors import ExitCode
from envkit.probe.runner import run_probe


def probe(env: str) -> Result:
    report = run_probe(find_env(env))
    return Result("probe", report, int(ExitCode.OK if report.healthy else ExitCode.FINDINGS))
