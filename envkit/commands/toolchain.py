"""`envkit toolchain`: the toolchain map of an env (envkit.audit.toolchain)."""

from __future__ import annotations

import argparse
from pathlib import Path

from envkit.audit.toolchain import ToolchainMap, env_toolchain
from envkit.commands import Result
from envkit.commands.arguments import env_args, json_flag
from envkit.prefix.envs import select_env
from envkit.ui.terminal import UI
from envkit.ui.views import toolchain_view


def add_arguments(p: argparse.ArgumentParser) -> None:
    env_args(p)
    json_flag(p)


def invoke(args: argparse.Namespace, ui: UI) -> Result[ToolchainMap]:
    return toolchain(select_env(args.name, args.prefix))


def toolchain(prefix: Path) -> Result[ToolchainMap]:
    return Result("toolchain", env_toolchain(prefix), view=toolchain_view)
