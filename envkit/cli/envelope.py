"""The versioned JSON document every command prints with --json. Kept apart from the rich renderers
so that printing JSON (and the CLI's quickest paths) never loads rich."""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
from pathlib import Path
from typing import Any

from envkit import __version__
from envkit.commands import Result

JSON_SCHEMA_VERSION = 1


def jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        skip = ("check", "advise", "records", *getattr(value, "JSON_EXCLUDE", ()))
        out = {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name not in skip}
        # Properties a class names in JSON_PROPERTIES (derived values such as a report's status) are part of its JSON.
        for name in getattr(value, "JSON_PROPERTIES", ()):
            out[name] = jsonable(getattr(value, name))
        return out
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def envelope(
    result: Result[Any] | None, *, command: str, exit_code: int, errors: list[str] | None = None, hint: str | None = None
) -> dict[str, Any]:
    return {
        "envkit_json": JSON_SCHEMA_VERSION,
        "envkit_version": __version__,
        "command": command,
        "ok": exit_code == 0,
        "exit_code": exit_code,
        "data": jsonable(result.data) if result is not None else None,
        "messages": list(result.messages) if result is not None else [],
        "errors": errors or (list(result.errors) if result is not None else []),
        "hint": hint,
    }


def print_json(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()
