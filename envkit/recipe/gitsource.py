"""Team recipe repos: clone into the user cache, pin a commit, and move the pin only on update
after showing what changed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from shlex import quote
from typing import Literal

from envkit.core.argv import git_revision, is_commit, is_ref_name
from envkit.core.errors import SourceError, UsageError
from envkit.core.fsutil import atomic_write_text, exclusive_lock
from envkit.recipe.sources import (
    SOURCES_FILE_VERSION,
    GitSourceEntry,
    RecipeSource,
    folders_with_recipe_files,
    git_checkout_dir,
    is_git_source_name,
    list_names,
    read_git_sources,
    sources_file,
)


@dataclass(frozen=True)
class RecipeChange:
    """A recipe that an update of a git source adds, removes or changes."""

    name: str
    change: Literal["added", "removed", "changed"]


@dataclass(frozen=True)
class SourceUpdate:
    """What `recipes update` moved a git source to, and what that changes."""

    name: str
    old_commit: str
    new_commit: str
    changes: tuple[RecipeChange, ...]
    applied: bool
    orphaned: tuple[str, ...] = ()  # envs made from a recipe the update removes: nothing to sync them to


@dataclass(frozen=True)
class AddedSource:
    """A git source `recipes add-source` cloned, at the commit it is pinned to."""

    name: str
    url: str
    ref: str
    commit: str
    recipes: tuple[str, ...]  # the names it offers at that commit


@dataclass(frozen=True)
class RemovedSource:
    """A git source taken away, and the envs whose recipes came from it."""

    name: str
    url: str
    commit: str
    orphaned: tuple[str, ...]  # envs made from its recipes: sync has nothing to sync them to now


# the envs conda knows that were made from a source (from these of its recipes): the commands
# layer, which reads envs, passes it in
EnvsFrom = Callable[[str, "set[str] | None"], tuple[str, ...]]

ALLOWED_PROTOCOLS = "file:git:http:https:ssh"


def _git(args: list[str], cwd: Path | None = None) -> str:
    command = next((a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] != "-c")), "")  # past -c K=V
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            # The user's environment (PATH, SSH agent, proxies, credentials helpers) plus: never
            # prompt for a password, English messages for the errors envkit quotes, and only the
            # transports that move data (never ext::, which runs a command a URL names).
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_ALLOW_PROTOCOL": ALLOWED_PROTOCOLS},
        )
    except FileNotFoundError:
        raise SourceError("git is not installed", hint="install git to use recipe repos") from None
    except subprocess.TimeoutExpired:
        raise SourceError(f"git {command} timed out") from None
    if proc.returncode != 0:
        raise SourceError(f"git {command} failed: {_git_reason(proc.stderr)}")
    return proc.stdout.strip()


def missing_commit(url: str, commit: str) -> str | None:
    """Why the repository at `url` does not serve `commit` (a pip wheel locked from git: a
    force-push or a deleted fork takes it away), or None where it does. One commit is fetched,
    shallow, into a scratch repository; servers speaking git's protocol v2 (git 2.26's default,
    GitHub's, GitLab's) serve any commit they hold. A repository that does not answer at all (no
    route, no credentials here) is said as such, not as a commit gone. A `commit` that is no
    commit or ref name (an option, say) is the answer itself: git is not run on it."""
    import tempfile

    try:
        git_revision(commit, "commit")
    except UsageError:
        return f"its revision {_shown(commit)} is not a git commit or ref name"
    with tempfile.TemporaryDirectory(prefix="envkit-git-") as scratch:
        _git(["init", "--quiet", "--bare", "--", scratch])  # no git here: its error, not "gone"
        try:
            _git(["fetch", "--quiet", "--depth=1", "--", url, commit], cwd=Path(scratch))
        except SourceError:
            try:
                _git(["ls-remote", "--", url, "HEAD"], cwd=Path(scratch))
            except SourceError as unreachable:
                return f"its repository {url} did not answer ({unreachable.message})"
            return f"its commit {commit[:12]} is no longer in {url}"
    return None


def _shown(value: str) -> str:
    """A value from a file, for a message: quoted, control characters escaped, cut at 60."""
    return repr(value if len(value) <= 60 else value[:57] + "...")


def _git_reason(stderr: str) -> str:
    """git's first `fatal:`/`error:` line says what went wrong; the lines after it are advice
    ("Please make sure you have the correct access rights\nand the repository exists.")."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        for prefix in ("fatal: ", "error: "):
            if line.startswith(prefix):
                return line.removeprefix(prefix)
    return lines[-1] if lines else "failed"


def _save(entries: list[GitSourceEntry]) -> None:
    data = {"version": SOURCES_FILE_VERSION, "sources": [e.__dict__ for e in entries]}
    atomic_write_text(sources_file(), json.dumps(data, indent=2) + "\n")


def _lock() -> AbstractContextManager[Path]:
    return exclusive_lock(sources_file().with_name(".sources.lock"), "the recipe source list")


def default_name(url: str) -> str:
    stem = url.rstrip("/").rsplit("/", 1)[-1]
    stem = stem[:-4] if stem.endswith(".git") else stem
    return re.sub(r"[^a-z0-9_-]", "-", stem.lower()).strip("-") or "recipes"


def _offers_recipes(checkout: Path, url: str, commit: str) -> tuple[str, ...]:
    """The recipe names a checkout offers; none is refused: recipes are read from a repo's top
    level only, and a source that offers nothing would look added and give every teammate nothing."""
    names = tuple(list_names(RecipeSource("new", "git", checkout)))
    if names:
        return names
    folders = folders_with_recipe_files(checkout)
    where = f"; it has YAML files in {', '.join(f + '/' for f in folders[:3])}" if folders else ""
    raise SourceError(
        f"{url} has no recipe (NAME.yaml) at its top level at {commit[:10]}{where}",
        hint="envkit reads a recipe repo's top level: move the recipes and their locks there, commit, then add it again",
    )


def add_source(url: str, name: str | None = None, ref: str | None = None) -> AddedSource:
    """Clone `url` (pip's `git+` form taken as the URL it names) and pin `ref`'s commit."""
    url = url.removeprefix("git+")
    if ref is not None and not (is_commit(ref) or is_ref_name(ref)):
        raise SourceError(f"--ref {_shown(ref)} is not a branch, tag or commit name", hint="give a branch, a tag or a 40-digit commit")
    name = name or default_name(url)
    if not is_git_source_name(name):
        raise SourceError(
            f"invalid source name {name!r}", hint="use lowercase letters, digits, '-' and '_' (not 'user', 'builtin', 'file', 'path*')"
        )
    with _lock():
        entries = read_git_sources()
        if any(e.name == name for e in entries):
            raise SourceError(f"a recipe source named '{name}' already exists", hint="pick another --name or run 'envkit recipes update'")
        dest = git_checkout_dir(name)
        tmp = dest.with_name(dest.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        try:
            _git(["clone", "--quiet", "--no-checkout", "--", url, str(tmp)])
            target = ref or _git(["symbolic-ref", "--short", "HEAD"], tmp)
            commit = _resolve(tmp, target, default=ref is None)
            _git(["-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", commit], tmp)
            recipes = _offers_recipes(tmp, url, commit)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
        _save([*entries, GitSourceEntry(name, url, target, commit)])
        return AddedSource(name, url, target, commit, recipes)


def remove_source(name: str, *, envs_from: EnvsFrom) -> RemovedSource:
    """Forget a source and delete envkit's checkout of it. The list is saved first: a run killed
    between the two leaves a checkout nothing names, which adding the source again replaces."""
    with _lock():
        entries = read_git_sources()
        entry = next((e for e in entries if e.name == name), None)
        if entry is None:
            known = ", ".join(e.name for e in entries) or "none"
            raise SourceError(f"no recipe source named '{name}' (sources: {known})", hint="see 'envkit recipes list' for sources")
        _save([e for e in entries if e.name != name])
        shutil.rmtree(git_checkout_dir(name), ignore_errors=True)
    return RemovedSource(entry.name, entry.url, entry.commit, envs_from(name, None))


class RefMissing(SourceError):
    """The pinned ref is not in the repository (any more): a branch deleted or renamed."""

    def __init__(self, message: str, *, hint: str, branches: list[str]) -> None:
        super().__init__(message, hint=hint)
        self.branches = branches


def _resolve(repo: Path, ref: str, *, default: bool = False) -> str:
    """`default`: `ref` is what the remote's HEAD names (no --ref given), which can be a branch that
    was never pushed (a bare repo made with `git init` names master; the team pushed main).
    The checkout's own branch (the one `git clone` made) is never taken for the remote's: it stays
    where the clone left it after the remote deletes that branch."""
    for candidate in (f"refs/remotes/origin/{ref}", f"refs/tags/{ref}", ref):
        if candidate == ref and _is_local_branch(repo, ref):
            continue
        try:
            return _git(["rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}"], repo)
        except SourceError:
            continue
    try:
        refs = _git(["for-each-ref", "--format=%(refname:short)", "refs/remotes/origin"], repo).splitlines()
    except SourceError:
        refs = []
    branches = sorted(r.removeprefix("origin/") for r in refs if r.startswith("origin/") and r != "origin/HEAD")
    has = f"its branches: {', '.join(branches)}" if branches else "it has no branches"
    missing = (
        f"the repository's HEAD names branch '{ref}', which it does not have" if default else f"ref '{ref}' not found in the repository"
    )
    if not branches:  # an empty repo (a fresh `git init --bare`): nothing to pin yet
        raise SourceError(f"{missing}; {has}: nothing was pushed to it yet", hint="push the recipes to it first, then add it")
    raise RefMissing(
        f"{missing}; {has}", hint=f"pass an existing branch, tag or commit with --ref, e.g. --ref {branches[0]}", branches=branches
    )


def _must_be_clean(name: str, repo: Path) -> None:
    """Recipes (and their locks) are read from the checkout's files: an edit there, or a file the
    team's repo does not have (a lock an older envkit wrote there), is read as if pinned, and git
    refuses a checkout over it halfway through an update. Said before any source moves."""
    status = _git(["status", "--porcelain", "--untracked-files=all"], repo)  # "XY PATH" lines; "??" untracked
    changed = [line.split(maxsplit=1)[1] for line in status.splitlines() if line.strip()]
    if changed:
        raise SourceError(
            f"envkit's checkout of source '{name}' ({repo}) has files that differ from its pinned commit ({', '.join(changed[:3])}"
            f"{', ...' if len(changed) > 3 else ''}); no source was updated",
            hint=f"recipes and locks are edited in a clone of the repo and committed, not there: copy out what you keep, "
            f"drop the rest with 'git -C {quote(str(repo))} checkout -- . && git -C {quote(str(repo))} clean -fd', then update again",
        )


def _is_local_branch(repo: Path, name: str) -> bool:
    try:
        _git(["show-ref", "--verify", "--quiet", f"refs/heads/{name}"], repo)
    except SourceError:
        return False
    return True


def _recipe_changes(repo: Path, old: str, new: str) -> tuple[RecipeChange, ...]:
    if old == new:
        return ()
    out = _git(["diff", "--name-status", "--no-renames", old, new, "--", "*.yaml", "*.yml"], repo)
    changes = []
    for line in out.splitlines():
        status, _, path = line.partition("\t")
        if "/" in path:
            continue
        name = path.rsplit(".", 1)[0]
        kind: Literal["added", "removed", "changed"] = "added" if status[:1] == "A" else "removed" if status[:1] == "D" else "changed"
        changes.append(RecipeChange(name, kind))
    return tuple(sorted(changes, key=lambda c: c.name))


def update_sources(name: str | None = None, *, envs_from: EnvsFrom, apply: bool = True) -> list[SourceUpdate]:
    """Fetch every source (or `name`) first, and move nothing unless all were fetched: a source
    that cannot be reached is named, and no checkout or pin changes. Then each checkout moves and
    its pin is saved with it, so that the pin always names the commit whose recipes are read."""
    with _lock():
        entries = read_git_sources()
        if name is not None and not any(e.name == name for e in entries):
            raise SourceError(f"no recipe source named '{name}'", hint="see 'envkit recipes list' for sources")
        fetched = []
        for entry in entries:
            if name is not None and entry.name != name:
                continue
            repo = git_checkout_dir(entry.name)
            if not (repo / ".git").exists():
                raise SourceError(
                    f"the checkout of source '{entry.name}' is missing ({repo})",
                    hint=f"run 'envkit recipes remove-source {entry.name}', then add it again",
                )
            _must_be_clean(entry.name, repo)
            try:
                # a tag the team moved or deleted is moved or deleted here too (git keeps the old one by default)
                _git(["fetch", "--quiet", "--prune", "--prune-tags", "--tags", "--force", "origin"], repo)
                new = _resolve(repo, entry.ref)
            except RefMissing as exc:  # deleted or renamed on the remote: the pin cannot follow it
                again = f"envkit recipes add-source {entry.url} --name {entry.name} --ref {exc.branches[0]}"
                raise SourceError(
                    f"recipe source '{entry.name}' ({entry.url}): it no longer has ref '{entry.ref}' (its branches: "
                    f"{', '.join(exc.branches)}); no source was updated, '{entry.name}' stays at {entry.commit[:10]}",
                    hint=f"follow another branch: envkit recipes remove-source {entry.name}, then {again}",
                ) from None
            except SourceError as exc:
                raise SourceError(
                    f"recipe source '{entry.name}' ({entry.url}): {exc.message}; no source was updated",
                    hint=exc.hint or f"check that {entry.url} is reachable, or update the others: envkit recipes update NAME",
                ) from None
            fetched.append((entry, repo, new, _recipe_changes(repo, entry.commit, new)))
        results = []
        pins = {e.name: e for e in entries}
        for entry, repo, new, changes in fetched:
            moved = apply and new != entry.commit
            if moved:
                _git(["-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", new], repo)
                pins[entry.name] = GitSourceEntry(entry.name, entry.url, entry.ref, new)
                _save(list(pins.values()))
            removed = {c.name for c in changes if c.change == "removed"}
            orphaned = envs_from(entry.name, removed) if removed else ()
            results.append(SourceUpdate(entry.name, entry.commit, new, changes, moved, orphaned))
        return results
