"""An envkit recipe from an existing env, so a hand-made env can become a team recipe (`conda env
export --format envkit-recipe`, through the conda plugin).

What is recognisably a conda-forge or pytorch-channel toolchain becomes `toolchain:` (the BLAS from
libblas's build string, the OpenMP runtime from `_openmp_mutex` or the runtime present, the pytorch
flavour from its build string); everything else the user asked for stays an exact package spec.
Activation variables are kept; an env with MKL and no explicit layer gets `mkl_threading_layer:
auto`, so envkit picks the layer its OpenMP runtimes need (the seed crash's fix).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envkit.core.names import NAME_RE
from envkit.core.yamltext import quoted, text

# names the toolchain section stands for: they are not repeated as packages
TOOLCHAIN_NAMES = frozenset(
    {"python", "pytorch", "libtorch", "libblas", "libcblas", "liblapack", "mkl", "_openmp_mutex", "llvm-openmp", "intel-openmp", "nomkl"}
)
CONDA_FORGE_TORCH = re.compile(r"^(?P<kind>cpu|cuda(?P<cuda>\d+))_(?P<blas>mkl|generic)_")
PYTORCH_CHANNEL_TORCH = re.compile(r"^py\d+\.\d+_(?P<kind>cpu|cuda(?P<cuda>[\d.]+)_cudnn[\d.]+)_\d+$")


@dataclass(frozen=True)
class EnvPackage:
    """A package of an existing env, as a recipe written from that env pins it."""

    name: str
    version: str
    build: str
    channel: str  # short name or URL, as the record has it


def _cuda(digits: str) -> str:
    """conda-forge's cuda129 -> 12.9, cuda130 -> 13.0."""
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else digits


# radon cc 21: one branch per toolchain choice (blas, mkl, openmp, pytorch) read off the installed packages
def infer_toolchain(packages: dict[str, EnvPackage]) -> dict[str, object]:
    out: dict[str, object] = {}
    blas = packages.get("libblas")
    if blas is not None:
        flavour = blas.build.rsplit("_", 1)[-1]
        if flavour in ("mkl", "openblas", "blis", "accelerate"):
            out["blas"] = flavour
    mutex = packages.get("_openmp_mutex")
    if mutex is not None and mutex.build.endswith("_llvm"):
        out["openmp"] = "llvm"
    elif mutex is not None and mutex.build.endswith("_gnu"):
        out["openmp"] = "gnu"
    elif "llvm-openmp" in packages and "intel-openmp" not in packages:
        out["openmp"] = "llvm"
    torch = packages.get("pytorch")
    if torch is not None:
        cf = CONDA_FORGE_TORCH.match(torch.build)
        legacy = PYTORCH_CHANNEL_TORCH.match(torch.build)
        if cf is not None and "blas" in out:
            choice: dict[str, object] = {"version": torch.version, "variant": "cpu" if cf["kind"] == "cpu" else "cuda"}
            if cf["cuda"]:
                choice["cuda"] = _cuda(cf["cuda"])
                if "cuda-arch" in packages:  # the GPUs it was solved for (CEP 46), kept for a login node's solve
                    choice["cuda_arch"] = ".".join(packages["cuda-arch"].version.split(".")[:2])
            out["pytorch"] = choice
        elif legacy is not None:
            choice = {"version": torch.version, "variant": "cpu" if legacy["kind"] == "cpu" else "cuda", "source": "pytorch-channel"}
            if legacy["cuda"]:
                choice["cuda"] = ".".join(legacy["cuda"].split(".")[:2])
            out["pytorch"] = choice
            out.pop("openmp", None)  # the pytorch channel brings its own llvm-openmp <16
    if "mkl" in packages and out.get("blas") == "mkl" and "pytorch" not in out:
        out["mkl"] = f"{packages['mkl'].version.rsplit('.', 1)[0]}.*"
    return out


def _recipe_name(name: str | None) -> str:
    candidate = re.sub(r"[^a-z0-9_-]+", "-", (name or "exported").lower()).strip("-_") or "exported"
    return candidate if NAME_RE.match(candidate) else "exported"


# radon cc 33: one branch per recipe field inferred from an env, written in the recipe's field order
def recipe_text(
    name: str | None,
    channels: list[str],
    packages: list[EnvPackage],
    requested: list[str],
    variables: dict[str, str],
    *,
    source: str = "",
    pip: list[str] | None = None,
    left_out: list[str] | None = None,
) -> str:
    """The recipe, as YAML text that `envkit recipes validate` accepts. `pip`: the wheels pip
    installed, as exact requirements; `left_out`: what cannot be carried, said in comments (an
    editable install of the user's own project)."""
    by_name = {p.name: p for p in packages}
    toolchain = infer_toolchain(by_name)
    python = by_name.get("python")
    implied = set(TOOLCHAIN_NAMES) if toolchain else {"python"}
    if "pytorch" not in toolchain:
        implied.discard("pytorch")
    if toolchain.get("blas") != "mkl":
        implied.discard("mkl")
    wanted = requested or [p.name for p in packages]
    specs: list[str] = []
    for spec in wanted:
        spec_name = re.split(r"[\s=<>!~\[]", spec.strip(), maxsplit=1)[0]
        if spec_name in implied or spec_name not in by_name:
            continue
        pkg = by_name[spec_name]
        specs.append(f"{pkg.name} =={pkg.version}")
    recipe_name = _recipe_name(name)
    lines = [
        f"# envkit recipe exported from {source or 'an env'}. Save it as {recipe_name}.yaml (a recipe's file is named",
        "# after it), edit, then `envkit recipes validate` and `envkit lock`.",
        "envkit: 1",
        f"name: {recipe_name}",
        "channels: [" + ", ".join(quoted(c) for c in channels) + "]",
    ]
    if python is not None:
        lines.append(f"python: {quoted('.'.join(python.version.split('.')[:2]))}")
    if specs:
        lines.append("packages:")
        lines += [f"  - {quoted(s)}" for s in specs]
    if toolchain:
        lines.append("toolchain:")
        for key in ("blas", "mkl", "openmp"):
            if key in toolchain:
                lines.append(f"  {key}: {quoted(str(toolchain[key]))}")
        torch = toolchain.get("pytorch")
        if isinstance(torch, dict):
            lines.append("  pytorch:")
            lines += [f"    {k}: {quoted(str(v))}" for k, v in torch.items()]
    threading: list[str] = []
    layer = variables.get("MKL_THREADING_LAYER")
    if layer and layer.lower() in ("gnu", "intel", "sequential", "tbb"):
        threading.append(f"  mkl_threading_layer: {layer.lower()}")
    elif "mkl" in by_name:
        threading.append("  mkl_threading_layer: auto  # envkit sets what the env's OpenMP runtimes need")
    rest = {k: v for k, v in sorted(variables.items()) if k != "MKL_THREADING_LAYER" or not threading}
    if rest:
        threading.append("  env:")
        threading += [f"    {k}: {quoted(v)}" for k, v in rest.items()]
    if pip:
        lines.append("pip:")
        lines += [f"  - {quoted(requirement)}" for requirement in pip]
    if threading:
        lines += ["threading:", *threading]
    lines += [f"# left out: {what}" for what in left_out or ()]
    return text(lines)
