"""The one rule for names envkit gives out and accepts: recipes, recipe sources, envs, and the
variables activation sets. Kept apart from the recipe model so the quick commands can check a name
without loading it."""

from __future__ import annotations

import re

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # an environment variable every shell can name

# what conda refuses in an env's name, and so in the folder of an env it makes
# (conda.base.constants.PREFIX_NAME_DISALLOWED_CHARS)
CONDA_NAME_REFUSES = frozenset("/ :#")
# conda's own env goes by these (conda.base.constants.RESERVED_ENV_NAMES)
CONDA_RESERVED_NAMES = ("base", "root")


def refused_characters(name: str) -> str | None:
    """The characters of CONDA_NAME_REFUSES in `name`, as a message names them ("a space and '#'")."""
    found = sorted(set(name) & CONDA_NAME_REFUSES)
    return " and ".join("a space" if c == " " else f"'{c}'" for c in found) or None


def env_name_problem(name: str) -> str | None:
    """Why conda would not take `name` for an env (`-n NAME`), or None. Env names are conda's, not
    envkit's recipe names: "MyEnv" and "py3.11" are fine; "base" is conda's own env."""
    if name in CONDA_RESERVED_NAMES:
        return f"'{name}' is the name of conda's own (base) env; conda refuses it too"
    if name in (".", ".."):  # conda takes '..' and makes the env in the envs folder's parent
        return f"'{name}' names a folder, not an env"
    if refused := refused_characters(name):
        return f"an env name cannot contain {refused}; conda refuses it too"
    if not name.isprintable():
        return "an env name cannot contain control characters"
    if len(name.encode("utf-8", "surrogateescape")) > 255:
        return "an env name is a folder name: at most 255 bytes"
    return None


def is_relative_path(channel: str) -> bool:
    """A channel given as a path that is not absolute ('./ch', '../ch', '~/ch'): conda reads it as
    a folder, not as a channel's name."""
    return channel in (".", "..", "~") or channel.startswith(("./", "../", "~/"))
