"""Where recipes come from, in precedence order, and how names map to files safely.

Precedence (first match wins): ENVKIT_RECIPE_PATH dirs, the user dir, git sources in the order
they were added, the built-in recipes. A parent named in `extends` is looked up in the child's own
source first, then in that same order.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from envkit.core import paths
from envkit.core.argv import is_commit, is_ref_name
from envkit.core.errors import SourceError
from envkit.core.names import NAME_RE


@dataclass(frozen=True)
class RecipeSource:
    """A place recipes are found: a path, the user's dir, a git checkout or envkit's own."""

    name: str
    kind: Literal["path", "user", "git", "builtin"]
    root: Path
    url: str | None = None
    ref: str | None = None
    commit: str | None = None


@dataclass(frozen=True)
class GitSourceEntry:
    """A git source as the sources file keeps it: URL, ref, and the commit it is pinned to."""

    name: str
    url: str
    ref: str
    commit: str


SOURCES_FILE_VERSION = 1


def is_git_source_name(name: str) -> bool:
    """Whether `name` can name a team repo: the other sources' names ('user', 'builtin', 'path0'...)
    and a recorded 'file' are never given to one."""
    return bool(NAME_RE.match(name)) and name not in ("user", "builtin", "file") and not name.startswith("path")


def sources_file() -> Path:
    return paths.config_dir() / "sources.json"


def git_checkout_dir(name: str) -> Path:
    return paths.cache_dir() / "sources" / name


def read_git_sources() -> list[GitSourceEntry]:
    path = sources_file()
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != SOURCES_FILE_VERSION:
            raise SourceError(f"{path}: unsupported sources file version {data.get('version')!r}", hint="upgrade envkit")
        entries = [GitSourceEntry(str(e["name"]), str(e["url"]), str(e["ref"]), str(e["commit"])) for e in data["sources"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise SourceError(f"{path}: corrupt sources file ({exc})", hint="fix or delete it, then add sources again") from None
    for entry in entries:  # each reaches git's argument list: a commit, a ref, a name
        if not (is_commit(entry.commit) and (is_ref_name(entry.ref) or is_commit(entry.ref)) and is_git_source_name(entry.name)):
            raise SourceError(
                f"{path}: source {entry.name!r} has a ref, commit or name git would not take ({entry.ref!r}, {entry.commit!r})",
                hint="fix or delete the file, then add sources again",
            )
    return entries


def all_sources() -> list[RecipeSource]:
    out: list[RecipeSource] = []
    for index, entry in enumerate(p for p in os.environ.get("ENVKIT_RECIPE_PATH", "").split(os.pathsep) if p):
        out.append(RecipeSource(f"path{index}", "path", Path(entry).expanduser()))
    out.append(RecipeSource("user", "user", paths.user_recipe_dir()))
    for git in read_git_sources():
        out.append(RecipeSource(git.name, "git", git_checkout_dir(git.name), git.url, git.ref, git.commit))
    out.append(RecipeSource("builtin", "builtin", paths.builtin_recipe_dir()))
    return out


def path_mistakes() -> list[str]:
    """ENVKIT_RECIPE_PATH entries that cannot hold recipes: a file (the recipe itself, likely) or a
    folder that does not exist. Lookups skip them, as PATH lookups do; these words say why."""
    out = []
    for source in all_sources():
        if source.kind == "path" and not source.root.is_dir():
            what = "is a file, not a folder of recipes" if source.root.exists() else "does not exist"
            out.append(f"ENVKIT_RECIPE_PATH entry {source.root} {what}")
    return out


def sources_holding(path: Path) -> list[RecipeSource]:
    """The sources whose folder holds `path` (links resolved), in lookup order."""
    real = path.resolve()
    return [source for source in all_sources() if source.root.resolve() in real.parents]


def recipe_file(source: RecipeSource, name: str) -> Path | None:
    """The file for `name` in `source`, never outside its root (names are checked, links resolved)."""
    if not NAME_RE.match(name):
        return None
    root = source.root.resolve()
    for suffix in (".yaml", ".yml"):
        candidate = source.root / f"{name}{suffix}"
        if candidate.is_file():
            real = candidate.resolve()
            if root not in real.parents:
                raise SourceError(
                    f"{candidate}: recipe file links outside its source directory {root}", hint="replace the link with a real file"
                )
            return candidate
    return None


def yaml_files(folder: Path) -> list[Path]:
    """The YAML files of a folder that are recipes or would-be recipes, sorted; a tool's dot-file
    (.pre-commit-config.yaml) is neither. Entries that are not regular files are included (a
    broken link): callers say why they are unusable."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if re.match(r"^[^.].*\.ya?ml$", p.name))


def list_names(source: RecipeSource) -> list[str]:
    return sorted({p.stem for p in yaml_files(source.root) if NAME_RE.match(p.stem) and p.is_file()})


def folders_with_recipe_files(root: Path) -> list[str]:
    """Sub-folders of `root` (two levels down, hidden ones skipped) that hold YAML files: where a
    repo that offers no recipe at its top level keeps them, named in the error that says so."""
    out = []
    for depth in ("*", "*/*"):
        for folder in sorted(root.glob(depth)):
            rel = folder.relative_to(root)
            if not any(part.startswith(".") for part in rel.parts) and any(p.is_file() for p in yaml_files(folder)):
                out.append(rel.as_posix())
    return out


def unusable_files(source: RecipeSource) -> list[tuple[Path, str]]:
    """YAML files in a source that no name can reach, with the reason: listed, not skipped silently."""
    out = []
    for path in yaml_files(source.root):
        if not NAME_RE.match(path.stem):
            out.append((path, f"'{path.stem}' is not a recipe name (lowercase letters, digits, '-' and '_'); rename the file"))
        elif not path.is_file():
            out.append((path, "not a regular file" + (" (a broken link)" if path.is_symlink() and not path.exists() else "")))
    return out


def source_qualified(given: str) -> str | None:
    """For 'team/train' or 'team:train', as if a source qualified its recipes' names (they go by
    their own): how that recipe is named; None when `given` is not that."""
    for sep in ("/", ":"):
        source_name, found, name = given.partition(sep)
        name = name.removesuffix(".yaml").removesuffix(".yml")
        if not found or not NAME_RE.match(name):
            continue
        source = next((s for s in all_sources() if s.name == source_name), None)
        if source is not None and recipe_file(source, name) is not None:
            return f"a recipe from source '{source_name}' goes by its own name: '{name}'"
    return None


def find_recipe(name: str, prefer: RecipeSource | None = None) -> tuple[RecipeSource, Path]:
    if not NAME_RE.match(name):
        hint = source_qualified(name) or "recipe names are lowercase identifiers such as 'yolov8'"
        raise SourceError(f"invalid recipe name {name!r}", hint=hint)
    sources = all_sources()
    if prefer is not None:
        sources = [prefer, *[s for s in sources if s != prefer]]
    for source in sources:
        found = recipe_file(source, name)
        if found is not None:
            return source, found
    known = sorted({n for s in all_sources() for n in list_names(s)})
    import difflib  # a suggestion: only for a name that is wrong

    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean '{close[0]}'?" if close else "run 'envkit recipes list' to see what is available"
    raise SourceError(f"no recipe named '{name}'", hint="; ".join([*path_mistakes(), hint]))
