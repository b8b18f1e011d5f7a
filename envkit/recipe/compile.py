"""Compile a recipe's intent into the specs the real channels understand and activation settings.

Spec shapes follow the feedstocks: conda-forge picks a BLAS through the libblas build string
(conda-forge/blas-feedstock), the OpenMP runtime through `_openmp_mutex` (openmp-feedstock), and a
pytorch flavour through its build string (`cpu_mkl_*`, `cuda129_generic_*`, pytorch-cpu-feedstock).
The legacy pytorch channel selects through `pytorch-mutex`, `cpuonly` and `pytorch-cuda`
(pytorch/builder) and needs `mkl<2024.1` (pytorch/pytorch#123097).
"""

from __future__ import annotations

from dataclasses import dataclass

import rattler

from envkit.core.cpus import PHYSICAL_CORES
from envkit.core.errors import Location
from envkit.recipe.checker import VERSIONISH_RE, python_spec, spec_name
from envkit.recipe.model import EnvOp, Recipe
from envkit.recipe.platforms import has_mutex, torch_flavour
from envkit.recipe.settings import ActivationSettings, Setting


@dataclass(frozen=True)
class CompiledSpec:
    """A conda spec the solver gets, with why it is there and where the recipe asked for it."""

    spec: str
    reason: str
    origin: Location | None = None

    @property
    def name(self) -> str:
        return spec_name(rattler.MatchSpec(self.spec, strict=False))


@dataclass(frozen=True)
class CompiledRecipe:
    """A recipe turned into what one platform's solve and activation need."""

    recipe: Recipe  # as it is on `platform` (its per_platform entry applied)
    channels: tuple[str, ...]
    platforms: tuple[str, ...]
    conda_specs: tuple[CompiledSpec, ...]
    pip_specs: tuple[str, ...]
    activation: ActivationSettings
    threading_layer: str | None
    platform: str = ""  # what the specs were compiled for


def _strict(spec: str) -> str:
    return str(rattler.MatchSpec(spec, strict=False))


def _version_part(version: str | None) -> str:
    if not version:
        return "*"
    return f"{version}.*" if VERSIONISH_RE.match(version) and "*" not in version and version.count(".") < 2 else version


# radon cc 24: one spec per toolchain choice and pytorch variant, as conda-forge names the builds
def toolchain_specs(recipe: Recipe, platform: str) -> list[CompiledSpec]:
    """The specs that select the toolchain on `platform`, as conda-forge builds it there
    (envkit.recipe.platforms)."""
    tc = recipe.toolchain
    torch = tc.pytorch
    source = torch.source if torch else "conda-forge"
    out: list[CompiledSpec] = []

    def add(spec: str, reason: str, *fields: str) -> None:
        """`fields`: the recipe fields that asked for this spec, first match points at its line."""
        out.append(CompiledSpec(_strict(spec), reason, recipe.located(*fields, "toolchain.pytorch.source", "toolchain.pytorch")))

    if source == "pytorch-channel":
        if tc.blas in (None, "mkl"):
            add("blas=*=mkl", "pytorch-channel builds link MKL through the defaults-style blas mutex", "toolchain.blas")
            add(
                f"mkl {tc.mkl}" if tc.mkl else "mkl <2024.1",
                "mkl>=2024.1 drops iJIT_NotifyEvent that pytorch-channel builds need (pytorch/pytorch#123097)",
                "toolchain.mkl",
            )
        add(
            "llvm-openmp <16",
            "llvm-openmp>=16 collapses CPU affinity with pytorch-channel builds (pytorch/builder#1389)",
            "toolchain.openmp",
        )
    else:
        if tc.blas is not None:
            add(
                f"libblas=*=*{tc.blas}",
                f"conda-forge selects the {tc.blas} BLAS through the libblas build string (blas-feedstock)",
                "toolchain.blas",
            )
            if tc.blas != "mkl":
                add("nomkl", "keeps MKL out so only one BLAS is in the process", "toolchain.blas")
        if tc.mkl:
            add(f"mkl {tc.mkl}", "toolchain.mkl pin", "toolchain.mkl")
        if tc.openmp == "llvm":
            if has_mutex(platform):
                add(
                    "_openmp_mutex=*=*_llvm",
                    "conda-forge switches the OpenMP runtime with the _openmp_mutex build (openmp-feedstock)",
                    "toolchain.openmp",
                )
            add("llvm-openmp", "the LLVM OpenMP runtime", "toolchain.openmp")
        elif tc.openmp == "gnu":
            add(
                "_openmp_mutex=*=*_gnu",
                "conda-forge switches the OpenMP runtime with the _openmp_mutex build (openmp-feedstock)",
                "toolchain.openmp",
            )
        elif tc.openmp == "intel":
            add("intel-openmp", "the Intel OpenMP runtime (libiomp5)", "toolchain.openmp")
        if torch is not None and tc.blas == "openblas" and not platform.startswith("win"):
            add("libopenblas=*=*openmp*", "a pthreads OpenBLAS inside OpenMP regions hangs (pytorch/pytorch#52047)", "toolchain.blas")
    if torch is not None:
        version = _version_part(torch.version)
        if source == "conda-forge":
            flavour, picked = torch_flavour(tc.blas, platform)
            build = "cpu_" + flavour + "*" if torch.variant == "cpu" else f"cuda*_{flavour}*"
            add(
                f"pytorch {version} {build}",
                picked or f"conda-forge pytorch, {torch.variant} build with {flavour} BLAS",
                "toolchain.pytorch.variant",
                "toolchain.pytorch.version",
            )
            if torch.variant == "cuda" and torch.cuda:
                add(f"cuda-version {torch.cuda}.*", "conda-forge picks the CUDA major/minor through cuda-version", "toolchain.pytorch.cuda")
        elif source == "pytorch-channel":
            if torch.variant == "cpu":
                add(f"pytorch {version} *cpu*", "pytorch-channel CPU build", "toolchain.pytorch.version", "toolchain.pytorch.variant")
                add("pytorch-mutex=1.0=cpu", "pytorch-channel CPU/CUDA mutex", "toolchain.pytorch.variant")
                add("cpuonly", "keeps CUDA builds out (pytorch-channel)", "toolchain.pytorch.variant")
            else:
                add(f"pytorch {version} *cuda*", "pytorch-channel CUDA build", "toolchain.pytorch.version", "toolchain.pytorch.variant")
                add("pytorch-mutex=1.0=cuda", "pytorch-channel CPU/CUDA mutex", "toolchain.pytorch.variant")
                if torch.cuda:
                    add(f"pytorch-cuda {torch.cuda}.*", "pytorch-channel CUDA runtime metapackage", "toolchain.pytorch.cuda")
    return out


def pip_torch(recipe: Recipe) -> list[str]:
    torch = recipe.toolchain.pytorch
    if torch is None or torch.source != "pip":
        return []
    if not torch.version:
        return ["torch"]
    return [f"torch=={torch.version}" if VERSIONISH_RE.match(torch.version) else f"torch{torch.version}"]


def effective_threading_layer(recipe: Recipe, platform: str = "linux-64") -> str | None:
    """MKL_THREADING_LAYER for the env, or None when MKL is not in play.

    auto: any libgomp in the process (GNU OpenMP, pip torch, pytorch-channel torch) needs GNU.
    mkl-service treats every runtime other than libiomp5 as foreign and aborts on an explicit INTEL,
    so LLVM's libomp (which also serves the GOMP entry points) gets GNU too; only a pure Intel
    OpenMP toolchain gets INTEL.
    """
    tc = recipe.toolchain
    chosen = recipe.threading.mkl_threading_layer
    if chosen is not None and chosen != "auto":
        return chosen.upper()
    uses_mkl = tc.blas == "mkl" or tc.mkl is not None or any(s.name in ("mkl", "mkl-service") for s in recipe.packages)
    torch = tc.pytorch
    if torch is not None and torch.source == "pytorch-channel" and tc.blas in (None, "mkl"):
        uses_mkl = True
    if not uses_mkl:  # auto where no MKL is in play: nothing to set (no MKL_THREADING_LAYER without MKL)
        return None
    if tc.openmp == "intel" and not (torch is not None and torch.loads_libgomp):
        return "INTEL"
    # MKL's GNU layer (libmkl_gnu_thread) exists on Linux only. On Windows conda-forge's llvm-openmp
    # serves libiomp5md.dll itself, so MKL's default INTEL layer already runs on the one runtime,
    # and mkl-service's libgomp check is Linux-only: leave MKL's default there.
    return "GNU" if platform.startswith("linux") else None


def activation_settings(recipe: Recipe, layer: str | None) -> ActivationSettings:
    """The env's settings; `layer` is effective_threading_layer(recipe)."""
    th = recipe.threading
    out: list[Setting] = []
    if layer is not None:
        why = (
            "explicit threading.mkl_threading_layer"
            if th.mkl_threading_layer not in (None, "auto")
            else "MKL must use the OpenMP runtime already in the process (mkl-service aborts on INTEL with libgomp)"
        )
        out.append(Setting(EnvOp("MKL_THREADING_LAYER", "set", value=layer), why))
    for var, count in (
        ("OMP_NUM_THREADS", th.omp_num_threads),
        ("MKL_NUM_THREADS", th.mkl_num_threads),
        ("OPENBLAS_NUM_THREADS", th.openblas_num_threads),
    ):
        if count is None:
            continue
        if count == PHYSICAL_CORES:
            out.append(Setting(EnvOp(var, "set", value=""), "one thread per physical core", computed=PHYSICAL_CORES))
        else:
            out.append(Setting(EnvOp(var, "set", value=str(count)), f"threading.{var.lower()}"))
    taken = {s.op.name for s in out}
    for op in th.env:
        if op.name in taken:
            out = [s for s in out if s.op.name != op.name]
        out.append(Setting(op, "threading.env"))
    return ActivationSettings(tuple(out))


def compile_recipe(recipe: Recipe, platform: str | None = None) -> CompiledRecipe:
    """Pure: recipe in, specs and settings out, for `platform` (default: this machine's), with the
    recipe's per_platform entry for it applied. Consistency is checked separately."""
    platform = platform or str(rattler.Subdir.current())
    recipe = recipe.for_platform(platform)
    specs: list[CompiledSpec] = []
    if recipe.python:
        specs.append(CompiledSpec(python_spec(recipe.python), "python", recipe.located("python")))
    # A spec the user wrote for a toolchain package replaces envkit's default for that name.
    user_names = {s.name for s in recipe.packages}
    specs += [spec for spec in toolchain_specs(recipe, platform) if spec.name not in user_names]
    specs += [CompiledSpec(pkg.normalized, "recipe package", pkg.origin) for pkg in recipe.packages]
    pip = [*pip_torch(recipe), *(p.normalized for p in recipe.pip)]
    if pip and "pip" not in {s.name for s in specs}:
        specs.append(CompiledSpec("pip", "installs the recipe's pip list", next((p.origin for p in recipe.pip), None)))
    layer = effective_threading_layer(recipe, platform)
    return CompiledRecipe(
        recipe=recipe,
        channels=recipe.channels,
        platforms=recipe.platforms,
        conda_specs=tuple(specs),
        pip_specs=tuple(pip),
        activation=activation_settings(recipe, layer),
        threading_layer=layer,
        platform=platform,
    )
