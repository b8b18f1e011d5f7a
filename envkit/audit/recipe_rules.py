"""Recipe-level consistency rules: refuse toolchains known to crash before anything is solved.

Each rule is data (id, severity, title, rationale, source) plus a small pure check. Rules of
severity "error" stop `create`; a recipe may list a rule id under `force:` to accept the risk,
which turns it into a warning.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

import rattler

from envkit.audit.rules import RULES_BY_ID as AUDIT_RULES  # force: may also accept an audit rule's risk (plan audit)
from envkit.core.errors import Location, Problem, RecipeError
from envkit.recipe.model import Recipe
from envkit.recipe.platforms import platform_problems, undeclared

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class ConsistencyRule:
    """A rule a recipe is held to before any solve, declared like the audit's rules."""

    id: str
    slug: str
    severity: Severity
    title: str
    rationale: str
    fix: str
    sources: tuple[str, ...]
    check: Callable[[Recipe], str | None]
    safe_fix: None = None  # recipe rules are fixed in the recipe, never by envkit

    @property
    def source(self) -> str:
        return self.sources[0]


@dataclass(frozen=True)
class ConsistencyFinding:
    """A consistency rule a recipe breaks; `forced` when the recipe's `force:` lets it through."""

    rule: ConsistencyRule
    message: str
    forced: bool

    @property
    def severity(self) -> Severity:
        return "warning" if self.forced else self.rule.severity


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


def _check_legacy_mkl(recipe: Recipe) -> str | None:
    if _torch_source(recipe) != "pytorch-channel":
        return None
    pin = recipe.toolchain.mkl
    spec = _spec_for(recipe, "mkl") or (f"mkl {pin}" if pin else "mkl <2024.1")
    if _admits(spec, "mkl", "2024.1.0"):
        return f"the mkl spec '{spec}' admits mkl>=2024.1, which pytorch-channel builds cannot load; pin toolchain.mkl: \"<2024.1\""
    return None


def _check_intel_layer_gomp(recipe: Recipe) -> str | None:
    foreign = _foreign_openmp(recipe) if recipe.threading.mkl_threading_layer == "intel" else None
    if foreign:
        return f"mkl_threading_layer 'intel' with a non-Intel OpenMP runtime ({foreign}) aborts in mkl-service; use 'gnu' or 'auto'"
    return None


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


def _check_kmp_duplicate(recipe: Recipe) -> str | None:
    if "KMP_DUPLICATE_LIB_OK" in _env_names(recipe):
        return (
            "KMP_DUPLICATE_LIB_OK hides two OpenMP runtimes in one process, which 'may cause crashes or silently produce incorrect results'"
        )
    return None


def _check_force_intel(recipe: Recipe) -> str | None:
    if "MKL_SERVICE_FORCE_INTEL" in _env_names(recipe):
        return "MKL_SERVICE_FORCE_INTEL silences mkl-service's abort but keeps two OpenMP runtimes loaded"
    return None


def _check_blas_mkl_pin(recipe: Recipe) -> str | None:
    tc = recipe.toolchain
    if tc.blas in ("openblas", "blis", "accelerate") and (tc.mkl or "mkl" in _names(recipe)):
        return f"blas is '{tc.blas}' but MKL is pinned or listed: two BLAS libraries would be installed"
    return None


def _check_legacy_llvm(recipe: Recipe) -> str | None:
    if _torch_source(recipe) == "pytorch-channel" and not _admits(_spec_for(recipe, "llvm-openmp"), "llvm-openmp", "15.0.7"):
        return "pytorch-channel builds need llvm-openmp<16 (CPU affinity collapses to one core with 16+)"
    return None


def _check_accelerate(recipe: Recipe) -> str | None:
    if recipe.toolchain.blas == "accelerate":
        bad = [p for p in _platforms(recipe) if not p.startswith("osx-")]
        if bad:
            return f"blas 'accelerate' exists only on macOS, but platforms include {', '.join(bad)}"
    return None


def _check_cf_intel_openmp(recipe: Recipe) -> str | None:
    if recipe.toolchain.openmp == "intel" and _torch_source(recipe) in (None, "conda-forge") and "conda-forge" in recipe.channels:
        linux = [p for p in _platforms(recipe) if p.startswith("linux-")]
        if linux:
            return "conda-forge ships intel-openmp for Windows only and builds mkl against llvm-openmp; use openmp: llvm"
    return None


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


def _check_two_torches(recipe: Recipe) -> str | None:
    pip_names = {s.name for s in recipe.pip}
    conda_torch = "pytorch" in _names(recipe) or _torch_source(recipe) in ("conda-forge", "pytorch-channel")
    if "torch" in pip_names and conda_torch:
        return "torch from pip and pytorch from conda: two copies with their own OpenMP and BLAS runtimes"
    if "numpy" in pip_names and ("numpy" in _names(recipe) or conda_torch):
        return "numpy from pip over conda packages brings a second BLAS (the wheel's OpenBLAS)"
    return None


def _check_mkl_debug_cpu(recipe: Recipe) -> str | None:
    if "MKL_DEBUG_CPU_TYPE" in _env_names(recipe):
        return "MKL_DEBUG_CPU_TYPE has had no effect since MKL 2020.1"
    return None


def _check_layer_without_mkl(recipe: Recipe) -> str | None:
    layer = recipe.threading.mkl_threading_layer
    if layer not in (None, "auto") and recipe.toolchain.blas in ("openblas", "blis", "accelerate"):
        return f"mkl_threading_layer is set but blas is '{recipe.toolchain.blas}': the setting has no effect"
    return None


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


def _check_shell_syntax(recipe: Recipe) -> str | None:
    for op in recipe.threading.env:
        for value in op.entries if op.action in ("prepend", "append") else (op.value,):
            if found := _SHELL_SYNTAX.search(value):
                where = f" ({op.origin})" if op.origin else ""
                return f"threading.env {op.name}: '{value}'{where} is set as written; activation does not expand '{found.group()}'"
    return None


RULES: tuple[ConsistencyRule, ...] = (
    ConsistencyRule(
        "RC001",
        "legacy-mkl-2024",
        "error",
        "pytorch-channel build with mkl>=2024.1",
        "mkl 2024.1 dropped iJIT_NotifyEvent, which pytorch-channel libtorch_cpu.so imports: 'undefined symbol: iJIT_NotifyEvent'.",
        'Pin toolchain.mkl: "<2024.1" (the shipped pytorch-legacy-channel recipe does), or move to conda-forge pytorch.',
        ("https://github.com/pytorch/pytorch/issues/123097",),
        _check_legacy_mkl,
    ),
    ConsistencyRule(
        "RC002",
        "intel-layer-with-libgomp",
        "error",
        "MKL_THREADING_LAYER=INTEL with a non-Intel OpenMP runtime",
        "mkl-service exits when the layer is INTEL and a non-Intel OpenMP runtime is already loaded: the DDP crash.",
        "Use mkl_threading_layer: gnu (or auto, which picks GNU whenever a non-Intel OpenMP runtime can be in the process).",
        ("https://github.com/IntelPython/mkl-service/issues/14",),
        _check_intel_layer_gomp,
    ),
    ConsistencyRule(
        "RC003",
        "intel-and-llvm-openmp",
        "error",
        "intel-openmp and llvm-openmp together",
        "libiomp5 and libomp in one process is the one OpenMP mix threadpoolctl calls unrecoverable.",
        "Request one OpenMP runtime: openmp: llvm on conda-forge, and drop intel-openmp from packages.",
        ("https://github.com/joblib/threadpoolctl/blob/master/multiple_openmp.md",),
        _check_two_openmp,
    ),
    ConsistencyRule(
        "RC004",
        "kmp-duplicate-lib-ok",
        "error",
        "KMP_DUPLICATE_LIB_OK set",
        "It silences OMP Error #15 while two OpenMP runtimes keep running; results may be wrong.",
        "Remove KMP_DUPLICATE_LIB_OK from threading.env and fix the duplicate runtime instead.",
        ("https://github.com/llvm/llvm-project/blob/main/openmp/runtime/src/i18n/en_US.txt",),
        _check_kmp_duplicate,
    ),
    ConsistencyRule(
        "RC005",
        "mkl-service-force-intel",
        "error",
        "MKL_SERVICE_FORCE_INTEL set",
        "Forces the INTEL layer next to libgomp: two OpenMP runtimes stay loaded and every process prints the error.",
        "Remove MKL_SERVICE_FORCE_INTEL; use mkl_threading_layer: gnu.",
        ("https://github.com/pytorch/pytorch/issues/37377",),
        _check_force_intel,
    ),
    ConsistencyRule(
        "RC006",
        "two-blas",
        "error",
        "non-MKL BLAS with MKL pinned",
        "A BLAS variant other than MKL plus an MKL pin installs two BLAS libraries.",
        "Drop the MKL pin or package, or choose blas: mkl.",
        ("https://conda-forge.org/docs/maintainer/knowledge_base/#switching-blas-implementation",),
        _check_blas_mkl_pin,
    ),
    ConsistencyRule(
        "RC007",
        "legacy-llvm-openmp-16",
        "error",
        "pytorch-channel build with llvm-openmp>=16",
        "llvm-openmp 16+ collapses CPU affinity to one core under pytorch-channel builds.",
        'Keep llvm-openmp "<16" with pytorch-channel builds (envkit adds it unless the recipe overrides it).',
        ("https://github.com/pytorch/pytorch/issues/99625",),
        _check_legacy_llvm,
    ),
    ConsistencyRule(
        "RC008",
        "accelerate-off-macos",
        "error",
        "accelerate BLAS off macOS",
        "Apple's Accelerate exists only on macOS.",
        "Use blas: accelerate only with osx-* platforms; pick openblas or mkl elsewhere.",
        ("https://github.com/conda-forge/blas-feedstock",),
        _check_accelerate,
    ),
    ConsistencyRule(
        "RC009",
        "intel-openmp-on-conda-forge",
        "error",
        "Intel OpenMP with conda-forge on Linux",
        "conda-forge's intel-openmp is Windows-only; its mkl depends on llvm-openmp.",
        "Use openmp: llvm with conda-forge on Linux (conda-forge mkl is built against llvm-openmp).",
        ("https://github.com/conda-forge/intel_repack-feedstock",),
        _check_cf_intel_openmp,
    ),
    ConsistencyRule(
        "RC010",
        "incoherent-cuda",
        "error",
        "CUDA choice incoherent",
        "A CUDA pytorch needs a CUDA version and a platform with CUDA builds; a CPU one has no GPUs to name.",
        'Give toolchain.pytorch.cuda (e.g. "12.9") with variant: cuda, no cuda or cuda_arch with variant: cpu, and no CUDA on macOS.',
        ("https://github.com/conda-forge/pytorch-cpu-feedstock", "https://conda.org/learn/ceps/cep-0046"),
        _check_cuda,
    ),
    ConsistencyRule(
        "RC011",
        "pytorch-channel-misuse",
        "error",
        "pytorch channel misuse",
        "The pytorch channel's last release was 2.5.1 (Oct 2024); its builds need that channel listed.",
        "List the pytorch channel and use version 2.5.1 or older, or move to conda-forge pytorch.",
        ("https://github.com/pytorch/pytorch/issues/138506",),
        _check_legacy_version,
    ),
    ConsistencyRule(
        "RC012",
        "pip-and-conda-copies",
        "error",
        "pip and conda copies of torch or numpy",
        "Two copies bring two BLAS and OpenMP runtimes into one process.",
        "Take torch and numpy from one installer: conda packages, or pip only.",
        ("https://github.com/prefix-dev/pixi/issues/6818",),
        _check_two_torches,
    ),
    ConsistencyRule(
        "RC013",
        "mkl-debug-cpu-type",
        "warning",
        "MKL_DEBUG_CPU_TYPE set",
        "The variable stopped working in MKL 2020.1.",
        "Remove MKL_DEBUG_CPU_TYPE; on AMD CPUs consider blas: openblas.",
        ("https://github.com/pytorch/builder/issues/460",),
        _check_mkl_debug_cpu,
    ),
    ConsistencyRule(
        "RC014",
        "layer-without-mkl",
        "warning",
        "MKL threading layer without MKL",
        "MKL_THREADING_LAYER only affects MKL.",
        "Remove mkl_threading_layer, or choose blas: mkl.",
        ("https://www.intel.com/content/www/us/en/docs/onemkl/developer-guide-linux/2024-0/mkl-threading-layer.html",),
        _check_layer_without_mkl,
    ),
    ConsistencyRule(
        "RC015",
        "ddp-oversubscription",
        "warning",
        "thread counts oversubscribe DDP ranks",
        "Every rank starts its own pool; ranks x threads above the core count thrashes.",
        "Set omp_num_threads to about physical cores / DDP ranks per node.",
        ("https://github.com/pytorch/pytorch/blob/main/torch/distributed/run.py",),
        _check_oversubscription,
    ),
    ConsistencyRule(
        "RC016",
        "shell-syntax-in-value",
        "warning",
        "a variable's value written for a shell",
        "Activation sets values as data, byte-exact in every shell, and never evaluates them (so a recipe cannot run "
        "code at activation): $CONDA_PREFIX, ${HOME}, %USERPROFILE% or ~ reach the program as those characters.",
        "Write the value out in full (the path itself, not one built from $HOME or $CONDA_PREFIX); a value whose $ or ~ is "
        "meant literally can stay as it is, and this stays a warning.",
        ("https://docs.conda.io/projects/conda/en/latest/user-guide/tasks/manage-environments.html#setting-environment-variables",),
        _check_shell_syntax,
    ),
)

RULES_BY_ID = {rule.id: rule for rule in RULES}
assert len(RULES_BY_ID) == len(RULES), "duplicate consistency rule id"


def platform_views(recipe: Recipe) -> list[Recipe]:
    """The recipe as each declared platform sees it (per_platform entries applied), platforms that
    see the same recipe grouped, each view declaring just its own platforms."""
    groups: dict[int, tuple[Recipe, list[str]]] = {}
    for platform in _platforms(recipe):
        view = recipe.for_platform(platform)
        groups.setdefault(id(view), (view, []))[1].append(platform)
    return [replace(view, platforms=tuple(platforms)) for view, platforms in groups.values()]


def check_recipe(recipe: Recipe) -> list[ConsistencyFinding]:
    """Every rule on each platform's view of the recipe (per_platform entries applied)."""
    findings: list[ConsistencyFinding] = []
    for view in platform_views(recipe):
        for rule in RULES:
            message = rule.check(view)
            if message and all((f.rule.id, f.message) != (rule.id, message) for f in findings):
                findings.append(ConsistencyFinding(rule, message, forced=rule.id in recipe.force))
    return findings


def require_consistent(recipe: Recipe, used_on: str | None = None) -> list[ConsistencyFinding]:
    """Raise for unforced errors (one line each); return every finding for display. `used_on`: the
    platform a create or sync runs for, whose toolchain must exist even if the recipe omits it."""
    unknown = [rid for rid in recipe.force if rid not in RULES_BY_ID and rid not in AUDIT_RULES]
    loc = Location(recipe.origin.path, 1, 1)
    if unknown:
        raise RecipeError(
            [Problem(loc, "force", f"unknown rule id '{rid}' (recipe rules are RC001..., audit rules EK001...)") for rid in unknown]
        )
    unbuilt = platform_problems(recipe, used_on)
    if unbuilt:  # a toolchain that does not exist there: not a risk to accept with force:
        raise RecipeError(unbuilt)
    findings = check_recipe(recipe)
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        raise RecipeError(
            [Problem(loc, f.rule.id, f"{f.message} [{f.rule.source}; add '{f.rule.id}' to force: to accept the risk]") for f in errors]
        )
    return findings


def plan_warnings(recipe: Recipe, platform: str) -> tuple[str, ...]:
    """The recipe checked for the platform a create or sync runs for (errors raise), and the
    warnings its plan shows: the consistency rules', and one when the recipe is not for it."""
    found = [f"{f.rule.id}: {f.message}" for f in require_consistent(recipe, platform)]
    return tuple(found + [w for w in [undeclared(recipe, platform)] if w])
