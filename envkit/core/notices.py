"""Things envkit did on the side that the user must hear about: an interrupted run it recovered,
an abandoned extraction it removed. Domain code calls `notify`; the CLI collects them around a
command and shows them with its result (JSON: in `messages`). Nothing here prints."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

_SINK: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("envkit_notices", default=None)


def notify(text: str) -> None:
    sink = _SINK.get()
    if sink is not None:
        sink.append(text)


@contextmanager
def collecting() -> Iterator[list[str]]:
    sink: list[str] = []
    token = _SINK.set(sink)
    try:
        yield sink
    finally:
        _SINK.reset(token)
