"""One module per command. Each returns a Result; none prints. Rendering lives in envkit.render."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Result:
    command: str
    data: Any
    exit_code: int = 0
    messages: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()  # why a failing result failed, one line each (the envelope's `errors`)
