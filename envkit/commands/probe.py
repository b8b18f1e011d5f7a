"""`envkit probe`: run the probe in any conda env (envkit-made or not)."""

from __future__ import annotations

from envkit.commands import Result
from envkit.envs import find_env
from envkit.errors import ExitCode
from envkit.probe.runner import run_probe, spec_for
from envkit.recipe.loader import load_recipe
from envkit.record import read_record


def probe(env: str) -> Result:
    prefix = find_env(env)
    record = read_record(prefix)
    recipe = None
    if record and record.get("recipe", {}).get("path"):
        try:
            recipe = load_recipe(record["recipe"]["path"])
        except Exception:  # a moved or edited recipe must not stop the probe: fall back to defaults
            recipe = None
    report = run_probe(prefix, spec_for(prefix, recipe))
    return Result("probe", report, int(ExitCode.OK if report.healthy else ExitCode.FINDINGS))
