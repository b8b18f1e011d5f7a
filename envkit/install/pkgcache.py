"""rattler's package cache as envkit reads it: which archive an extracted entry came from, what
interrupted installs leave in it, and how to clean that safely.

rattler extracts each package into a temporary `.<name>-<version>-<build><6 random chars>`
directory beside its `<name>-<version>-<build>.lock` and renames it into place when done. An
install killed by SIGKILL (or interrupted while a background extraction runs) leaves those
directories behind, hundreds of MB each, and nothing removes them.

The installer holds an exclusive flock on `<cache>/.cache.lock` for the whole installation
(rattler_cache's `acquire_global_lock`). So when envkit can take that lock without waiting, no
rattler process is extracting into this cache, and every such directory is abandoned; when it
cannot, a concurrent install owns them and nothing is touched.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from envkit.core.errors import InstallError

GLOBAL_LOCK = ".cache.lock"
_TEMP_SUFFIX = re.compile(r"^[A-Za-z0-9]{6}$")


def abandoned_extractions(cache: Path) -> list[Path]:
    """Temporary extraction directories in the cache: hidden, named after a package that has a
    .lock file, plus rattler's random suffix."""
    try:
        with os.scandir(cache) as listing:  # one listing of a cache of thousands, for both kinds
            entries = list(listing)
    except OSError:  # no cache yet
        return []
    locks = {e.name[: -len(".lock")] for e in entries if e.name.endswith(".lock") and not e.name.startswith(".")}
    out = []
    for entry in entries:
        name = entry.name
        if not name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        stem, suffix = name[1:-6], name[-6:]
        if stem in locks and _TEMP_SUFFIX.match(suffix):
            out.append(cache / name)
    return sorted(out)


def sweep(cache: Path) -> list[Path]:
    """Remove abandoned extractions, only while no installer holds the cache; returns what went."""
    victims = abandoned_extractions(cache)
    if not victims:
        return []
    import shutil  # with its archive modules (bz2, lzma): only when there is something to remove

    try:
        fd = os.open(cache / GLOBAL_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return []
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return []  # an install is running: these may be its
            raise
        removed = []
        for path in abandoned_extractions(cache):
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(path)
        return removed
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def cached_sha256(cache: Path, rec: Any) -> bytes | None:
    """The sha256 of the archive rattler extracted into its cache for this record, if any.

    rattler writes `<cache>/<name>-<version>-<build>.lock` as an 8-byte revision followed by the
    archive's 32-byte sha256; an entry whose hash matches is reused without reading the archive.
    Anything unexpected means "unknown", and the archive is hashed. (Strings, not pathlib: a locked
    create asks this of every package before the install starts.)
    """
    entry = os.path.join(cache, f"{rec.name.normalized}-{rec.version}-{rec.build}")
    try:
        with open(entry + ".lock", "rb") as lock:
            data = lock.read(41)
    except OSError:
        return None
    return data[8:40] if len(data) == 40 and os.path.isfile(os.path.join(entry, "info", "index.json")) else None


def verify_archives(records: list[Any], cache: Path | None = None) -> None:
    """Check sha256 of local archives against repodata (rattler skips this for file://); one the
    cache holds already, extracted from an archive of that sha256, is not read again."""
    for rec in records:
        url = str(rec.url)
        if not url.startswith("file:") or rec.sha256 is None:
            continue
        if cache is not None and cached_sha256(cache, rec) == bytes(rec.sha256):
            continue
        import hashlib  # OpenSSL, for archives of hundreds of MB: loaded only when one is read (envkit.core.digests)

        path = Path(unquote(urlparse(url).path))
        try:
            with path.open("rb") as handle:
                digest = hashlib.file_digest(handle, "sha256")
        except OSError as exc:
            raise InstallError(f"cannot read package {path}: {exc.strerror}") from None
        if digest.hexdigest() != rec.sha256.hex():
            raise InstallError(
                f"package {path.name} does not match its channel index (sha256 {digest.hexdigest()[:12]}... != {rec.sha256.hex()[:12]}...)",
                hint="the archive is corrupt or was replaced; re-download it or re-index the channel",
            )
