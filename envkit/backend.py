"""The one seam to py-rattler's solver and installer. Everything rattler raises,
including Rust panics (BaseException), becomes an envkit error here."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar, cast

import rattler

from envkit.errors import ChannelError, EnvkitError, InstallError, SolveError

T = TypeVar("T")


def _run(coro: Coroutine[Any, Any, T], wrap: Callable[[BaseException], EnvkitError]) -> T:
    try:
        return asyncio.run(coro)
    except (KeyboardInterrupt, SystemExit, EnvkitError):
        raise
    except BaseException as exc:  # pyo3 PanicException derives from BaseException
        raise wrap(exc) from None


def native_platform() -> str:
    return str(rattler.Subdir.current())


def virtual_packages(platform: str) -> list[Any]:
    """Detected on the native platform (CONDA_OVERRIDE_* honoured); for others, from overrides only."""
    if platform == native_platform():
        return list(rattler.VirtualPackage.detect(rattler.VirtualPackageOverrides.from_env()))
    out = []
    for var, name in (("CONDA_OVERRIDE_GLIBC", "__glibc"), ("CONDA_OVERRIDE_CUDA", "__cuda"), ("CONDA_OVERRIDE_OSX", "__osx")):
        if os.environ.get(var):
            out.append(rattler.GenericVirtualPackage(rattler.PackageName(name), rattler.Version(os.environ[var]), rattler.BuildString("0")))
    if platform.startswith("linux"):
        out.append(rattler.GenericVirtualPackage(rattler.PackageName("__unix"), rattler.Version("0"), rattler.BuildString("0")))
        out.append(rattler.GenericVirtualPackage(rattler.PackageName("__linux"), rattler.Version("5.0"), rattler.BuildString("0")))
        if not os.environ.get("CONDA_OVERRIDE_GLIBC"):
            out.append(rattler.GenericVirtualPackage(rattler.PackageName("__glibc"), rattler.Version("2.28"), rattler.BuildString("0")))
    return out


def describe_virtual(pkg: Any) -> str:
    generic = pkg.into_generic() if hasattr(pkg, "into_generic") else pkg
    return f"{generic.name.normalized}={generic.version}"


def solve(channel_urls: list[str], specs: list[str], platform: str, virtual: list[Any]) -> list[Any]:
    def wrap(exc: BaseException) -> EnvkitError:
        text = str(exc).strip()
        if type(exc).__name__ == "SolverError":
            return SolveError(text)
        return ChannelError(text or type(exc).__name__)  # the whole 'Caused by:' chain: solve.py names the root cause

    return _run(
        rattler.solve(
            channel_urls,
            specs,
            platforms=cast(Any, [platform, "noarch"]),
            virtual_packages=virtual,
            channel_priority=rattler.ChannelPriority.Strict,
        ),
        wrap,
    )


def install(
    records: list[Any],
    prefix: Path,
    cache_dir: Path | None,
    specs: list[str],
    reporter: Any | None,
    *,
    final_prefix: Path | None = None,
) -> None:
    """Install into `prefix`; with `final_prefix`, files get that prefix patched in instead, so the
    env can be built in a staging directory and renamed into place."""

    def wrap(exc: BaseException) -> EnvkitError:
        text = str(exc).strip().splitlines()
        return InstallError(f"installing into {final_prefix or prefix} failed: {text[0] if text else type(exc).__name__}")

    _run(
        rattler.install(
            records,
            prefix,
            cache_dir=cache_dir,
            show_progress=False,
            reporter=reporter,
            requested_specs=[rattler.MatchSpec(s)._match_spec for s in specs],
            alternative_target_prefix=final_prefix,
        ),
        wrap,
    )
