"""`envkit recipes check`: for a recipe repo's CI, every recipe valid, its lock present and fresh, each platform solvable."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from envkit.audit.recipe_rules import require_consistent
from envkit.commands import Result
from envkit.commands.lock import lock_platforms, solve_for_lock
from envkit.core.errors import EnvkitError, ExitCode, UsageError
from envkit.prefix.pipurls import vcs_parts
from envkit.recipe.digest import resolved_digest
from envkit.recipe.gitsource import missing_commit
from envkit.recipe.loader import load_recipe
from envkit.recipe.model import Recipe
from envkit.recipe.sources import (
    folders_with_recipe_files,
    yaml_files,
)
from envkit.solve.backend import still_offered
from envkit.solve.channels import ResolvedChannel, from_canonical, resolve_channels
from envkit.team.lock import Lock, pins, read_lock
from envkit.team.proofs import RequiredKind, missing_kinds
from envkit.ui.console import Out, escape


@dataclass(frozen=True)
class CheckedRecipe:
    """One recipe file's verdict from `recipes check`: valid, locked, fresh, solvable."""

    path: str
    name: str | None
    lock: str | None
    platforms: tuple[str, ...]
    problems: tuple[str, ...]
    # the checked recipes that extend this one: a parent needs no lock of its own (theirs hold it)
    extended_by: tuple[str, ...] = ()


def recipe_files_in(paths: list[str], command: str = "check") -> list[Path]:
    """The files named, and in each folder named the YAML files a recipe source there would offer
    or list as unusable (sources.yaml_files)."""
    out: list[Path] = []
    for given in paths or ["."]:
        path = Path(given)
        if path.is_dir():
            out += [p for p in yaml_files(path) if p.is_file()]
        else:
            out.append(path)
    if not out:
        folders = [f"{Path(given) / f}" for given in paths or ["."] if Path(given).is_dir() for f in folders_with_recipe_files(Path(given))]
        where = " or ".join(paths or ["the current folder"])
        raise UsageError(
            f"no recipe file (*.yaml, *.yml) in {where}: nothing was checked",
            hint=f"name the folder that holds them: envkit recipes {command} {' '.join(folders[:3])}; but note that "
            "'envkit recipes add-source' reads recipes at a repo's top level only"
            if folders
            else "run it in a recipe repo's checkout, or name the recipe files",
        )
    return out


def _load_checked(path: Path) -> Recipe | EnvkitError:
    try:
        recipe = load_recipe(str(path))
        require_consistent(recipe)
    except EnvkitError as exc:
        return exc
    return recipe


def _solver_reason(message: str, where: str) -> str:
    """One line of a solver's message: its lead ("... cannot be solved for P:") with the reason
    that follows it; a conflict's tree beyond that is for `envkit lock` to show whole."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    reason, rest = lines[0], lines[1:]
    if reason.endswith(":") and rest:
        reason, rest = f"{reason} {rest[0]}", rest[1:]
    return reason + (f" ... ('envkit lock {where}' shows all {len(rest)} more lines)" if rest else "")


def required_kinds(text: str) -> tuple[RequiredKind, ...]:
    """--require-proof's comma-separated kinds (envkit.team.proofs.RequiredKind)."""
    return tuple(RequiredKind.parse(part) for part in text.split(",") if part.strip())


def _with_recipes_kinds(required: tuple[RequiredKind, ...], recipe: Recipe) -> tuple[RequiredKind, ...]:
    """--require-proof's kinds, then those the recipe's require_proof adds (the schema checked them)."""
    return tuple(dict.fromkeys(required + tuple(RequiredKind.parse(k) for k in recipe.require_proof)))


# radon cc 21: a recipe's checks, in the order CI reads them (valid, locked, fresh, complete, offered, proven, solvable)
def check_one(
    path: Path, recipe: Recipe | EnvkitError, extended_by: tuple[str, ...], required: tuple[RequiredKind, ...] = ()
) -> CheckedRecipe:
    """`extended_by`: the checked recipes that extend this one. A parent that is there only to be
    extended needs no lock of its own; one that has a lock must keep it fresh all the same."""
    where = str(path)
    if isinstance(recipe, EnvkitError):
        return CheckedRecipe(where, None, None, (), tuple(recipe.lines()))
    platforms = lock_platforms(recipe, ())
    channels = resolve_channels(list(recipe.channels), {})
    lock_path = path.parent / f"{recipe.name}.lock"
    problems: list[str] = []
    if not lock_path.is_file():
        if not extended_by:
            problems.append(f"{where}: no lock ({lock_path.name}); make it with 'envkit lock {where}' and commit it")
    else:
        try:
            lock = read_lock(lock_path)
        except EnvkitError as exc:
            problems.append(exc.message if exc.message.startswith(str(lock_path)) else f"{lock_path}: {exc.message}")
        else:
            if lock.recipe != recipe.name:
                problems.append(f"{lock_path}: locks recipe '{lock.recipe}', not '{recipe.name}'; re-lock with 'envkit lock {where}'")
            elif lock.recipe_digest != resolved_digest(recipe):
                problems.append(f"{lock_path}: stale, the recipe (or one it extends) changed since; re-lock with 'envkit lock {where}'")
            missing = sorted(set(platforms) - {p.platform for p in lock.platforms})
            if missing:
                problems.append(f"{lock_path}: lacks {', '.join(missing)}, which the recipe declares; re-lock with 'envkit lock {where}'")
            problems += _withdrawn(lock, lock_path, channels, where)
            problems += _wheels_gone(lock, lock_path, where)
            problems += [
                f"{lock_path}: {gap}; prove it: envkit create {where} --locked, then 'envkit probe --attest' on such a machine, and commit the lock"
                for gap in missing_kinds(lock, _with_recipes_kinds(required, recipe))
            ]
    try:
        solve_for_lock(recipe, platforms, channels)
    except EnvkitError as exc:
        hint = f" ({exc.hint})" if exc.hint else ""
        problems.append(f"{where}: does not solve today ({', '.join(platforms)}): {_solver_reason(exc.message, where)}{hint}")
    locked = str(lock_path) if lock_path.is_file() or not extended_by else None
    return CheckedRecipe(where, recipe.name, locked, platforms, tuple(problems), extended_by)


def _withdrawn(lock: Lock, lock_path: Path, channels: list[ResolvedChannel], where: str) -> list[str]:
    """The locked packages the channels no longer offer: a locked create on a machine whose cache
    lacks them fails to download them (conda-forge moves a broken build off its main label)."""
    urls = [c.url for c in channels] + [url for url in lock.channels if url not in {c.canonical for c in channels}]
    moves = from_canonical(channels)
    wanted = [(p.platform, pins(p, moves)) for p in lock.platforms]
    try:
        offered = still_offered(urls, wanted)
    except EnvkitError:
        return []  # an unreachable channel: the solve below says so
    gone = [
        (platform, name, f"{version} {build}")
        for (platform, packages), found in zip(wanted, offered, strict=True)
        for name, version, build, url in packages
        if url not in found
    ]
    return [
        f"{lock_path}: {platform}: {name} {version} is no longer offered by its channel (removed, or marked broken);"
        f" move it with 'envkit lock {where} --update {name}' and commit the lock"
        for platform, name, version in gone
    ]


def _wheels_gone(lock: Lock, lock_path: Path, where: str) -> list[str]:
    """The locked wheels whose file no longer answers at the URL the lock keeps (a wheelhouse
    cleaned, a mirror that dropped it), or whose commit its repository no longer has (a
    force-push). A locked create elsewhere falls back to the same file by hash through that
    machine's pip index, which has it only if that index still does."""
    gone = _ask_each(sorted({wheel.url.partition("#")[0] for platform in lock.platforms for wheel in platform.pip}))
    problems = []
    for platform in lock.platforms:
        for wheel in platform.pip:
            why = gone[wheel.url.partition("#")[0]]
            if why:
                problems.append(
                    f"{lock_path}: {platform.platform}: pip {wheel.name} {wheel.version}: {why};"
                    f" move it with 'envkit lock {where} --update {wheel.name}' and commit the lock"
                )
    return problems


def _ask_each(locations: list[str]) -> dict[str, str | None]:
    """_gone of every location, asked at once: each is a round trip (an HTTP HEAD, a shallow git
    fetch), up to 30 s where a server does not answer, and a team's lock names dozens."""
    if len(locations) < 2:
        return {location: _gone(location) for location in locations}
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=min(16, len(locations)))
    try:
        return dict(zip(locations, pool.map(_gone, locations), strict=True))
    finally:  # on Ctrl-C too, without waiting out the servers that have not answered yet
        pool.shutdown(wait=False, cancel_futures=True)


def _gone(url: str) -> str | None:
    """Why the file at `url` is not there, or None where it is: a local path that exists (a wheel,
    or a project's folder), a git repository that still has the commit locked (`git+URL@COMMIT`),
    an HTTP(S) server that says 200 to HEAD (or to a one-byte GET, for a server that refuses HEAD)."""
    parsed = urlparse(url)
    vcs = vcs_parts(url) if parsed.scheme.startswith("git+") else None
    if vcs is not None:
        repository, commit, _ = vcs
        return missing_commit(repository.removeprefix("git+"), commit) if commit else None  # no commit: nothing pinned to ask for
    if parsed.scheme == "file":
        return None if Path(unquote(parsed.path)).exists() else f"its file no longer answers at {url}"
    if parsed.scheme not in ("http", "https"):
        return None  # nothing here can ask it; pip says so at install time
    status = _status(url)
    if status == 401:  # a private index: with the credentials pip would send there
        from envkit.pip.auth import credentials

        given = credentials(url)
        if given is None:
            return (
                f"its file at {url} asks for credentials, and none were found for its host where pip takes them "
                "(an index URL with user:token@ in PIP_INDEX_URL, PIP_EXTRA_INDEX_URL or pip.conf; ~/.netrc)"
            )
        status = _status(url, given)
        if status == 401:
            return f"its file at {url} refuses the credentials pip would send there (user '{given[0]}')"
    return None if status == 200 else f"its file no longer answers at {url}"


def _status(url: str, auth: tuple[str, str] | None = None) -> int:
    """200 where the server has the file; else its HTTP status (0: no answer at all)."""
    import base64
    import urllib.error
    import urllib.request

    basic = {"Authorization": "Basic " + base64.b64encode(":".join(auth).encode()).decode()} if auth else {}
    status = 0
    for method, headers in (("HEAD", {}), ("GET", {"Range": "bytes=0-0"})):
        try:
            request = urllib.request.Request(url, method=method, headers={**headers, **basic})  # noqa: S310 - http(s) only (the caller)
            with urllib.request.urlopen(request, timeout=30):  # noqa: S310
                return 200
        except urllib.error.HTTPError as exc:
            status = exc.code
            if exc.code not in (403, 405, 501):  # refused the method, not the file: try the other
                return status
        except (urllib.error.URLError, OSError):
            return 0
    return status


def check(paths: list[str], required: tuple[RequiredKind, ...] = ()) -> Result[list[CheckedRecipe]]:
    """For a recipe repo's CI: every recipe valid, each lock present (a parent the others extend
    needs none), fresh and covering the declared platforms, proven on each `required` kind of
    machine, each platform still solvable. Nothing is created."""
    files = recipe_files_in(paths)
    loaded = {path: _load_checked(path) for path in files}
    extenders: dict[Path, set[str]] = {}
    for recipe in loaded.values():
        if not isinstance(recipe, EnvkitError):
            for parent in recipe.chain[1:]:  # the files it was made from, itself first
                extenders.setdefault(Path(parent).resolve(), set()).add(recipe.name)
    checked = [check_one(path, loaded[path], tuple(sorted(extenders.get(path.resolve(), ()))), required) for path in files]
    problems = tuple(p for c in checked for p in c.problems)
    code = ExitCode.FINDINGS if problems else ExitCode.OK
    return Result("recipes check", checked, int(code), errors=problems, view=check_view)


def check_view(c: Out, rows: list[CheckedRecipe]) -> None:
    for r in rows:
        if r.problems:
            for p in r.problems:
                c.print(f"[red]problem[/red] {escape(p)}")
        elif r.lock is None:
            c.print(
                f"[green]ok[/green] {escape(r.path)} (no lock of its own: extended by {escape(', '.join(r.extended_by))}, whose locks hold it)"
            )
        else:
            c.print(f"[green]ok[/green] {escape(r.path)} (lock {escape(str(r.lock))}, {', '.join(r.platforms)})")
