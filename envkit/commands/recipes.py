"""`envkit recipes list|show|validate|check|add-source|remove-source|update`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from envkit.audit.recipe_rules import ConsistencyFinding, check_recipe, require_consistent
from envkit.commands import Result
from envkit.commands.arguments import given, json_flag
from envkit.commands.recipes_check import CheckedRecipe, check, recipe_files_in, required_kinds
from envkit.core.errors import EnvkitError, ExitCode, SourceError
from envkit.prefix.envs import all_envs
from envkit.prefix.record import read_record
from envkit.recipe.compile import CompiledRecipe, CompiledSpec, compile_recipe
from envkit.recipe.gitsource import AddedSource, RemovedSource, SourceUpdate, add_source, remove_source, update_sources
from envkit.recipe.loader import load_recipe
from envkit.recipe.model import Recipe
from envkit.recipe.platforms import known_platform
from envkit.recipe.sources import (
    all_sources,
    list_names,
    path_mistakes,
    recipe_file,
    unusable_files,
)
from envkit.ui.console import Out, TextTable, escape
from envkit.ui.terminal import UI
from envkit.ui.views import STATUS_STYLE


def add_arguments(recipes: argparse.ArgumentParser) -> None:
    rsub = recipes.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = rsub.add_parser("list", help="every recipe and where it comes from")
    json_flag(p)
    p = rsub.add_parser("show", help="a recipe, or with --resolved the specs and settings it compiles to")
    p.add_argument("recipe", help="recipe name or path to a .yaml file")
    p.add_argument("--resolved", action="store_true", help="show the compiled conda/pip specs and activation settings")
    p.add_argument("--platform", metavar="P", help="compile for this platform (default: this machine's), its per_platform entry applied")
    json_flag(p)
    p = rsub.add_parser("validate", help="check recipe files (schema, extends, consistency)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="recipe files or names")
    json_flag(p)
    p = rsub.add_parser("check", help="for a recipe repo's CI: every recipe valid, its lock present and fresh, each platform solvable")
    p.add_argument("paths", nargs="*", metavar="PATH", help="recipe files or directories of them (default: .)")
    p.add_argument(
        "--require-proof",
        metavar="KINDS",
        default="",
        help="fail unless each lock has a passing proof (envkit probe --attest) for each kind, besides the recipe's require_proof: "
        "e.g. linux-64,linux-64+cuda,linux-64+cuda_arch=9.0",
    )
    json_flag(p)
    p = rsub.add_parser("add-source", help="add a git repository of recipes, pinned to a commit")
    p.add_argument("url", type=given, help="git URL (https, ssh, file://) or a local path")
    p.add_argument("--name", type=given, help="source name (default: from the URL)")
    p.add_argument("--ref", type=given, help="branch, tag or commit (default: the remote's default branch)")
    json_flag(p)
    p = rsub.add_parser("remove-source", help="forget a recipe repo and delete envkit's checkout of it")
    p.add_argument("source", help="the source's name")
    json_flag(p)
    p = rsub.add_parser("update", help="fetch recipe repos, show what changed, then move the pins")
    p.add_argument("source", nargs="?", help="one source by name (default: all)")
    p.add_argument("--check", action="store_true", help="show what would change; move nothing")
    json_flag(p)


def invoke(args: argparse.Namespace, ui: UI) -> RecipesResult:
    """One of seven actions, each with a result of its own type."""
    if args.action == "list":
        return list_recipes()
    if args.action == "show":
        return show_recipe(args.recipe, args.resolved, args.platform)
    if args.action == "validate":
        return validate(args.paths)
    if args.action == "check":
        return check(args.paths, required_kinds(args.require_proof))
    if args.action == "add-source":
        return add(args.url, args.name, args.ref)
    if args.action == "remove-source":
        return remove(args.source)
    return update(args.source, args.check)


@dataclass(frozen=True)
class ListedRecipe:
    """One recipe `recipes list` found, and the one of the same name that hides it, if any."""

    name: str
    source: str
    kind: str
    path: str
    commit: str | None
    description: str
    shadowed_by: str | None


def list_recipes() -> Result[list[ListedRecipe]]:
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
    return Result("recipes list", rows, messages=tuple(path_mistakes()), view=list_view)


@dataclass(frozen=True)
class ShownRecipe:
    """A recipe after `extends`, compiled for a platform, with its consistency findings."""

    recipe: Recipe
    compiled: CompiledRecipe | None
    findings: tuple[ConsistencyFinding, ...]


def show_recipe(name: str, resolved: bool, platform: str | None = None) -> Result[ShownRecipe]:
    if platform is not None:
        known_platform(platform, "--platform")
    recipe = load_recipe(name)
    findings = tuple(check_recipe(recipe))
    return Result("recipes show", ShownRecipe(recipe, compile_recipe(recipe, platform) if resolved else None, findings), view=show_view)


@dataclass(frozen=True)
class Validation:
    """One recipe file's verdict from `recipes validate`."""

    path: str
    ok: bool
    problems: tuple[str, ...]
    warnings: tuple[str, ...]


def validate(paths: list[str]) -> Result[list[Validation]]:
    """Each recipe named (a file, or a name on the recipe path), and each recipe file in a folder
    named, as `recipes check` takes them."""
    out = []
    named = [str(f) for given in paths for f in (recipe_files_in([given], "validate") if Path(given).is_dir() else [given])]
    for path in named:
        try:
            recipe = load_recipe(path)
            findings = require_consistent(recipe)
            compile_recipe(recipe)
            out.append(Validation(path, True, (), tuple(f"{f.rule.id}: {f.message}" for f in findings)))
        except EnvkitError as exc:
            out.append(Validation(path, False, tuple(exc.lines()), ()))
    code = ExitCode.OK if all(v.ok for v in out) else ExitCode.USAGE
    return Result("recipes validate", out, int(code), errors=tuple(p for v in out for p in v.problems), view=validate_view)


def add(url: str, name: str | None, ref: str | None) -> Result[AddedSource]:
    if "://" not in url and not url.startswith(("/", "git@")) and Path(url).exists():
        url = Path(url).absolute().as_uri()
    folder = _local_folder(url)
    if folder is not None and folder.is_dir() and not _is_git_repo(folder):
        raise SourceError(
            f"{folder} is a folder, not a git repository: a recipe source is a repo that envkit clones and updates",
            hint=f"make it one (git init; git add .; git commit), or use its recipes where they are: ENVKIT_RECIPE_PATH={folder}",
        )
    return Result("recipes add-source", add_source(url, name, ref), view=added_view)


def _local_folder(url: str) -> Path | None:
    """The folder a source URL names on this machine (a path or a file:// URL); None for a remote."""
    if url.startswith("file://"):
        return Path(unquote(urlparse(url).path))
    if "://" in url or url.startswith("git@") or ":" in url.split("/", 1)[0]:  # host:path is ssh
        return None
    return Path(url)


def _is_git_repo(folder: Path) -> bool:
    """A working tree, or a bare repo (HEAD and objects/ at its top, as `git init --bare` makes)."""
    return (folder / ".git").exists() or ((folder / "HEAD").is_file() and (folder / "objects").is_dir())


def remove(name: str) -> Result[RemovedSource]:
    return Result("recipes remove-source", remove_source(name, envs_from=envs_from), view=removed_view)


def update(name: str | None, check_only: bool) -> Result[list[SourceUpdate]]:
    return Result("recipes update", update_sources(name, apply=not check_only, envs_from=envs_from), view=updates_view)


def envs_from(source: str, recipes: set[str] | None = None) -> tuple[str, ...]:
    """The envs conda knows that were made from `source` (from these of its recipes)."""
    out = []
    for prefix in all_envs():
        record = read_record(prefix)
        recipe = record.recipe if record else None
        if recipe is not None and recipe.source == source and (recipes is None or recipe.name in recipes):
            out.append(str(prefix))
    return tuple(out)


def list_view(c: Out, rows: list[ListedRecipe]) -> None:
    table = TextTable("recipe", "source", "commit", "description")
    for r in rows:
        name = escape(r.name) if not r.shadowed_by else f"[dim]{escape(r.name)} (shadowed by {escape(r.shadowed_by)})[/dim]"
        table.add_row(name, escape(f"{r.source} ({r.kind})"), escape((r.commit or "")[:10]), escape(r.description))
    c.print(table)


def _spec_line(spec: CompiledSpec) -> str:
    where = f"  [dim]# {escape(str(spec.origin))}[/dim]" if spec.origin else f"  [dim]# {escape(spec.reason)}[/dim]"
    return f"  {escape(spec.spec)}{where}"


# radon cc 24: one line per recipe section shown; the view has no logic to move out
def show_view(c: Out, shown: ShownRecipe) -> None:
    r = shown.recipe
    c.print(f"[bold]{r.name}[/bold]  {escape(r.description)}")
    c.print(f"source: {r.origin.source} {escape(r.origin.path)}" + (f" @ {r.origin.commit[:10]}" if r.origin.commit else ""))
    if r.extends:
        c.print("extends: " + escape(", ".join(r.extends)))
    c.print(
        "channels: "
        + escape(", ".join(r.channels))
        + f"   platforms: {escape(', '.join(r.platforms)) or 'this machine'}   python: {escape(r.python or '-')}"
    )
    tc = r.toolchain
    torch = tc.pytorch
    c.print(
        f"toolchain: blas={tc.blas or '-'} mkl={tc.mkl or '-'} openmp={tc.openmp or '-'} pytorch="
        + (f"{torch.source}/{torch.variant}{'/' + torch.cuda if torch.cuda else ''} {torch.version or ''}" if torch else "-")
        + (f" cuda_arch={torch.cuda_arch}" if torch and torch.cuda_arch else "")
    )
    if shown.compiled is not None:
        c.print("[bold]conda specs[/bold]")
        for spec in shown.compiled.conda_specs:
            c.print(_spec_line(spec))
        if shown.compiled.pip_specs:
            c.print("[bold]pip[/bold]")
            for p in shown.compiled.pip_specs:
                c.print(f"  {escape(p)}")
        c.print("[bold]activation settings[/bold]")
        for s in shown.compiled.activation.settings:
            value = "<physical cores, resolved when written>" if s.computed else s.op.value
            c.print(f"  {s.op.name} {s.op.action} {escape(str(value or ':'.join(s.op.entries)))}  [dim]# {escape(s.reason)}[/dim]")
    else:
        c.print("packages: " + (escape(", ".join(p.text for p in r.packages)) or "-"))
    for f in shown.findings:
        c.print(f"[{STATUS_STYLE[f.severity]}]{f.severity}[/] {f.rule.id} {escape(f.message)}" + (" (forced)" if f.forced else ""))


def validate_view(c: Out, rows: list[Validation]) -> None:
    for v in rows:
        if v.ok:
            c.print(f"[green]ok[/green] {escape(v.path)}")
            for w in v.warnings:
                c.print(f"  [yellow]warning[/yellow] {escape(w)}")
        else:
            for p in v.problems:
                c.print(f"[red]error[/red] {escape(p)}")


def added_view(c: Out, entry: AddedSource) -> None:
    c.print(f"added source [bold]{entry.name}[/bold] {escape(entry.url)} ({entry.ref} @ {entry.commit[:10]})")
    c.print(f"  {len(entry.recipes)} recipe{'s' if len(entry.recipes) != 1 else ''}: {escape(', '.join(entry.recipes))}")


def removed_view(c: Out, removed: RemovedSource) -> None:
    c.print(f"removed source [bold]{removed.name}[/bold] {escape(removed.url)} (was at {removed.commit[:10]})")
    for prefix in removed.orphaned:
        c.print(f"  {escape(prefix)} was made from its recipes: sync has no recipe for it now; remake it with envkit create --force")


def updates_view(c: Out, updates: list[SourceUpdate]) -> None:
    if not updates:
        c.print("no recipe sources to update; add one with 'envkit recipes add-source URL'")
    for u in updates:
        verb = "moved" if u.applied else ("would move" if u.old_commit != u.new_commit else "unchanged")
        c.print(f"[bold]{u.name}[/bold]: {verb} {u.old_commit[:10]} -> {u.new_commit[:10]}")
        for ch in u.changes:
            c.print(f"  {ch.change:8} {ch.name}")
        for prefix in u.orphaned:
            c.print(
                f"  {escape(prefix)} was made from a recipe this removes: sync has no recipe for it then; remake it with envkit create --force"
            )


RecipesResult = (
    Result[list[ListedRecipe]]
    | Result[ShownRecipe]
    | Result[list[Validation]]
    | Result[list[CheckedRecipe]]
    | Result[AddedSource]
    | Result[RemovedSource]
    | Result[list[SourceUpdate]]
)
