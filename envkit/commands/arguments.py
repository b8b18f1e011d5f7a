"""Arguments several commands take, spelled once: an env, channels, a lock, --update, --json."""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh", "dash", "sh", "posix", "fish", "csh", "tcsh", "cmd", "cmd.exe", "powershell", "pwsh")


def given(text: str) -> str:
    """An env name, prefix, file, channel or rule: an empty one names nothing (conda refuses it
    too), so `-p "$UNSET_VAR"` is an error rather than the default env."""
    if not text:
        raise argparse.ArgumentTypeError("needs a value, not an empty string")
    return text


def json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one versioned JSON document on stdout")


def env_args(p: argparse.ArgumentParser, default: str = "the active env") -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument("-n", "--name", type=given, help=f"env name (as in 'conda env list'); default: {default}")
    group.add_argument("-p", "--prefix", type=given, help=f"env prefix path; default: {default}")


def channel_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--channel", action="append", default=[], type=given, help="add a channel (before the recipe's)")
    p.add_argument("--override-channels", action="store_true", help="use only the -c channels")
    p.add_argument("--mirror", action="append", default=[], metavar="NAME=URL", help="map a channel name to a mirror URL")


def lock_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--locked", action="store_true", help=f"{what} the lock beside the recipe (envkit lock writes it); no solve")
    p.add_argument("--lock", type=given, metavar="FILE", help=f"{what} this lock file; no solve")
    p.add_argument("--frozen", action="store_true", help="use the lock even if the recipe changed since it was made")


def update_args(p: argparse.ArgumentParser, *, kept: str, afresh: str) -> None:
    """lock and sync keep what they have where the recipe allows: these let packages move."""
    p.add_argument(
        "--update",
        action="append",
        default=[],
        type=given,
        metavar="NAME",
        help=f"let this package move to what the recipe allows now (repeatable; {kept})",
    )
    p.add_argument("--update-all", action="store_true", help=f"solve the recipe afresh: {afresh}")


def override_frozen_flag(p: argparse.ArgumentParser, doing: str) -> None:
    p.add_argument(
        "--override-frozen",
        action="store_true",
        help=f"{doing} an env marked frozen (conda-meta/frozen, CEP 22) all the same; at your own risk, as with conda's flag",
    )
