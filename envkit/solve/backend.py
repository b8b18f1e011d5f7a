"""The one seam to py-rattler's solver and installer. Everything rattler raises,
including Rust panics (BaseException), becomes an envkit error here."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import rattler

from envkit.core.errors import ChannelError, EnvkitError, FilesystemError, InstallError, SolveError, filesystem_refusal, os_errno
from envkit.core.ownprocess import asyncio_for_rattler

if TYPE_CHECKING:
    import asyncio
else:
    asyncio = asyncio_for_rattler()

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


# What another platform is assumed to offer when solving for it from here (CONDA_OVERRIDE_* wins):
# the floors conda-forge builds for (glibc 2.28 since 2025, macOS 11 on arm64, 10.15 on x86_64).
FOREIGN_DEFAULTS = {"__glibc": "2.28", "__linux": "5.0", "__osx": "11.0", "__unix": "0", "__win": "0"}


def virtual_from(name: str, version: str) -> Any:
    return rattler.GenericVirtualPackage(rattler.PackageName(name), rattler.Version(version), rattler.BuildString("0"))


def virtual_packages(platform: str, *, detect: bool = True) -> list[Any]:
    """Detected on the native platform (CONDA_OVERRIDE_* honoured); for others, and for locks (which
    must not depend on the machine that wrote them: kernel version, CPU), conda-forge's floors and
    the overrides."""
    if detect and platform == native_platform():
        return list(_detected(tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("CONDA_OVERRIDE_")))))
    names = (
        ["__unix", "__linux", "__glibc"]
        if platform.startswith("linux")
        else ["__unix", "__osx"]
        if platform.startswith("osx")
        else ["__win"]
    )
    if platform == "osx-64":
        names.remove("__osx")
        names.append("__osx:10.15")
    out = []
    for entry in names:
        name, _, version = entry.partition(":")
        override = os.environ.get(f"CONDA_OVERRIDE_{name.strip('_').upper()}")
        out.append(virtual_from(name, override or version or FOREIGN_DEFAULTS[name]))
    if os.environ.get("CONDA_OVERRIDE_CUDA") and not platform.startswith("osx"):
        out.append(virtual_from("__cuda", os.environ["CONDA_OVERRIDE_CUDA"]))
    return out


@functools.cache
def _detected(overrides: tuple[tuple[str, str], ...]) -> tuple[Any, ...]:
    """This machine's virtual packages, detected once a process (a solve and the plan's audit both
    ask; the driver does not change under a running command); `overrides` keys the cache."""
    return tuple(rattler.VirtualPackage.detect(rattler.VirtualPackageOverrides.from_env()))


def describe_virtual(pkg: Any) -> str:
    generic = pkg.into_generic() if hasattr(pkg, "into_generic") else pkg
    return f"{generic.name.normalized}={generic.version}"


def _solve_error(exc: BaseException) -> SolveError:
    text = str(exc).strip()
    if type(exc).__name__ == "SolverError":
        return SolveError(text)
    return ChannelError(text or type(exc).__name__)  # the whole 'Caused by:' chain: solve.py names the root cause


def error_chain(text: str) -> tuple[str, list[str]]:
    """A rattler error's first line (what failed) and its 'Caused by:' lines, outermost first (the
    last is the root cause)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    causes = [line.removeprefix("Caused by:").strip() for line in lines if line.startswith("Caused by:")]
    return (lines[0] if lines else ""), causes


def _install_error(doing: str) -> Callable[[BaseException], EnvkitError]:
    def wrap(exc: BaseException) -> EnvkitError:
        """rattler's first line says which package, its last 'Caused by:' line why (a full disk
        reads 'failed to link mkl-...conda' alone otherwise); a full disk, a quota or a read-only
        filesystem is the filesystem's refusal (exit 74), as anywhere else in envkit."""
        first, causes = error_chain(str(exc))
        message = f"{doing} failed: {first or type(exc).__name__}" + (f" ({causes[-1]})" if causes else "")
        code = os_errno(causes[-1]) if causes else None
        refusal = filesystem_refusal(code) if code is not None else None
        return FilesystemError(message, hint=refusal[1]) if refusal else InstallError(message)

    return wrap


def client(urls: Iterable[str] = ()) -> Any:
    """rattler's HTTP client with its authentication layer: a private channel's credentials come from
    where rattler and pixi keep them (`pixi auth login`: the keyring or ~/.rattler/credentials.json;
    RATTLER_AUTH_FILE; ~/.netrc), so the channel is named without them and no lock, record or export
    of it carries a token. A new one per call: a forked installer child must not share a parent's.

    `urls`: what it will fetch (channels, archives), where known. Where every one is a file:// URL
    (a channel on disk: a local or air-gapped mirror) nothing is fetched over a network, so there is
    no TLS session to verify and no credentials to send: that client is made without loading the
    system's certificates (7 ms of every command otherwise), through rattler's `tls-no-verify`,
    which has nothing to apply to there. Any other URL, or none known, gets the verifying client."""
    from rattler.networking import AuthenticationMiddleware, Client

    local = list(urls)
    if local and all(_on_disk(url) for url in local):
        return Client.from_config(rattler.Config.from_toml("tls-no-verify = true"))
    return Client([AuthenticationMiddleware()])


def _on_disk(url: str) -> bool:
    """A file:// URL: read from this machine's filesystem (a mount included), never over HTTP."""
    return url[:7].lower() == "file://"


def gateway(channel_urls: Iterable[str] = ()) -> Any:
    return rattler.Gateway(client=client(channel_urls))


def solve(channel_urls: list[str], specs: list[str], platform: str, virtual: list[Any]) -> list[Any]:
    return _run(
        rattler.solve(
            channel_urls,
            specs,
            gateway=gateway(channel_urls),
            platforms=cast(Any, [platform, "noarch"]),
            virtual_packages=virtual,
            channel_priority=rattler.ChannelPriority.Strict,
        ),
        _solve_error,
    )


# a package an earlier solve chose (a lock's, an env's): name, version, build, and the URL it has here
Preferred = tuple[str, str, str, str]


def solve_many(
    channel_urls: list[str], jobs: list[tuple[str, list[Any], list[str]]], preferred: list[list[Preferred]] | None = None
) -> list[list[Any]]:
    """Solve for several platforms (platform, virtual packages, that platform's specs), one after
    another through one gateway: noarch is read once, and each platform's repodata is dropped once
    its solve is done, so that a channel the size of conda-forge is in memory one platform at a
    time (bench/scale.py measures the peak against raw solves). `preferred` (per job: what an earlier solve chose, such as a lock or an env) is
    kept where the specs allow, as far as the channels still offer it."""

    async def everything() -> list[list[Any]]:
        shared = gateway(channel_urls)
        wanted = preferred or [[] for _ in jobs]
        results: list[list[Any]] = []
        for (platform, virtual, specs), keep in zip(jobs, wanted, strict=True):
            prefer = await _still_offered(shared, channel_urls, platform, keep)
            try:
                solved = await rattler.solve(
                    channel_urls,
                    specs,
                    gateway=shared,
                    platforms=cast(Any, [platform, "noarch"]),
                    virtual_packages=virtual,
                    locked_packages=prefer or None,
                    channel_priority=rattler.ChannelPriority.Strict,
                )
            except (KeyboardInterrupt, SystemExit, asyncio.CancelledError):
                raise
            except BaseException as exc:  # rattler's errors (pyo3's PanicException too), said for their platform
                error = _solve_error(exc)
                error.platform = platform
                raise error from None
            results.append(solved)
            if len(jobs) > 1 and platform != "noarch":
                for url in channel_urls:
                    shared.clear_repodata_cache(url, [platform])
        return results

    return _run(everything(), _solve_error)


def still_offered(channel_urls: list[str], wanted: list[tuple[str, list[Preferred]]]) -> list[set[str]]:
    """Per (platform, packages): the URLs of those packages the channels offer today; one that is
    missing was removed, or moved off the channel's label (conda-forge's broken builds)."""

    async def everything() -> list[list[Any]]:
        shared = gateway(channel_urls)
        return await asyncio.gather(*(_still_offered(shared, channel_urls, platform, packages) for platform, packages in wanted))

    return [{str(r.url) for r in found} for found in _run(everything(), _solve_error)]


async def _still_offered(shared: Any, channel_urls: list[str], platform: str, wanted: list[Preferred]) -> list[Any]:
    """The channels' own records, today, of the `wanted` packages (by URL): what a solve may prefer.
    rattler takes a preferred record as a candidate even where no channel has it any more, and
    with the depends it was locked with, so a package since removed (conda-forge's broken label)
    would stay locked and a repodata patch would be ignored; only what is still offered, as the
    channel now describes it, is preferred."""
    if not wanted:
        return []
    urls = {url for *_, url in wanted}
    specs = [rattler.MatchSpec(f"{name} =={version} {build}") for name, version, build, _ in wanted]
    found = await shared.query(channel_urls, [platform, "noarch"], specs, recursive=False)
    return [r for group in found for r in group if str(r.url) in urls]


def reinstall(
    records: list[Any],
    prefix: Path,
    cache_dir: Path | None,
    *,
    installed: list[Any],
    specs: list[str] | None = None,
    relink: tuple[str, ...] = (),
    http: Any | None = None,
) -> None:
    """Change an env in place to exactly `records`: rattler unlinks what is no longer wanted, links
    what is new and leaves the rest untouched (installed_packages), but for `relink`: packages
    linked again though installed (their files were overwritten). `http`: a client made ahead
    (envkit.install.inplace makes it while it waits: loading the system's certificates takes ~7 ms)."""
    _run(
        rattler.install(
            records,
            prefix,
            cache_dir=cache_dir,
            installed_packages=installed,
            reinstall_packages=set(relink) or None,
            show_progress=False,
            client=http or client(str(r.url) for r in records),
            requested_specs=[rattler.MatchSpec(s)._match_spec for s in specs or []],
        ),
        _install_error(f"changing {prefix}"),
    )


def install(
    records: list[Any],
    prefix: Path,
    cache_dir: Path | None,
    specs: list[str],
    reporter: Any | None,
    *,
    final_prefix: Path | None = None,
    meanwhile: Callable[[], T] | None = None,
) -> T | None:
    """Install into `prefix`; with `final_prefix`, files get that prefix patched in instead, so the
    env can be built in a staging directory and renamed into place. `meanwhile`: work that does not
    depend on the new env, done while rattler links (its own threads, no GIL held), so that it
    costs no time where the install is long; its result, or None where it failed (the caller then
    does it itself: a failure changes nothing but the time). Only reads: the install may fail."""
    return _run(
        _alongside(
            rattler.install(
                records,
                prefix,
                cache_dir=cache_dir,
                show_progress=False,
                client=client(str(r.url) for r in records),
                reporter=reporter,
                requested_specs=[rattler.MatchSpec(s)._match_spec for s in specs],
                alternative_target_prefix=final_prefix,
            ),
            meanwhile,
        ),
        _install_error(f"installing into {final_prefix or prefix}"),
    )


async def _alongside(install: Coroutine[Any, Any, None], meanwhile: Callable[[], T] | None) -> T | None:
    task = asyncio.ensure_future(install)
    value = None
    if meanwhile is not None:
        await asyncio.sleep(0)  # the task runs to its first wait: rattler has handed the work to its threads
        with contextlib.suppress(Exception):  # the caller does the work again, and meets the error there
            value = meanwhile()
    await task
    return value
