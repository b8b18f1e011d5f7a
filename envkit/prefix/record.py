"""etc/envkit/record.json: what envkit did to an env, versioned so later envkits can read it.

Why this place:
- Not in conda-meta/. conda (`PrefixData.load`), mamba and micromamba read every
  `conda-meta/*.json` as a package record named NAME-VERSION-BUILD.json, so envkit 0.1's
  `conda-meta/envkit.json` made `conda list`, `install`, `remove --all` and `env export` fail on
  every envkit env. An extension-less `conda-meta/envkit` (as pixi keeps `conda-meta/pixi`) is not
  parsed, but conda's clone skips conda-meta/ entirely (`misc.walk_prefix`), so `conda rename` and
  `conda create --clone` would carry envkit's activation scripts over and drop the record that
  explains them.
- In etc/envkit/: conda parses nothing there; a clone copies it like every untracked file (with
  the prefix rewritten), `conda remove --all` deletes it with the env, and it stays beside the
  etc/conda/activate.d scripts it describes.

Records written by envkit 0.1 at `conda-meta/envkit.json` are read from there, moved by the next
write, and reported by the audit (EK021) until then.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from envkit.core.digests import file_sha256
from envkit.core.errors import UsageError
from envkit.core.fsutil import atomic_write_text, created_mode, write_staged
from envkit.prefix.envrecord import READABLE_VERSIONS, EnvRecord, JSONObject

RECORD_REL = "etc/envkit/record.json"
LEGACY_RECORD_REL = "conda-meta/envkit.json"


def record_path(prefix: Path) -> Path:
    return prefix / RECORD_REL


def sync_journal_path(prefix: Path) -> Path:
    """Where a sync in progress keeps what the env was (envkit.install.journal); its presence means unfinished."""
    return prefix / "etc" / "envkit" / "sync-journal"


def partial_journals(prefix: Path) -> list[Path]:
    """Journal copies a killed writer left half-made: never renamed into place, so nothing was
    changed under them."""
    journal = sync_journal_path(prefix)
    try:
        with os.scandir(journal.parent) as entries:
            return sorted(journal.parent / e.name for e in entries if e.name.startswith(f"{journal.name}.tmp-"))
    except OSError:  # no folder: no journal was ever begun
        return []


def legacy_record_path(prefix: Path) -> Path:
    return prefix / LEGACY_RECORD_REL


def write_record(prefix: Path, record: EnvRecord, *, staged: bool = False) -> None:
    """Write atomically at the current location, in this envkit's version; a record at the old
    location is then removed. `staged`: the prefix is a staging env that a rename puts in place
    (envkit.core.fsutil.write_staged)."""
    data = record.to_json()
    path = record_path(prefix)
    try:  # never narrowed; a record an older envkit wrote 0600 gets the bits open() gives (EK030)
        mode: int | None = (path.stat().st_mode & 0o7777) | created_mode()
    except OSError:
        mode = None
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    if staged:
        write_staged(path, text, mode=mode or created_mode())
    else:
        atomic_write_text(path, text, mode=mode)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(legacy_record_path(prefix))


def drop_record(prefix: Path) -> None:
    """Take out the record of an env envkit only fixed, once it keeps nothing: the env is conda's
    again, as it was before `audit --fix` (the folder goes too, when nothing else is in it)."""
    record_path(prefix).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        record_path(prefix).parent.rmdir()


def existing_record_path(prefix: Path) -> Path | None:
    for path in (record_path(prefix), legacy_record_path(prefix)):
        if path.is_file():
            return path
    return None


def record_digest(prefix: Path) -> str | None:
    """The record's bytes, hashed: what a probe's verdict is about (envkit.install.create.keep_verdict)."""
    path = existing_record_path(prefix)
    try:
        return file_sha256(path) if path is not None else None
    except OSError:
        return None


class RecordDenied(UsageError):
    """The record is there, but this user may not read it (a teammate's env, written 0600)."""


# nothing can rebuild a lost record (the recipe it was made from is what it records)
_REMAKE = "make the env again with 'envkit create RECIPE -p {prefix} --force', or delete the file to keep it as a plain conda env"


def read_record(prefix: Path) -> EnvRecord | None:
    """The env's record; None where envkit keeps none. Refused in one line: a file that is not JSON
    or not an envkit record, one this user may not read, one of a newer version."""
    data = read_record_json(prefix)
    return EnvRecord.from_json(data) if data is not None else None


def read_record_json(prefix: Path) -> JSONObject | None:
    """The record as JSON, its version checked: for the audit's rules on the file itself."""
    path = existing_record_path(prefix)
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{path}: not valid JSON ({str(exc)[:120]})", hint=_REMAKE.format(prefix=prefix)) from None
    except PermissionError as exc:
        raise RecordDenied(
            f"{path}: cannot be read ({exc.strerror})",
            hint="envkit once wrote it for its owner alone: the env's owner can open it with 'envkit audit --fix' (see EK030)",
        ) from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror})", hint="check its permissions") from None
    version = data.get("envkit_record_version") if isinstance(data, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > max(READABLE_VERSIONS):
        raise UsageError(f"{path}: record version {version} is newer than this envkit reads", hint="upgrade envkit")
    if not isinstance(data, dict) or version not in READABLE_VERSIONS:
        raise UsageError(f"{path}: not an envkit record (envkit_record_version {version!r})", hint=_REMAKE.format(prefix=prefix))
    return data


def move_legacy_record(prefix: Path) -> bool:
    """Move conda-meta/envkit.json to etc/envkit/record.json (the audit's EK021 fix); True if it moved."""
    old, new = legacy_record_path(prefix), record_path(prefix)
    if not old.is_file():
        return False
    if new.exists():  # both present: the new one is what the last envkit wrote
        old.unlink()
    else:
        new.parent.mkdir(parents=True, exist_ok=True)
        os.replace(old, new)
    return True
