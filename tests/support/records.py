"""The env record as the file holds it: tests assert on what envkit wrote, key by key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envkit.prefix.envrecord import EnvRecord
from envkit.prefix.record import existing_record_path, write_record


def record_json(prefix: Path) -> dict[str, Any]:
    """etc/envkit/record.json (or the legacy place) parsed; fails the test where there is none."""
    path = existing_record_path(prefix)
    assert path is not None, f"{prefix} has no envkit record"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def write_record_json(prefix: Path, data: dict[str, Any]) -> None:
    """A record of these parts, written the way envkit writes one (as a hand edit would leave it, parsed)."""
    write_record(prefix, EnvRecord.from_json(data))
