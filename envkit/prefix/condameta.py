"""Package records in conda-meta as conda itself writes them, where rattler's differ in a way conda's
own commands trip over.

rattler records `sha256_in_prefix` (and `size_in_bytes`) for a softlink: the hash of the link's
target text. conda records neither for softlinks, and `conda doctor`'s altered-files check hashes
the file a link points to, so in an env rattler made every softlink (`bin/python -> python3.11`,
`libfoo.so -> libfoo.so.1`) reads as an altered file (conda/conda#14836 is the same symptom from
packages built that way). Dropping the two fields leaves what conda would have written.

rattler also writes each record with mode 0600 (prefix-dev/pixi#4284), so in an env shared by a
team nobody but its creator can read conda-meta, which `conda list` and envkit's audit need. conda
creates records as open() does, under the umask: the read bits that gives are added here (never
taken away: a record someone opened up stays open under a stricter umask).

Finding the records that hold a softlink means searching all of conda-meta (a torch env's is some
7 MB, half of what envkit does after the install). Whether a package has a softlink is a fact of
its archive, so an archive found to have none is remembered by its sha256 (an empty file of that
name in envkit's cache, `no-softlinks/`) and its record is not searched again in any env.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
from pathlib import Path
from typing import Any

from envkit.core import paths
from envkit.core.fsutil import atomic_write_text, created_mode

SOFTLINK_FIELDS = ("sha256_in_prefix", "size_in_bytes")
KEEP_AT_MOST = 8192  # archives remembered as free of softlinks; beyond it the oldest half goes


def archives_of(records: list[Any]) -> dict[str, str]:
    """Each record file rattler writes for `records` (`NAME-VERSION-BUILD.json`) -> the sha256 of
    the archive it was linked from, where the record has one."""
    return {f"{r.name.normalized}-{r.version}-{r.build}.json": bytes(r.sha256).hex() for r in records if r.sha256 is not None}


def as_conda_writes(
    prefix: Path, names: set[str] | None = None, archives: dict[str, str] | None = None, *, staged: bool = False
) -> list[Path]:
    """Give records the bits conda's mode has, and rewrite those that hold softlink hashes;
    returns the files rewritten. `names`: only these record files (the ones a change wrote; a
    torch env's records are some 9 MB to read). `archives` (archives_of the records just linked):
    a record whose archive is known to hold no softlink is not searched. `staged`: the prefix is a
    staging env that a rename puts in place, so a record is replaced without an fsync (see
    envkit.core.fsutil.atomic_write_text's `flush`)."""
    changed = []
    mode = created_mode()
    archives = archives or {}
    free = _free_folder()
    learned = []
    for path in sorted((prefix / "conda-meta").glob("*.json")):
        if names is not None and path.name not in names:
            continue
        with contextlib.suppress(OSError):
            current = path.stat().st_mode & 0o7777
            if mode & ~current:
                os.chmod(path, current | mode)
        sha256 = archives.get(path.name)
        if sha256 is not None and os.path.exists(free / sha256):
            continue
        try:
            if not _mentions(path, b'"softlink"'):
                if sha256 is not None:
                    learned.append(sha256)
                continue
            data = json.loads(path.read_bytes())
        except OSError:
            continue
        except ValueError:
            continue  # not a package record: the audit reports it (EK022)
        paths = ((data.get("paths_data") or {}).get("paths") or []) if isinstance(data, dict) else []
        dirty = False
        for entry in paths:
            if isinstance(entry, dict) and entry.get("path_type") == "softlink":
                for key in SOFTLINK_FIELDS:
                    dirty |= entry.pop(key, None) is not None
        if dirty:
            atomic_write_text(path, json.dumps(data, indent=2) + "\n", flush=not staged)  # rattler's own copy stays until then
            changed.append(path)
    _remember_free(free, learned)
    return changed


def _free_folder() -> Path:
    return paths.cache_dir() / "no-softlinks"


def _remember_free(folder: Path, archives: list[str]) -> None:
    """Mark these archives free of softlinks; a cache, so any failure just leaves them unmarked."""
    if not archives:
        return
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        for sha256 in archives:
            os.close(os.open(folder / sha256, os.O_WRONLY | os.O_CREAT, 0o644))
        entries = list(os.scandir(folder))
        if len(entries) > KEEP_AT_MOST:
            for entry in sorted(entries, key=lambda e: e.stat().st_mtime)[: len(entries) // 2]:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _mentions(path: Path, needle: bytes) -> bool:
    """Whether the file holds `needle`, searched where it lies in the page cache: a torch env's
    records are megabytes, which read() would first copy into fresh memory (twice the time)."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return False  # mmap maps no empty file
        with mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ) as mapped:
            return mapped.find(needle) >= 0


RecordsState = tuple[tuple[str, int, int, int], ...]


def records_state(prefix: Path) -> RecordsState:
    """conda-meta's records as they are on disk (name, mtime, size, inode): a read or a copy of them
    taken earlier still holds while this is unchanged."""
    out = []
    with contextlib.suppress(OSError), os.scandir(prefix / "conda-meta") as entries:
        for entry in entries:
            if entry.name.endswith(".json"):
                st = entry.stat(follow_symlinks=False)
                out.append((entry.name, st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(sorted(out))


def stamp(prefix: Path) -> dict[str, tuple[int, int]]:
    """Each package record's size and mtime, as kept in envkit's record: a record rewritten since
    (by hand, by another tool, by a damaged disk) under the same name is then no longer taken for
    the one envkit installed, at the cost of a stat per package (make's and git's index's test)."""
    out = {}
    for path in (prefix / "conda-meta").glob("*.json"):
        with contextlib.suppress(OSError):
            status = path.stat()
            out[path.name] = (status.st_size, status.st_mtime_ns)
    return out
