"""Resolve a recipe by name or path: load every file in its extends chain, merge, type it."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

from envkit.core.errors import Location, Problem, RecipeError, SourceError
from envkit.recipe.fields import default
from envkit.recipe.merge import merge_layers
from envkit.recipe.model import (
    EnvOp,
    ProbeSpec,
    PytorchChoice,
    Recipe,
    RecipeOrigin,
    Threading,
    Toolchain,
)
from envkit.recipe.schema import Layer, validate_layer
from envkit.recipe.sources import RecipeSource, find_recipe, source_qualified, sources_holding
from envkit.recipe.yamlsource import load_yaml


def check_recipe_path(path: Path, given: str) -> None:
    """A path that is not a readable regular file says what it is instead."""
    if path.is_symlink() and not path.exists():
        raise SourceError(f"recipe {given}: a broken symbolic link (to {os.readlink(path)})", hint="point it at a recipe file")
    if not path.exists():
        raise SourceError(f"recipe file not found: {given}", hint=source_qualified(given))
    if path.is_dir():
        raise SourceError(f"recipe {given}: is a directory", hint="give a .yaml file, or add the directory to ENVKIT_RECIPE_PATH")
    if not path.is_file():
        kind = "a FIFO" if stat.S_ISFIFO(path.stat().st_mode) else "not a regular file"
        raise SourceError(f"recipe {given}: {kind}", hint="give a .yaml file")


def read_layer(path: Path) -> Layer:
    """Load and validate one file on its own; raises with every problem it has."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RecipeError([Problem(Location(str(path), 1, 1), "", f"not UTF-8 text ({exc.reason})")]) from None
    except OSError as exc:
        raise SourceError(f"cannot read recipe {path}: {exc.strerror}") from None
    layer, problems = validate_layer(load_yaml(text, str(path)))
    if problems:
        raise RecipeError(problems)
    return layer


Resolved = tuple[Layer, RecipeSource | None, Path]


def _resolve(
    name: str,
    source: RecipeSource | None,
    path: Path | None,
    stack: tuple[str, ...],
    *,
    files: list[str],
    memo: dict[Path, Resolved],
) -> Resolved:
    """Each file is read and resolved once per load: a diamond of parents (two parents sharing
    ancestors, level after level) would otherwise be resolved once per path through it."""
    if path is None:
        source, path = find_recipe(name, prefer=source)
    key = path.resolve()
    if key in memo:
        return memo[key]
    layer = read_layer(path)
    files.append(str(path))
    own = layer.get("name", name)
    if own != path.stem and path.suffix in (".yaml", ".yml"):
        raise RecipeError(
            [
                Problem(
                    layer.get("origins", {}).get("name") or Location(str(path), 1, 1),
                    "name",
                    f"the recipe is named '{own}' but its file is '{path.name}'; rename one so they match",
                )
            ]
        )
    if own in stack:
        chain = " -> ".join((*stack, own))
        raise RecipeError([Problem(Location(str(path), 1, 1), "extends", f"extends cycle: {chain}")])
    merged: Layer = {}
    for parent in layer.get("extends", []):
        if parent in (*stack, own):
            chain = " -> ".join((*stack, own, parent))
            raise RecipeError([Problem(Location(str(path), 1, 1), "extends", f"extends cycle: {chain}")])
        try:
            parent_layer, _, _ = _resolve(parent, source, None, (*stack, own), files=files, memo=memo)
        except SourceError as exc:
            raise SourceError(f"{path}: extends '{parent}': {exc.message}", hint=exc.hint) from None
        merged = merge_layers(merged, parent_layer)
    result = merge_layers(merged, layer)
    if "extends" in layer:
        result["extends"] = layer["extends"]
    memo[key] = (result, source, path)
    return memo[key]


def load_recipe(name_or_path: str) -> Recipe:
    """Load a recipe by name (searched in sources) or by a path to a .yaml file."""
    files: list[str] = []
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        layer, path = _load_path(name_or_path, files)
        return _loaded(layer, "file", path, None, files)
    layer, source, path = _resolve(name_or_path, None, None, (), files=files, memo={})
    assert source is not None
    return _loaded(layer, source.name, path, source.commit, files)


def load_recorded(source: str, path: str) -> Recipe:
    """The recipe an env was made from, loaded again from the file it was made from. While the
    source it came from still holds that file, the recipe keeps that source's name and its commit
    now (a team repo's recipe synced after 'recipes update' is at the new commit); otherwise it is
    a plain file."""
    files: list[str] = []
    layer, found = _load_path(path, files)
    holder = next((s for s in sources_holding(found) if s.name == source), None)
    return _loaded(layer, holder.name, found, holder.commit, files) if holder else _loaded(layer, "file", found, None, files)


def _loaded(layer: Layer, source: str, path: Path, commit: str | None, files: list[str]) -> Recipe:
    """The recipe read from `path` (and the `files` it extends), which it names by absolute paths:
    an env records them, and `recipes/train.yaml` named from one directory is synced from any."""
    return build_recipe(layer, RecipeOrigin(source, os.path.abspath(path), commit), tuple(os.path.abspath(f) for f in files))


def _load_path(given: str, files: list[str]) -> tuple[Layer, Path]:
    candidate = Path(given)
    check_recipe_path(candidate, given)
    # a recipe given by path finds its parents beside it first (a repo checkout), then as usual
    beside = RecipeSource(f"dir {candidate.parent}", "path", candidate.parent.absolute())
    layer, _, path = _resolve(candidate.stem, beside, candidate, (), files=files, memo={})
    return layer, path


def build_recipe(layer: Layer, origin: RecipeOrigin, chain: tuple[str, ...]) -> Recipe:
    """Turn a merged layer into the typed recipe, applying defaults; each per_platform entry
    becomes the whole recipe as it is on that platform."""
    base = {k: v for k, v in layer.items() if k != "per_platform"}
    recipe = _typed(base, origin, chain)
    variants = {}
    for platform, entry in layer.get("per_platform", {}).items():
        merged = merge_layers(base, entry)
        merged["name"] = layer["name"]
        variants[platform] = _typed(merged, origin, chain)
    return replace(recipe, per_platform=variants) if variants else recipe


def _typed(layer: Layer, origin: RecipeOrigin, chain: tuple[str, ...]) -> Recipe:
    if not layer.get("channels"):
        raise RecipeError([Problem(Location(origin.path, 1, 1), "channels", "no channels given (in this recipe or any it extends)")])
    tc: dict[str, Any] = layer.get("toolchain", {})
    torch = tc.get("pytorch")
    toolchain = Toolchain(
        blas=tc.get("blas"),
        mkl=tc.get("mkl"),
        openmp=tc.get("openmp"),
        pytorch=PytorchChoice(**torch) if torch is not None else None,
    )
    th: dict[str, Any] = layer.get("threading", {})
    env: dict[str, EnvOp] = th.get("env", {})
    threading = Threading(
        mkl_threading_layer=th.get("mkl_threading_layer"),
        omp_num_threads=th.get("omp_num_threads"),
        mkl_num_threads=th.get("mkl_num_threads"),
        openblas_num_threads=th.get("openblas_num_threads"),
        env=tuple(env.values()),
    )
    pr: dict[str, Any] = layer.get("probe", {})
    probe = ProbeSpec(
        imports=tuple(pr.get("imports", ())),
        import_orders=tuple(tuple(o) for o in pr.get("import_orders", ())),
        ddp=pr.get("ddp", default("probe.ddp")),
        nproc=pr.get("nproc", default("probe.ddp.nproc")),
        expect=tuple(sorted(pr.get("expect", {}).items())),
        timeout=pr.get("timeout", default("probe.timeout")),
        torch_build=toolchain.pytorch.variant if toolchain.pytorch else None,
    )
    return Recipe(
        name=layer["name"],
        description=layer.get("description", default("description")),
        origin=origin,
        extends=tuple(layer.get("extends", ())),
        chain=chain,
        channels=tuple(layer.get("channels", ())),
        platforms=tuple(layer.get("platforms", default("platforms"))),  # none declared: the machine it runs on
        python=layer.get("python"),
        packages=tuple(layer.get("packages", ())),
        pip=tuple(layer.get("pip", ())),
        toolchain=toolchain,
        threading=threading,
        probe=probe,
        force=tuple(layer.get("force", ())),
        require_proof=tuple(layer.get("require_proof", ())),
        origins=dict(layer.get("origins", {})),
    )
