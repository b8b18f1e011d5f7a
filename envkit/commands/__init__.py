"""One module per command: its arguments (`add_arguments`), its run (`invoke`) and its views. The
registry (envkit.commands.registry) names them; envkit.cli parses argv and calls the one named."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from envkit.ui.console import Out

T = TypeVar("T")


@dataclass(frozen=True)
class Result(Generic[T]):
    """What every command returns: its data (the JSON document's `data`, and what `view` shows a
    person), and the exit code it ends with."""

    command: str
    data: T
    exit_code: int = 0
    messages: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()  # why a failing result failed, one line each (the envelope's `errors`)
    # the command envkit ran ended by this signal: envkit ends by it too, once its output is out, so
    # that a shell loop stops on Ctrl-C and a scheduler sees the kill (exit_code is 128 + it)
    end_signal: int | None = None
    view: Callable[[Out, T], None] | None = None  # how a person sees `data`; None: the messages say it all

    def show(self, out: Out) -> None:
        """The result as a person reads it: its view, then its messages."""
        from envkit.ui.console import escape

        if self.view is not None:
            self.view(out, self.data)
        for message in self.messages:
            out.print(escape(message))
