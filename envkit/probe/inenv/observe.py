"""Child (also used by seed_child): the runtime observations, each reported as a tagged line, each
guarded so that one failing observation cannot hide the others."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from . import gpu, numeric
from .report import report

OBSERVERS: dict[str, Callable[[], Any]] = {"NUMERIC": numeric.observe, "GPU": gpu.observe}


def observe_all(tags: list[str]) -> None:
    for tag in tags:
        try:
            report(tag, OBSERVERS[tag]())
        except Exception as exc:
            report("ERR-" + tag, repr(exc))


if __name__ == "__main__":
    observe_all(sys.argv[1:])
