"""`envkit probe`: run the probe in any conda env (envkit-made or not)."""

from __future__ import annotations

from envkit.commands import Result
from envkit.envs import find_env
from envkit.errors import ExitCode
from envkit.probe.runner import default_spec, run_probe
from envkit.recipe.loader import load_recipe
from envkit.record import read_record


def probe(env: str) -> Result:
    prefix = find_env(env)
    record = read_record(prefix)
    spec = None
    if record and record.get("recipe", {}).get("path"):
        try:
            recipe = load_recipe(record["recipe"]["path"])
            if recipe.probe.imports or recipe.probe.import_orders:
                spec = recipe.probe
        except Exception:  # a moved or edited recipe must not stop the probe: fall back to defaults
            spec = None
    report = run_probe(prefix, spec or default_spec(prefix))
    return Result("probe", report, int(ExitCode.OK if report.healthy else ExitCode.FINDINGS))
