"""`envkit recipes list|show|validate|add-source|update`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envkit.commands import Result
from envkit.errors import EnvkitError, ExitCode
from envkit.recipe.compile import CompiledRecipe, compile_recipe
from envkit.recipe.consistency import ConsistencyFinding, check_recipe, require_consistent
from envkit.recipe.gitsource import add_source, update_sources
from envkit.recipe.loader import load_recipe
from envkit.recipe.model import Recipe
from envkit.recipe.sources import all_sources, list_names, recipe_file, unusable_files


@dataclass(frozen=True)
class ListedRecipe:
    name: str
    source: str
    kind: str
    path: str
    commit: str | None
    description: str
    shadowed_by: str | None


def list_recipes() -> Result:
    rows: list[ListedRecipe] = []
    winner: dict[str, str] = {}
    for source in all_sources():
        for name in list_names(source):
            path = recipe_file(source, name)
            assert path is not None
            try:
                description = load_recipe(str(path)).description if name not in winner else ""
            except EnvkitError as exc:
                description = f"(invalid: {exc.lines()[0]})"
            rows.append(ListedRecipe(name, source.name, source.kind, str(path), source.commit, description, winner.get(name)))
            winner.setdefault(name, source.name)
        for path, why in unusable_files(source):
            rows.append(ListedRecipe(path.stem, source.name, source.kind, str(path), source.commit, f"(not usable: {why})", None))
    return Result("recipes list", rows)


@dataclass(frozen=True)
class ShownRecipe:
    recipe: Recipe
    compiled: CompiledRecipe | None
    findings: tuple[ConsistencyFinding, ...]


def show_recipe(name: str, resolved: bool) -> Result:
    recipe = load_recipe(name)
    findings = tuple(check_recipe(recipe))
    return Result("recipes show", ShownRecipe(recipe, compile_recipe(recipe) if resolved else None, findings))


@dataclass(frozen=True)
class Validation:
    path: str
    ok: bool
    problems: tuple[str, ...]
    warnings: tuple[str, ...]


def validate(paths: list[str]) -> Result:
    out = []
    for path in paths:
        try:
            recipe = load_recipe(path)
            findings = require_consistent(recipe)
            compile_recipe(recipe)
            out.append(Validation(path, True, (), tuple(f"{f.rule.id}: {f.message}" for f in findings)))
        except EnvkitError as exc:
            out.append(Validation(path, False, tuple(exc.lines()), ()))
    code = ExitCode.OK if all(v.ok for v in out) else ExitCode.USAGE
    return Result("recipes validate", out, int(code), errors=tuple(p for v in out for p in v.problems))


def add(url: str, name: str | None, ref: str | None) -> Result:
    if "://" not in url and not url.startswith(("/", "git@")) and Path(url).exists():
        url = Path(url).absolute().as_uri()
    return Result("recipes add-source", add_source(url, name, ref))


def update(name: str | None, check_only: bool) -> Result:
    return Result("recipes update", update_sources(name, apply=not check_only))
