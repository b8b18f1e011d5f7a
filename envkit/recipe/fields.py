"""Every mapping a recipe has and the keys it takes: the validators read their keys here, and
docs/reference/recipe.md is generated from it."""

from __future__ import annotations

TOP_KEYS = (
    "envkit",
    "name",
    "description",
    "extends",
    "channels",
    "platforms",
    "python",
    "packages",
    "pip",
    "toolchain",
    "threading",
    "probe",
    "force",
    "per_platform",
)
# what a per_platform entry may change for its platform
PLATFORM_KEYS = ("python", "packages", "pip", "toolchain", "threading")
EXPECT_KEYS = ("blas", "openmp_runtimes", "mkl_threading_layer", "torch_threads")
# every mapping of a recipe and the keys it takes, by dotted path (`*`: any name); the validators
# below take their keys from here, and docs/reference/recipe.md is generated from it
FIELDS: dict[str, tuple[str, ...]] = {
    "": TOP_KEYS,
    "per_platform.*": PLATFORM_KEYS,
    "toolchain": ("blas", "mkl", "openmp", "pytorch"),
    "toolchain.pytorch": ("version", "variant", "cuda", "cuda_arch", "source"),
    "threading": ("mkl_threading_layer", "omp_num_threads", "mkl_num_threads", "openblas_num_threads", "env"),
    "threading.env.*": ("set", "unset", "prepend", "append", "separator"),
    "probe": ("imports", "import_orders", "ddp", "expect", "timeout"),
    "probe.ddp": ("enabled", "nproc"),
    "probe.expect": EXPECT_KEYS,
}
