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
    packaged = Path(__file__).resolve().parents[1] / "recipes"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "recipes"


def lock_beside(recipe_name: str, recipe_source: str, recipe_path: str) -> Path:
    """Where `envkit lock` puts a recipe's lock: NAME.lock beside the recipe file (ENVKIT_RECIPE_PATH,
    the user dir, a team repo's checkout); ./NAME.lock for a built-in recipe, whose directory
    belongs to the installation."""
    if recipe_source == "builtin":
        return Path.cwd() / f"{recipe_name}.lock"
    return Path(recipe_path).parent / f"{recipe_name}.lock"
