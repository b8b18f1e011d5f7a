"""Where a command talks to a person: the console its output goes to, and whether it may ask."""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from envkit.ui.console import Out


class UI:
    """Consoles made on first use, and whether one can be asked. `stdout_taken`: stdout carries
    something else (--json's document, `-o /dev/stdout`'s file), so what envkit says goes to stderr."""

    def __init__(self, as_json: bool, stdout_taken: bool = False) -> None:
        self.as_json = as_json
        self.stdout_taken = as_json or stdout_taken
        self.interactive = sys.stdin.isatty() and sys.stdout.isatty() and not as_json

    @functools.cached_property
    def out(self) -> Out:
        """Plans and results: stderr when stdout is taken; rich's console, unwrapped off a terminal."""
        from envkit.ui.console import console

        return console(stderr=self.stdout_taken)

    @functools.cached_property
    def terminal(self) -> Console:
        """rich's console, for questions and progress bars: used only when interactive, where it
        is `out` itself."""
        from rich.console import Console

        from envkit.ui.console import rich_console

        out = self.out
        return out if isinstance(out, Console) else rich_console(sys.stderr if self.stdout_taken else sys.stdout, None)

    def ask(self, question: str) -> bool:
        """Yes only for y or yes; Ctrl-D (the end of input) is a no, as the default is."""
        try:
            answer = self.terminal.input(f"{question} [y/N] ", markup=False)
        except EOFError:
            self.terminal.print()
            return False
        return answer.strip().lower() in ("y", "yes")

    def say(self, message: str) -> None:
        """One line beside the result: on stderr when stdout is taken."""
        from envkit.core.errors import one_line

        (sys.stderr if self.stdout_taken else sys.stdout).write(one_line(message) + "\n")
