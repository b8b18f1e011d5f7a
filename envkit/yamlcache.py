"""YAML already parsed, kept as JSON by the hash of its text.

Most commands read recipes and condarc files that have not changed since the last command, and
importing PyYAML alone costs more than the rest of envkit's reading of them (about 15 ms of a
lock or sync that takes 200). A parse is a pure function of the text, so its result is kept under
the text's SHA-256 and PyYAML is imported only for text it has not seen. What is kept is plain
JSON, checked on the way in and on the way out: a document holding anything JSON cannot say
exactly (a date, bytes, a set, a key that is not a string) is never kept, and a kept entry that
does not read back as expected is ignored. The key includes the PyYAML module's file identity,
so an upgrade of PyYAML starts afresh. Nothing here may fail a command: a cache that cannot be
read or written is a cache that missed.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from envkit import __version__, paths
from envkit.digests import sha256

FORMAT = 2  # bumped whenever a parse accepts less (2: a lone surrogate is refused), so no entry kept before skips the new check
KEEP_AT_MOST = 256  # entries; beyond it the oldest half goes (recipes are a few KB each)


@functools.cache
def _yaml_identity() -> str:
    """PyYAML's own file as installed: a reinstall or an upgrade changes its mtime, or its path."""
    try:
        spec = importlib.util.find_spec("yaml")
        origin = spec.origin if spec else None
        if origin is None:
            return "none"
        st = os.stat(origin)
    except (ImportError, ValueError, OSError):
        return "none"
    return f"{origin}:{st.st_mtime_ns}:{st.st_size}"


def _entry(kind: str, text: str) -> Path:
    key = sha256(f"{FORMAT}\0{__version__}\0{_yaml_identity()}\0{kind}\0{text}".encode("utf-8", "surrogatepass"))
    return paths.cache_dir() / "yaml" / f"{key.hexdigest()}.json"


def is_plain(value: object, depth: int = 0) -> bool:
    """JSON that reads back as the same Python value: no tuples, no non-string keys, no dates."""
    if depth > 100:
        return False
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if type(value) is list:
        return all(is_plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and is_plain(v, depth + 1) for k, v in value.items())
    return False


def recall(kind: str, text: str) -> tuple[Any] | None:
    """(what `keep` kept for this text,), or None when nothing was (a kept value may be None)."""
    try:
        kept = json.loads(_entry(kind, text).read_bytes())
    except (OSError, ValueError):
        return None
    if isinstance(kept, dict) and kept.get("format") == FORMAT and "value" in kept:
        return (kept["value"],)
    return None


def keep(kind: str, text: str, value: Any) -> None:
    """Keep `value` (plain JSON only) for this text; any failure just means no entry."""
    if not is_plain(value):
        return
    path = _entry(kind, text)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError, ValueError):
        path.parent.mkdir(parents=True, exist_ok=True)
        # no fsync: an entry torn by a crash reads as invalid JSON, which is a miss
        tmp.write_text(json.dumps({"format": FORMAT, "value": value}, allow_nan=True), encoding="utf-8")
        os.replace(tmp, path)
        _prune(path.parent)
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


def _prune(folder: Path) -> None:
    entries = [e for e in os.scandir(folder) if e.name.endswith(".json")]
    if len(entries) <= KEEP_AT_MOST:
        return
    for entry in sorted(entries, key=lambda e: e.stat().st_mtime)[: len(entries) // 2]:
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
