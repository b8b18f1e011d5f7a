"""Run the probe script with the env's own python under the env's activation."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from importlib import resources
from pathlib import Path

from envkit.activation.runenv import activated_environment
from envkit.errors import EnvkitError, ProbeError
from envkit.installed import conda_packages, pip_dists, torch_build
from envkit.probe.model import ProbeReport, parse_report
from envkit.recipe.loader import load_recipe
from envkit.recipe.model import ProbeSpec, Recipe
from envkit.record import read_record


def probe_script_text() -> str:
    return resources.files("envkit.probe").joinpath("probe_script.py").read_text(encoding="utf-8")


def default_spec(prefix: Path) -> ProbeSpec:
    """Checks for an env envkit did not make, derived from what is installed."""
    packages, pip = conda_packages(prefix), pip_dists(prefix)
    names = set(packages) | set(pip)
    has_torch = bool({"pytorch", "torch"} & names)
    imports = [m for m, pkgs in (("numpy", {"numpy"}), ("torch", {"pytorch", "torch"}), ("mkl", {"mkl-service"})) if pkgs & names]
    orders = [("torch", "numpy")] if has_torch and "numpy" in imports else []
    return ProbeSpec(
        imports=tuple(imports),
        import_orders=tuple(orders),
        ddp=has_torch,
        nproc=2,
        torch_build=torch_build(packages, pip) if has_torch else None,
    )


def spec_for(prefix: Path, recipe: Recipe | None) -> ProbeSpec:
    """The recipe's probe section when it names what to import, else the defaults for what is
    installed; the recipe's torch build wins over what the packages claim."""
    if recipe is None:
        return default_spec(prefix)
    if recipe.probe.imports or recipe.probe.import_orders:
        return recipe.probe
    spec = default_spec(prefix)
    return replace(spec, torch_build=recipe.probe.torch_build or spec.torch_build)


def spec_for_env(prefix: Path) -> ProbeSpec:
    """The checks for an existing env: its recipe's, when envkit made it and the recipe still loads."""
    record = read_record(prefix)
    recipe = None
    if record and record.get("recipe", {}).get("path"):
        try:
            recipe = load_recipe(record["recipe"]["path"])
        except EnvkitError:  # a moved or edited recipe must not stop the probe: fall back to defaults
            recipe = None
    return spec_for(prefix, recipe)


def probe_config(spec: ProbeSpec, threading: dict[str, str]) -> dict[str, object]:
    return {
        "version": 1,
        "imports": list(spec.imports),
        "import_orders": [list(o) for o in spec.import_orders],
        "ddp": spec.ddp,
        "nproc": spec.nproc,
        "expect": dict(spec.expect),
        "timeout": spec.timeout,
        "threading": threading,
        "torch_build": spec.torch_build,
    }


def expected_threading(prefix: Path) -> dict[str, str]:
    record = read_record(prefix)
    if not record:
        return {}
    return {op["name"]: op["value"] for op in record["activation"]["ops"] if op["action"] == "set"}


def run_probe(prefix: Path, spec: ProbeSpec | None = None) -> ProbeReport:
    python = prefix / "bin" / "python"
    if not python.exists():
        raise ProbeError(f"{python} does not exist: the probe needs the env's own python", hint="install python into the env")
    spec = spec or spec_for_env(prefix)
    env = activated_environment(prefix)
    config = probe_config(spec, expected_threading(prefix))
    try:
        proc = subprocess.run(
            [str(python), "-I", "-c", probe_script_text()],
            input=json.dumps(config),
            env=env,
            capture_output=True,
            text=True,
            timeout=spec.timeout * 3 + 60,
            check=False,
            cwd=str(prefix),
        )
    except subprocess.TimeoutExpired:
        raise ProbeError(f"the probe of {prefix} did not finish in {spec.timeout * 3 + 60}s") from None
    if proc.returncode != 0:
        raise ProbeError(f"the probe crashed in {prefix}: {(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
    return parse_report(proc.stdout)
