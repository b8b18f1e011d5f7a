"""The commands envkit has: a name, one line of help, and the module that holds the rest.

A command's module is imported only when that command runs (or when every command's arguments are
wanted: the reference docs). Importing all of them first makes `envkit --version` several times
slower (bench/run.py version measures both), so the table names modules, not functions."""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    from envkit.commands import Result
    from envkit.ui.terminal import UI


class CommandModule(Protocol):
    """What each module in envkit.commands that the table names provides."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None: ...

    def invoke(self, args: argparse.Namespace, ui: UI) -> Result[Any]: ...


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    module: str  # in envkit.commands

    def load(self) -> CommandModule:
        return cast(CommandModule, importlib.import_module(f"envkit.commands.{self.module}"))


COMMANDS = (
    Command("recipes", "list, show, validate, check recipes; manage recipe repos", "recipes"),
    Command("create", "solve a recipe (or install its lock) and create the env, activation scripts and probe", "create"),
    Command("lock", "solve a recipe for each of its platforms and write a lock file (rattler's format)", "lock"),
    Command("sync", "bring an existing env to its recipe (or lock) in place, all or nothing", "sync"),
    Command("export", "write an env for other tools: environment.yml, @EXPLICIT, Dockerfile, lock", "export"),
    Command("list", "envs conda knows, with their recipe, source commit, created date, health and drift", "list_envs"),
    Command("remove", "remove an env and its registry line (like conda env remove)", "remove"),
    Command("probe", "run the toolchain probe inside an env and record its health", "probe"),
    Command("audit", "find toolchain and threading hazards in existing envs", "audit"),
    Command(
        "toolchain", "which package or wheel provides each BLAS, OpenMP and torch library, who brought it, what conflicts", "toolchain"
    ),
    Command("activation", "what an env's activation does", "activation"),
    Command("run", "run a command under an env's activation (like conda run); exits with its code", "run"),
    Command("shell", "start your shell with an env activated (no conda needed); exit leaves it", "shell"),
    Command("shell-hook", 'print an env\'s activation for eval "$(envkit shell-hook -n ENV)" (no conda needed)', "shell_hook"),
)
BY_NAME = {command.name: command for command in COMMANDS}
