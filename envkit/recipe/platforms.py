"""Which toolchain choices exist on which platform, as conda-forge builds them (read from the
feedstocks, 2026-11):

- MKL is built for x86_64 only: pytorch-cpu-feedstock's `blas_impl: mkl  # [x86_64]`; the mkl
  package itself (intel_repack-feedstock) is repacked for linux-64 and win-64.
- pytorch: `blas_impl` is `mkl` on x86_64 and `generic` on unix, so win-64 has MKL builds only and
  osx-arm64 / linux-aarch64 generic ones only; CUDA builds exist for linux-64, linux-aarch64 (SBSA,
  and Tegra for Jetson) and win-64, for CUDA 12.9 and 13.0 on Linux and 12.8 and 13.0 on Windows
  (.ci_support of pytorch-cpu-feedstock 74dd3d4, pytorch 2.13.0).
  Every build depends on llvm-openmp; the generic ones constrain `libopenblas * openmp_*` on unix.
- `_openmp_mutex`, the switch between libgomp and llvm-openmp, is Linux-only (openmp-feedstock's
  run_exports add it on linux only); libgomp (GNU OpenMP) exists on Linux only.
- libblas flavours (blas-feedstock): openblas everywhere, mkl on x86_64 but not osx, blis on
  x86_64, accelerate and newaccelerate (needs macOS 15.5) on osx.
- conda-forge's intel-openmp is built for win-64 only, and constrains `llvm-openmp <0a0`; mkl and
  pytorch there use llvm-openmp (whose Windows package forwards libiomp5md.dll to libomp).
"""

from __future__ import annotations

from envkit.core.errors import Location, Problem, UsageError
from envkit.recipe.model import KNOWN_PLATFORMS, Recipe

X86_64 = ("linux-64", "osx-64", "win-64")
LINUX = ("linux-64", "linux-aarch64", "linux-ppc64le")
OSX = ("osx-64", "osx-arm64")

BLAS_ON: dict[str, tuple[str, ...]] = {
    "mkl": ("linux-64", "win-64"),
    "openblas": (*LINUX, *OSX, "win-64"),
    "blis": X86_64,
    "accelerate": OSX,
}
OPENMP_ON: dict[str, tuple[str, ...]] = {"gnu": LINUX, "llvm": (*LINUX, *OSX, "win-64"), "intel": ("win-64",)}
TORCH_MKL_ON = ("linux-64", "win-64")  # conda-forge pytorch with MKL (needs the mkl package)
TORCH_GENERIC_ON = (*LINUX, *OSX)
TORCH_CUDA_ON = ("linux-64", "linux-aarch64", "win-64")


def known_platform(platform: str, flag: str) -> str:
    if platform not in KNOWN_PLATFORMS:  # conda knows more (win-arm64, linux-riscv64, ...): envkit's rules do not cover them
        raise UsageError(f"{flag} {platform!r}: not a platform envkit builds for", hint=f"one of {', '.join(KNOWN_PLATFORMS)}")
    return platform


def has_mutex(platform: str) -> bool:
    """Whether `_openmp_mutex` exists there (the OpenMP switch of conda-forge's Linux builds)."""
    return platform in LINUX


def torch_flavour(blas: str | None, platform: str) -> tuple[str, str | None]:
    """The conda-forge pytorch build flavour for a BLAS choice on a platform, and a note when the
    platform's equivalent was picked for an unset choice."""
    if blas is None:
        if platform in TORCH_MKL_ON:
            return "mkl", None
        return "generic", f"conda-forge builds only the generic (OpenBLAS) pytorch for {platform}"
    return ("mkl" if blas == "mkl" else "generic"), None


def platform_problems(recipe: Recipe, used_on: str | None = None) -> list[Problem]:
    """A toolchain that cannot exist on a declared platform (or `used_on`, where a create or sync
    runs, declared or not), one problem each, at the line that chose it, with the per_platform
    entry that would fix it."""
    out: list[Problem] = []
    for platform in dict.fromkeys([*recipe.platforms, *([used_on] if used_on else [])]):
        on = recipe.for_platform(platform)
        for field, message, fix in unavailable(on, platform):
            where = on.located(field) or on.located("toolchain") or Location(recipe.origin.path, 1, 1)
            out.append(Problem(where, field, f"{message} on {platform}; {fix}"))
    return out


# radon cc 26: one check per toolchain choice that conda-forge does not build on some platform
def unavailable(on: Recipe, platform: str) -> list[tuple[str, str, str]]:
    """(field, what does not exist, how to fix) for one platform's view of the recipe."""
    tc = on.toolchain
    torch = tc.pytorch
    out: list[tuple[str, str, str]] = []
    if tc.blas is not None and platform not in BLAS_ON[tc.blas]:
        others = [b for b, where in BLAS_ON.items() if platform in where]
        out.append(
            (
                "toolchain.blas",
                f"conda-forge builds no {tc.blas} BLAS",
                f"set per_platform.{platform}.toolchain.blas to one of {', '.join(others)}",
            )
        )
    if tc.openmp is not None and platform not in OPENMP_ON[tc.openmp]:
        others = [o for o, where in OPENMP_ON.items() if platform in where]
        out.append(
            (
                "toolchain.openmp",
                f"conda-forge has no {tc.openmp} OpenMP runtime",
                f"set per_platform.{platform}.toolchain.openmp to {' or '.join(others)}",
            )
        )
    if torch is not None and torch.source == "conda-forge":
        if torch.variant == "cuda" and platform not in TORCH_CUDA_ON:
            out.append(
                (
                    "toolchain.pytorch.variant",
                    "conda-forge builds no CUDA pytorch",
                    f"set per_platform.{platform}.toolchain.pytorch.variant to cpu",
                )
            )
        flavour, _ = torch_flavour(tc.blas, platform)
        blas_missing = tc.blas is not None and platform not in BLAS_ON[tc.blas]  # said above
        if flavour == "mkl" and platform not in TORCH_MKL_ON and not blas_missing:
            out.append(
                (
                    "toolchain.blas",
                    "conda-forge builds pytorch with MKL only for linux-64 and win-64, not",
                    f"set per_platform.{platform}.toolchain.blas to openblas (or leave it unset)",
                )
            )
        if flavour == "generic" and platform not in TORCH_GENERIC_ON and not blas_missing:
            out.append(
                (
                    "toolchain.blas",
                    f"conda-forge builds pytorch with MKL only (no {tc.blas} build)",
                    f"set per_platform.{platform}.toolchain.blas to mkl (or leave it unset)",
                )
            )
    if on.threading.mkl_threading_layer == "gnu" and platform not in LINUX:
        out.append(
            (
                "threading.mkl_threading_layer",
                "MKL has no GNU threading layer (libmkl_gnu_thread is Linux-only)",
                f"set per_platform.{platform}.threading.mkl_threading_layer to auto",
            )
        )
    if torch is not None and torch.source == "pytorch-channel" and torch.variant == "cuda" and platform in OSX:
        out.append(
            (
                "toolchain.pytorch.variant",
                "the pytorch channel had no CUDA builds",
                f"set per_platform.{platform}.toolchain.pytorch.variant to cpu",
            )
        )
    return out


def undeclared(recipe: Recipe, platform: str) -> str | None:
    """A warning when the recipe lists its platforms and this is not one of them: its author's
    checks (and `envkit lock`, and `recipes check`) never looked at it."""
    if not recipe.platforms or platform in recipe.platforms:
        return None
    where = recipe.located("platforms")
    return (
        f"recipe '{recipe.name}' is for {', '.join(recipe.platforms)}, not {platform}"
        + (f" ({where})" if where else "")
        + f"; add {platform} to its platforms: once it is meant to work here"
    )
