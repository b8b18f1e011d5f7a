"""Where envkit keeps its own files; every location honours its environment override."""

from __future__ import annotations

import os
from pathlib import Path


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "envkit"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "envkit"


def user_recipe_dir() -> Path:
    return config_dir() / "recipes"


def builtin_recipe_dir() -> Path:
    """Recipes ship inside the wheel as envkit/recipes; a source checkout keeps them at the top."""
    packaged = Path(__file__).parent / "recipes"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "recipes"
