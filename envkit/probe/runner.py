"""Run the probe script with the env's own python under the env's activation."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from importlib import resources
from pathlib import Path

from envkit.activation.runenv import activated_environment
from envkit.errors import ProbeError
from envkit.probe.model import ProbeReport, parse_report
from envkit.recipe.model import ProbeSpec, Recipe, TorchVariant
from envkit.record import read_record


def probe_script_text() -> str:
    return resources.files("envkit.probe").joinpath("probe_script.py").read_text(encoding="utf-8")


def installed_names(prefix: Path) -> set[str]:
    names = set()
    for path in (prefix / "conda-meta").glob("*.json"):
        parts = path.stem.rsplit("-", 2)
        if len(parts) == 3:
            names.add(parts[0])
    for site in prefix.glob("lib/python3*/site-packages"):
        for dist in site.glob("*.dist-info"):
            names.add(dist.name.split("-", 1)[0].lower().replace("_", "-"))
    return names


def installed_torch_build(prefix: Path) -> TorchVariant | None:
    """The torch build the packages claim to be, so the probe can tell a CPU torch that shadows a
    CUDA one. conda builds say it in the build string (cuda129_mkl_..., py3.11_cuda12.1_..., cpu_...);
    pip wheels in the local version (+cu130, +cpu). A plain PyPI version says nothing."""
    for record in (prefix / "conda-meta").glob("pytorch-*.json"):
        if record.stem.rsplit("-", 2)[0] != "pytorch":
            continue
        try:
            build = str(json.loads(record.read_text(encoding="utf-8")).get("build", ""))
        except (OSError, ValueError):
            continue
        if "cuda" in build:
            return "cuda"
        if "cpu" in build:
            return "cpu"
    for site in prefix.glob("lib/python3*/site-packages"):
        for dist in site.glob("torch-*.dist-info"):
            local = dist.name[: -len(".dist-info")].partition("+")[2]
            if re.fullmatch(r"cu\d+|rocm[\d.]+", local):
                return "cuda"
            if local == "cpu":
                return "cpu"
    return None


def default_spec(prefix: Path) -> ProbeSpec:
    """Checks for an env envkit did not make, derived from what is installed."""
    names = installed_names(prefix)
    has_torch = bool({"pytorch", "torch"} & names)
    imports = [m for m, pkgs in (("numpy", {"numpy"}), ("torch", {"pytorch", "torch"}), ("mkl", {"mkl-service"})) if pkgs & names]
    orders = [("torch", "numpy")] if has_torch and "numpy" in imports else []
    return ProbeSpec(
        imports=tuple(imports),
        import_orders=tuple(orders),
        ddp=has_torch,
        nproc=2,
        torch_build=installed_torch_build(prefix) if has_torch else None,
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
    spec = spec or default_spec(prefix)
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
