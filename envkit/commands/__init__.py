"""One module per command. Each returns a Result; none prints. Rendering lives in envkit.cli.render."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Result:
    """What every command returns: data for JSON and rendering, and the exit code it ends with."""

    command: str
    data: Any
    exit_code: int = 0
    messages: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()  # why a failing result failed, one line each (the envelope's `errors`)
    # the command envkit ran ended by this signal: envkit ends by it too, once its output is out, so
    # that a shell loop stops on Ctrl-C and a scheduler sees the kill (exit_code is 128 + it)
    end_signal: int | None = None
