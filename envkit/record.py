"""conda-meta/envkit.json: what envkit did to an env, versioned so later envkits can read it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envkit.errors import UsageError
from envkit.fsutil import atomic_write_text

RECORD_VERSION = 1


def record_path(prefix: Path) -> Path:
    return prefix / "conda-meta" / "envkit.json"


def write_record(prefix: Path, record: dict[str, Any]) -> None:
    # The version is this writer's, whatever a record read back earlier carried.
    data = {**record, "envkit_record_version": RECORD_VERSION}
    atomic_write_text(record_path(prefix), json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_record(prefix: Path) -> dict[str, Any] | None:
    path = record_path(prefix)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})", hint="delete it and run 'envkit audit --fix'") from None
    if not isinstance(data, dict) or data.get("envkit_record_version") != RECORD_VERSION:
        raise UsageError(
            f"{path}: unsupported record version {data.get('envkit_record_version') if isinstance(data, dict) else None!r}",
            hint="upgrade envkit",
        )
    return data
