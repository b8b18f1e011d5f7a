"""Rules a recipe is held to before anything is solved: toolchains known to crash, settings that
hide a crash or do nothing. Each check is pure over the recipe (one platform's view of it) and says
what is wrong, or None. Rules of severity "error" stop create, lock and sync; a recipe may list a
rule's id under `force:` to accept the risk, which makes it a warning."""

from __future__ import annotations

import re

import rattler

from envkit.audit.catalog import recipe_rule
from envkit.recipe.model import Recipe


def _names(recipe: Recipe) -> set[str]:
    return {s.name for s in recipe.packages}


def _spec_for(recipe: Recipe, name: str) -> str | None:
    for spec in recipe.packages:
        if spec.name == name:
            return spec.normalized
    return None


def _admits(spec_text: str | None, name: str, version: str) -> bool:
    """Whether a recipe's spec for `name` (None = unpinned) admits `version`."""
    if spec_text is None:
        return True
    match = rattler.MatchSpec(spec_text if spec_text.startswith(name) else f"{name} {spec_text}", strict=False)
    if match.version is None:
        return True
    return bool(rattler.VersionSpec(str(match.version)).matches(rattler.Version(version)))


def _platforms(recipe: Recipe) -> tuple[str, ...]:
    """The platforms the recipe declares; one that declares none is for the machine it runs on."""
    return recipe.platforms or (str(rattler.Subdir.current()),)


def _torch_source(recipe: Recipe) -> str | None:
    return recipe.toolchain.pytorch.source if recipe.toolchain.pytorch else None


def _foreign_openmp(recipe: Recipe) -> str | None:
    """What would put a non-Intel OpenMP runtime in the process. mkl-service takes any runtime but
    libiomp5 for foreign: libgomp (pip and pytorch-channel torch, GNU OpenMP) and LLVM's libomp
    (conda-forge torch and mkl) alike. Torch counts wherever the recipe names it."""
    torch = recipe.toolchain.pytorch
    if torch is not None:
        return f"torch from {torch.source}"
    if "pytorch" in _names(recipe) or "torch" in {s.name for s in recipe.pip}:
        return "torch (listed under packages/pip)"
    if recipe.toolchain.openmp in ("gnu", "llvm"):
        return f"openmp: {recipe.toolchain.openmp}"
    listed = sorted(_names(recipe) & {"llvm-openmp", "libgomp", "_openmp_mutex"})
    return ", ".join(listed) or None


@recipe_rule(
    "RC001",
    "legacy-mkl-2024",
    "error",
    "pytorch-channel build with mkl>=2024.1",
    rationale="mkl 2024.1 dropped iJIT_NotifyEvent, which pytorch-channel libtorch_cpu.so imports: 'undefined symbol: iJIT_NotifyEvent'.",
    fix='Pin toolchain.mkl: "<2024.1" (the shipped pytorch-legacy-channel recipe does), or move to conda-forge pytorch.',
    sources=("https://github.com/pytorch/pytorch/issues/123097",),
)
def _check_legacy_mkl(recipe: Recipe) -> str | None:
    if _torch_source(recipe) != "pytorch-channel":
        return None
    pin = recipe.toolchain.mkl
    spec = _spec_for(recipe, "mkl") or (f"mkl {pin}" if pin else "mkl <2024.1")
    if _admits(spec, "mkl", "2024.1.0"):
        return f"the mkl spec '{spec}' admits mkl>=2024.1, which pytorch-channel builds cannot load; pin toolchain.mkl: \"<2024.1\""
    return None


@recipe_rule(
    "RC002",
    "intel-layer-with-libgomp",
    "error",
    "MKL_THREADING_LAYER=INTEL with a non-Intel OpenMP runtime",
    rationale="mkl-service exits when the layer is INTEL and a non-Intel OpenMP runtime is already loaded: the DDP crash.",
    fix="Use mkl_threading_layer: gnu (or auto, which picks GNU whenever a non-Intel OpenMP runtime can be in the process).",
    sources=("https://github.com/IntelPython/mkl-service/issues/14",),
)
def _check_intel_layer_gomp(recipe: Recipe) -> str | None:
    foreign = _foreign_openmp(recipe) if recipe.threading.mkl_threading_layer == "intel" else None
    if foreign:
        return f"mkl_threading_layer 'intel' with a non-Intel OpenMP runtime ({foreign}) aborts in mkl-service; use 'gnu' or 'auto'"
    return None


@recipe_rule(
    "RC003",
    "intel-and-llvm-openmp",
    "error",
    "intel-openmp and llvm-openmp together",
    rationale="libiomp5 and libomp in one process is the one OpenMP mix threadpoolctl calls unrecoverable.",
    fix="Request one OpenMP runtime: openmp: llvm on conda-forge, and drop intel-openmp from packages.",
    sources=("https://github.com/joblib/threadpoolctl/blob/master/multiple_openmp.md",),
)
def _check_two_openmp(recipe: Recipe) -> str | None:
    names = _names(recipe)
    omp = recipe.toolchain.openmp
    has_intel = "intel-openmp" in names or omp == "intel"
    has_llvm = "llvm-openmp" in names or omp == "llvm"
    if has_intel and has_llvm:
        return "intel-openmp and llvm-openmp both requested: libiomp5 and libomp in one process crash or deadlock"
    return None


def _env_names(recipe: Recipe) -> dict[str, str]:
    return {op.name: op.value for op in recipe.threading.env if op.action == "set"}


@recipe_rule(
    "RC004",
    "kmp-duplicate-lib-ok",
    "error",
    "KMP_DUPLICATE_LIB_OK set",
    rationale="It silences OMP Error #15 while two OpenMP runtimes keep running; results may be wrong.",
    fix="Remove KMP_DUPLICATE_LIB_OK from threading.env and fix the duplicate runtime instead.",
    sources=("https://github.com/llvm/llvm-project/blob/main/openmp/runtime/src/i18n/en_US.txt",),
)
def _check_kmp_duplicate(recipe: Recipe) -> str | None:
    if "KMP_DUPLICATE_LIB_OK" in _env_names(recipe):
        return (
            "KMP_DUPLICATE_LIB_OK hides two OpenMP runtimes in one process, which 'may cause crashes or silently produce incorrect results'"
        )
    return None


@recipe_rule(
    "RC005",
    "mkl-service-force-intel",
    "error",
    "MKL_SERVICE_FORCE_INTEL set",
    rationale="Forces the INTEL layer next to libgomp: two OpenMP runtimes stay loaded and every process prints the error.",
    fix="Remove MKL_SERVICE_FORCE_INTEL; use mkl_threading_layer: gnu.",
    sources=("https://github.com/pytorch/pytorch/issues/37377",),
)
def _check_force_intel(recipe: Recipe) -> str | None:
    if "MKL_SERVICE_FORCE_INTEL" in _env_names(recipe):
        return "MKL_SERVICE_FORCE_INTEL silences mkl-service's abort but keeps two OpenMP runtimes loaded"
    return None


@recipe_rule(
    "RC006",
    "two-blas",
    "error",
    "non-MKL BLAS with MKL pinned",
    rationale="A BLAS variant other than MKL plus an MKL pin installs two BLAS libraries.",
    fix="Drop the MKL pin or package, or choose blas: mkl.",
    sources=("https://conda-forge.org/docs/maintainer/knowledge_base/#switching-blas-implementation",),
)
def _check_blas_mkl_pin(recipe: Recipe) -> str | None:
    tc = recipe.toolchain
    if tc.blas in ("openblas", "blis", "accelerate") and (tc.mkl or "mkl" in _names(recipe)):
        return f"blas is '{tc.blas}' but MKL is pinned or listed: two BLAS libraries would be installed"
    return None


@recipe_rule(
    "RC007",
    "legacy-llvm-openmp-16",
    "error",
    "pytorch-channel build with llvm-openmp>=16",
    rationale="llvm-openmp 16+ collapses CPU affinity to one core under pytorch-channel builds.",
    fix='Keep llvm-openmp "<16" with pytorch-channel builds (envkit adds it unless the recipe overrides it).',
    sources=("https://github.com/pytorch/pytorch/issues/99625",),
)
def _check_legacy_llvm(recipe: Recipe) -> str | None:
    if _torch_source(recipe) == "pytorch-channel" and not _admits(_spec_for(recipe, "llvm-openmp"), "llvm-openmp", "15.0.7"):
        return "pytorch-channel builds need llvm-openmp<16 (CPU affinity collapses to one core with 16+)"
    return None


@recipe_rule(
    "RC008",
    "accelerate-off-macos",
    "error",
    "accelerate BLAS off macOS",
    rationale="Apple's Accelerate exists only on macOS.",
    fix="Use blas: accelerate only with osx-* platforms; pick openblas or mkl elsewhere.",
    sources=("https://github.com/conda-forge/blas-feedstock",),
)
def _check_accelerate(recipe: Recipe) -> str | None:
    if recipe.toolchain.blas == "accelerate":
        bad = [p for p in _platforms(recipe) if not p.startswith("osx-")]
        if bad:
            return f"blas 'accelerate' exists only on macOS, but platforms include {', '.join(bad)}"
    return None


@recipe_rule(
    "RC009",
    "intel-openmp-on-conda-forge",
    "error",
    "Intel OpenMP with conda-forge on Linux",
    rationale="conda-forge's intel-openmp is Windows-only; its mkl depends on llvm-openmp.",
    fix="Use openmp: llvm with conda-forge on Linux (conda-forge mkl is built against llvm-openmp).",
    sources=("https://github.com/conda-forge/intel_repack-feedstock",),
)
def _check_cf_intel_openmp(recipe: Recipe) -> str | None:
    if recipe.toolchain.openmp == "intel" and _torch_source(recipe) in (None, "conda-forge") and "conda-forge" in recipe.channels:
        linux = [p for p in _platforms(recipe) if p.startswith("linux-")]
        if linux:
            return "conda-forge ships intel-openmp for Windows only and builds mkl against llvm-openmp; use openmp: llvm"
    return None


@recipe_rule(
    "RC010",
    "incoherent-cuda",
    "error",
    "CUDA choice incoherent",
    rationale="A CUDA pytorch needs a CUDA version and a platform with CUDA builds; a CPU one has no GPUs to name.",
    fix='Give toolchain.pytorch.cuda (e.g. "12.9") with variant: cuda, no cuda or cuda_arch with variant: cpu, and no CUDA on macOS.',
    sources=("https://github.com/conda-forge/pytorch-cpu-feedstock", "https://conda.org/learn/ceps/cep-0046"),
)
def _check_cuda(recipe: Recipe) -> str | None:
    torch = recipe.toolchain.pytorch
    if torch is None:
        return None
    if torch.variant == "cuda" and not torch.cuda and torch.source != "pip":
        return "pytorch variant 'cuda' needs toolchain.pytorch.cuda (e.g. \"12.4\") to pick the CUDA runtime"
    if torch.variant == "cpu" and torch.cuda:
        return "toolchain.pytorch.cuda is set but the variant is 'cpu'"
    if torch.variant == "cpu" and torch.cuda_arch:
        return "toolchain.pytorch.cuda_arch is set but the variant is 'cpu'"
    if torch.variant == "cuda" and any(p.startswith("osx-") for p in _platforms(recipe)):
        return "there are no CUDA builds of pytorch for macOS"
    return None


@recipe_rule(
    "RC011",
    "pytorch-channel-misuse",
    "error",
    "pytorch channel misuse",
    rationale="The pytorch channel's last release was 2.5.1 (Oct 2024); its builds need that channel listed.",
    fix="List the pytorch channel and use version 2.5.1 or older, or move to conda-forge pytorch.",
    sources=("https://github.com/pytorch/pytorch/issues/138506",),
)
def _check_legacy_version(recipe: Recipe) -> str | None:
    torch = recipe.toolchain.pytorch
    if torch is None or torch.source != "pytorch-channel":
        return None
    if "pytorch" not in recipe.channels and not any(c.rstrip("/").endswith("/pytorch") for c in recipe.channels):
        return "source 'pytorch-channel' but the 'pytorch' channel is not in channels"
    if (
        torch.version
        and not _admits(f"pytorch {torch.version}", "pytorch", "2.5.1")
        and not _admits(f"pytorch {torch.version}", "pytorch", "2.4.1")
    ):
        return f"the pytorch channel published its last release (2.5.1) in Oct 2024; version '{torch.version}' does not exist there"
    return None


@recipe_rule(
    "RC012",
    "pip-and-conda-copies",
    "error",
    "pip and conda copies of torch or numpy",
    rationale="Two copies bring two BLAS and OpenMP runtimes into one process.",
    fix="Take torch and numpy from one installer: conda packages, or pip only.",
    sources=("https://github.com/prefix-dev/pixi/issues/6818",),
)
def _check_two_torches(recipe: Recipe) -> str | None:
    pip_names = {s.name for s in recipe.pip}
    conda_torch = "pytorch" in _names(recipe) or _torch_source(recipe) in ("conda-forge", "pytorch-channel")
    if "torch" in pip_names and conda_torch:
        return "torch from pip and pytorch from conda: two copies with their own OpenMP and BLAS runtimes"
    if "numpy" in pip_names and ("numpy" in _names(recipe) or conda_torch):
        return "numpy from pip over conda packages brings a second BLAS (the wheel's OpenBLAS)"
    return None


@recipe_rule(
    "RC013",
    "mkl-debug-cpu-type",
    "warning",
    "MKL_DEBUG_CPU_TYPE set",
    rationale="The variable stopped working in MKL 2020.1.",
    fix="Remove MKL_DEBUG_CPU_TYPE; on AMD CPUs consider blas: openblas.",
    sources=("https://github.com/pytorch/builder/issues/460",),
)
def _check_mkl_debug_cpu(recipe: Recipe) -> str | None:
    if "MKL_DEBUG_CPU_TYPE" in _env_names(recipe):
        return "MKL_DEBUG_CPU_TYPE has had no effect since MKL 2020.1"
    return None


@recipe_rule(
    "RC014",
    "layer-without-mkl",
    "warning",
    "MKL threading layer without MKL",
    rationale="MKL_THREADING_LAYER only affects MKL.",
    fix="Remove mkl_threading_layer, or choose blas: mkl.",
    sources=("https://www.intel.com/content/www/us/en/docs/onemkl/developer-guide-linux/2024-0/mkl-threading-layer.html",),
)
def _check_layer_without_mkl(recipe: Recipe) -> str | None:
    layer = recipe.threading.mkl_threading_layer
    if layer not in (None, "auto") and recipe.toolchain.blas in ("openblas", "blis", "accelerate"):
        return f"mkl_threading_layer is set but blas is '{recipe.toolchain.blas}': the setting has no effect"
    return None


@recipe_rule(
    "RC015",
    "ddp-oversubscription",
    "warning",
    "thread counts oversubscribe DDP ranks",
    rationale="Every rank starts its own pool; ranks x threads above the core count thrashes.",
    fix="Set omp_num_threads to about physical cores / DDP ranks per node.",
    sources=("https://github.com/pytorch/pytorch/blob/main/torch/distributed/run.py",),
)
def _check_oversubscription(recipe: Recipe) -> str | None:
    th = recipe.threading
    counts = [c for c in (th.omp_num_threads, th.mkl_num_threads) if isinstance(c, int)]
    if recipe.probe.ddp and recipe.probe.nproc > 1 and th.omp_num_threads == "physical-cores":
        return f"omp_num_threads 'physical-cores' with {recipe.probe.nproc} DDP ranks per node oversubscribes the CPU; divide by the rank count"
    if counts and max(counts) > 512:
        return "thread counts above 512 are almost certainly a mistake"
    return None


# what a value written for a shell looks like: $NAME, ${NAME}, $(command), %NAME% (cmd.exe), ~ (a home)
_SHELL_SYNTAX = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\$\(|%[A-Za-z_][A-Za-z0-9_]*%|^~")


@recipe_rule(
    "RC016",
    "shell-syntax-in-value",
    "warning",
    "a variable's value written for a shell",
    rationale="Activation sets values as data, byte-exact in every shell, and never evaluates them (so a recipe cannot run "
    "code at activation): $CONDA_PREFIX, ${HOME}, %USERPROFILE% or ~ reach the program as those characters.",
    fix="Write the value out in full (the path itself, not one built from $HOME or $CONDA_PREFIX); a value whose $ or ~ is "
    "meant literally can stay as it is, and this stays a warning.",
    sources=("https://docs.conda.io/projects/conda/en/latest/user-guide/tasks/manage-environments.html#setting-environment-variables",),
)
def _check_shell_syntax(recipe: Recipe) -> str | None:
    for op in recipe.threading.env:
        for value in op.entries if op.action in ("prepend", "append") else (op.value,):
            if found := _SHELL_SYNTAX.search(value):
                where = f" ({op.origin})" if op.origin else ""
                return f"threading.env {op.name}: '{value}'{where} is set as written; activation does not expand '{found.group()}'"
    return None
