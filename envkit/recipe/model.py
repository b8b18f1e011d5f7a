"""Typed, frozen recipe data. Raw YAML never leaves recipe/ without becoming one of these; the
defaults are the field table's (envkit.recipe.fields)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, cast

from envkit.core.errors import Location
from envkit.recipe.fields import default

SCHEMA_VERSION = 1
# Recipe, env and source names: safe as file names and in shell variable tags.

Blas = Literal["mkl", "openblas", "blis", "accelerate"]
OpenMP = Literal["gnu", "llvm", "intel"]
TorchSource = Literal["conda-forge", "pytorch-channel", "pip"]
TorchVariant = Literal["cpu", "cuda"]
ThreadingLayer = Literal["gnu", "intel", "sequential", "tbb", "auto"]
EnvAction = Literal["set", "unset", "prepend", "append"]
ThreadCount = int | Literal["physical-cores"] | None
# the field table's defaults, typed
_VARIANT = cast(TorchVariant, default("toolchain.pytorch.variant"))
_TORCH_SOURCE = cast(TorchSource, default("toolchain.pytorch.source"))
_NPROC = cast(int, default("probe.ddp.nproc"))
_TIMEOUT = cast(int, default("probe.timeout"))

BLAS_CHOICES: tuple[str, ...] = ("mkl", "openblas", "blis", "accelerate")
OPENMP_CHOICES: tuple[str, ...] = ("gnu", "llvm", "intel")
TORCH_SOURCES: tuple[str, ...] = ("conda-forge", "pytorch-channel", "pip")
TORCH_VARIANTS: tuple[str, ...] = ("cpu", "cuda")
LAYER_CHOICES: tuple[str, ...] = ("gnu", "intel", "sequential", "tbb", "auto")
# the platforms envkit's toolchain rules cover (envkit.recipe.platforms); an env runs on one of
# them, never on noarch, whose packages go into every platform's env
KNOWN_PLATFORMS: tuple[str, ...] = (
    "linux-64",
    "linux-aarch64",
    "linux-ppc64le",
    "osx-64",
    "osx-arm64",
    "win-64",
)
# a kind of machine a lock is proven on (a recipe's require_proof, --require-proof, a proof's key):
# a platform, alone or with +cuda or +cuda_arch=X.Y
MACHINE_KIND = re.compile(r"(?P<platform>[a-z0-9]+-[a-z0-9]+)(?P<cuda>\+cuda(?:_arch=(?P<arch>[0-9]+(?:\.[0-9]+)*))?)?")


@dataclass(frozen=True)
class Spec:
    """A requirement as written in a recipe, with its normalised form and its origin."""

    text: str
    name: str
    normalized: str
    origin: Location | None = None


@dataclass(frozen=True)
class PytorchChoice:
    """Which torch build the recipe wants, and where it comes from: that decides which OpenMP loads."""

    version: str | None = None
    variant: TorchVariant = _VARIANT
    cuda: str | None = None
    # The lowest compute capability of the GPUs the env is for ("9.0": H100/H200), assumed as
    # __cuda_arch where no GPU is seen (CEP 46), so builds that need newer GPUs are not picked.
    cuda_arch: str | None = None
    source: TorchSource = _TORCH_SOURCE

    @property
    def loads_libgomp(self) -> bool:
        """PyPI wheels vendor libgomp and pytorch-channel builds link it, whatever the env's OpenMP."""
        return self.source in ("pip", "pytorch-channel")


@dataclass(frozen=True)
class Toolchain:
    """The recipe's BLAS, MKL, OpenMP and torch choices, checked together before a solve."""

    blas: Blas | None = None
    mkl: str | None = None
    openmp: OpenMP | None = None
    pytorch: PytorchChoice | None = None


@dataclass(frozen=True)
class EnvOp:
    """One activation change. Values are data: they are quoted, never evaluated."""

    name: str
    action: EnvAction
    value: str = ""
    entries: tuple[str, ...] = ()
    separator: str = str(default("threading.env.*.separator"))
    origin: Location | None = None
    # how `value` was worked out on the machine that wrote it (physical-cores): another machine,
    # given the same recipe or lock, works out its own
    computed: str | None = None


@dataclass(frozen=True)
class Threading:
    """The threading policy that activation exports (MKL_THREADING_LAYER and the thread counts)."""

    mkl_threading_layer: ThreadingLayer | None = None
    omp_num_threads: ThreadCount = None
    mkl_num_threads: ThreadCount = None
    openblas_num_threads: ThreadCount = None
    env: tuple[EnvOp, ...] = ()


@dataclass(frozen=True)
class ProbeSpec:
    """What the probe must show in the new env before envkit calls it good."""

    imports: tuple[str, ...] = ()
    import_orders: tuple[tuple[str, ...], ...] = ()
    ddp: bool = bool(default("probe.ddp"))
    nproc: int = _NPROC
    expect: tuple[tuple[str, str | int], ...] = ()
    timeout: int = _TIMEOUT
    # The torch build the env was made for: a CPU torch in a CUDA env is a failure, not a skip.
    torch_build: TorchVariant | None = None


@dataclass(frozen=True)
class RecipeOrigin:
    """Which source a recipe came from: shown by `recipes list` and recorded in envs."""

    source: str
    path: str
    commit: str | None = None


@dataclass(frozen=True)
class Recipe:
    """A validated recipe after `extends`: everything create, lock and sync need from the YAML."""

    name: str
    description: str
    origin: RecipeOrigin
    extends: tuple[str, ...]
    chain: tuple[str, ...]
    channels: tuple[str, ...]
    platforms: tuple[str, ...]
    python: str | None
    packages: tuple[Spec, ...]
    pip: tuple[Spec, ...]
    toolchain: Toolchain
    threading: Threading
    probe: ProbeSpec
    force: tuple[str, ...] = field(default=())
    # machine kinds (linux-64, linux-64+cuda, linux-64+cuda_arch=9.0) `recipes check` requires proven
    require_proof: tuple[str, ...] = field(default=())
    # where each scalar field was set, by dotted path ("python", "toolchain.mkl"), after extends
    origins: dict[str, Location] = field(default_factory=dict, compare=False)
    # the whole recipe as it is on a platform with a per_platform entry (that entry merged over it)
    per_platform: dict[str, Recipe] = field(default_factory=dict, compare=False)

    def located(self, *paths: str) -> Location | None:
        """The first of these fields that the recipe (or a parent) sets."""
        return next((self.origins[p] for p in paths if p in self.origins), None)

    def for_platform(self, platform: str | None) -> Recipe:
        return self.per_platform.get(platform, self) if platform else self
