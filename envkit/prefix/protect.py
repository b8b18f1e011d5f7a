"""Prefixes envkit must leave alone: an env marked frozen (CEP 22), and, for the commands that delete
a prefix whole (`remove`, `create --force`), a conda installation's base or a prefix that holds
other envs.

CEP 22 (https://conda.org/learn/ceps/cep-0022/): a `conda-meta/frozen` file asks every tool not to
change the env unless told to for that one command; it may hold `{"message": "..."}`, the reason,
which the tool must show. conda 26 honours it (`conda install`, `remove`, `env update` refuse;
`--override-frozen` overrides), and installers made by constructor can freeze the base env. envkit's
commands that change an env in place or delete it refuse likewise, with conda's flag name.

conda refuses to remove only the base env of the conda that runs (`context.root_prefix`); a second
conda installation on the same machine (an old anaconda3 beside miniforge3) is to it an env like any
other, and so it was to `envkit remove`: the whole installation went, its envs and its package
cache with it. What envkit takes for an installation: envs inside its `envs/` folder, which
deleting the prefix would delete too; or conda installed in the prefix (as a conda package, or as
a Python distribution where pip put it) together with what only an installation keeps there: its
package cache (`pkgs/`), its envs folder (`envs/`, empty or not), or its own `.condarc`. An env
that merely has the conda package, as a conda-build env does, keeps none of them. A wrong guess
here refuses a removal and says why; it never deletes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envkit.core.errors import UsageError

FROZEN_MARKER = ("conda-meta", "frozen")
OVERRIDE_FLAG = "--override-frozen"


@dataclass(frozen=True)
class FrozenEnv:
    """An env whose `conda-meta/frozen` asks that no tool change it."""

    prefix: Path
    reason: str  # the marker's message on one line; "" where it gives none

    def refusal(self, doing: str) -> UsageError:
        """`doing`: what the command would do to the env, as a verb phrase ("sync", "remove")."""
        why = f": {self.reason}" if self.reason else ""
        return UsageError(
            f"{self.prefix} is frozen (conda-meta/frozen){why}; envkit does not {doing} it",
            hint=f"pass {OVERRIDE_FLAG} to {doing} it all the same, at your own risk; conda's flag of that name does the same for conda",
        )


def frozen_marker(prefix: Path) -> bytes | None:
    """The marker as conda reads it (a file, not a folder, by that exact name), byte for byte; None
    where there is none. One that cannot be read still freezes the env: b"", no reason to show."""
    marker = prefix.joinpath(*FROZEN_MARKER)
    try:
        return marker.read_bytes() if marker.is_file() else None
    except OSError:
        return b""


def frozen_env(prefix: Path) -> FrozenEnv | None:
    """The env's marker (frozen_marker) with its reason; one that cannot be parsed still freezes
    the env, only without a reason to show."""
    data = frozen_marker(prefix)
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    reason = ""
    if text.strip():
        try:
            content = json.loads(text)
        except ValueError:
            content = None
        if isinstance(content, dict) and isinstance(content.get("message"), str):
            reason = " ".join(content["message"].split())  # one line, as every envkit error is
    return FrozenEnv(prefix, reason)


def must_not_be_frozen(prefix: Path, doing: str, *, override: bool) -> None:
    if override:
        return
    found = frozen_env(prefix)
    if found is not None:
        raise found.refusal(doing)


def more_than_an_env(prefix: Path) -> str | None:
    """Why deleting `prefix` whole would delete more than one env; None where it would not."""
    from envkit.solve.condaconfig import root_prefix  # not for the frozen check, which a no-op sync makes

    root = root_prefix()
    if root is not None and _same(prefix, root):
        return "it is the base env of the conda in use"
    inner = sorted(meta.parent.name for meta in (prefix / "envs").glob("*/conda-meta") if meta.is_dir())
    if inner:
        shown = ", ".join(inner[:3]) + (f" and {len(inner) - 3} more" if len(inner) > 3 else "")
        return f"it holds other envs in its envs folder ({shown})"
    if _has_conda(prefix):
        for kept, is_there in INSTALLATION_KEEPS:
            if is_there(prefix):
                return f"it is a conda installation (conda is installed in it, with {kept})"
    return None


# What a conda installation keeps in its prefix and an env with conda in it does not, in the order
# a refusal names them.
INSTALLATION_KEEPS: tuple[tuple[str, Callable[[Path], bool]], ...] = (
    ("its package cache in pkgs", lambda prefix: (prefix / "pkgs").is_dir()),
    ("its envs folder", lambda prefix: (prefix / "envs").is_dir()),
    ("its own .condarc", lambda prefix: (prefix / ".condarc").is_file()),
)


def _has_conda(prefix: Path) -> bool:
    """conda installed in `prefix`: as a conda package (its record), or as a Python distribution,
    where pip put it (a base made without a conda channel, as ../shared/conda's install.sh does)."""
    if any((prefix / "conda-meta").glob("conda-[0-9]*.json")):
        return True
    return any(prefix.glob("lib/python3*/site-packages/conda-[0-9]*.dist-info")) or any(
        prefix.glob("Lib/site-packages/conda-[0-9]*.dist-info")
    )


def must_be_an_env_alone(prefix: Path, doing: str) -> None:
    why = more_than_an_env(prefix)
    if why is not None:
        raise UsageError(
            f"{prefix}: envkit does not {doing} it, {why}",
            hint="remove or replace the envs inside a conda installation, not the installation; delete it yourself if that is what you mean",
        )


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
