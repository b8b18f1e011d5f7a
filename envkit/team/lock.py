"""Lock files: rattler's lock format (the one pixi.lock uses, version 7), so pixi, rattler and conda's
lockfile support read them, plus an `envkit:` section that rattler readers ignore, for what is not a
package: the recipe's name, the digest of the resolved recipe (a lock is stale once it differs),
and the activation settings. pip packages are locked as URLs with a `#sha256=` fragment, the form
pip checks the download against; rattler keeps that fragment for https URLs but turns file:// ones
into bare paths, so the envkit section holds each platform's pip URLs too.

This module reads and writes; it never solves (envkit.commands.lock does).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import rattler
from rattler.lock import LockChannel, LockPlatform

from envkit.activation.validate import op_problem
from envkit.core import paths
from envkit.core.errors import UsageError, os_errno
from envkit.core.fsutil import scratch_file, write_output
from envkit.pip.pinned import LockedPip
from envkit.solve.channels import rebase
from envkit.team.proofs import Proof, lock_content_digest, proofs_from_section

if TYPE_CHECKING:
    from envkit.recipe.model import Recipe

ENVKIT_LOCK_VERSION = 2  # 2: activation per platform (MKL's GNU layer is Linux-only)
ENVIRONMENT = "default"


class NewerLock(UsageError):
    """A lock in a format newer than this envkit's rattler reads: a teammate's newer envkit (or
    pixi) wrote it, and writing over it would take the team back a format."""


@dataclass(frozen=True)
class LockedPlatform:
    """Everything one platform installs: its conda records, its wheels and its activation settings."""

    platform: str
    virtual_packages: tuple[str, ...]
    records: tuple[Any, ...]  # rattler RepoDataRecords, in name order
    pip: tuple[LockedPip, ...]
    activation: tuple[dict[str, Any], ...] = ()  # the record's ops format, "computed" included


@dataclass(frozen=True)
class Lock:
    """envkit's reading of a lock file: what rattler's format holds plus what it has no place for."""

    recipe: str
    recipe_digest: str
    channels: tuple[str, ...]
    platforms: tuple[LockedPlatform, ...]
    proofs: tuple[Proof, ...] = ()  # envkit.team.proofs: where its envs were probed

    def for_platform(self, platform: str) -> LockedPlatform | None:
        return next((p for p in self.platforms if p.platform == platform), None)


def default_lock_path(recipe: Recipe) -> Path:
    """Where `envkit lock` writes a recipe's lock, and `create --locked` and `sync` look for it."""
    return paths.lock_beside(recipe.name, recipe.origin.source, recipe.origin.path)


def moved(records: list[Any], moves: dict[str, str]) -> tuple[Any, ...]:
    """`records` (changed in place) with their URLs and channel moved from one channel URL to
    another (envkit.solve.channels.rebase): a lock keeps the URLs a channel's name has everywhere, and
    each machine reaches them through its own mirror."""
    if moves:
        for record in records:
            record.url = rebase(record.url, moves)
            record.channel = rebase(record.channel, moves)
    return tuple(records)


def pins(locked: LockedPlatform, moves: dict[str, str], leave: frozenset[str] = frozenset()) -> list[tuple[str, str, str, str]]:
    """What `locked` pins, as a solve prefers it (envkit.solve.backend.Preferred): name, version, build
    and the URL this machine reaches it at (`moves`: envkit.solve.channels.from_canonical); but for the
    `leave` names."""
    return [
        (r.name.normalized, str(r.version), r.build, rebase(str(r.url), moves)) for r in locked.records if r.name.normalized not in leave
    ]


def write_lock(path: Path, lock: Lock) -> None:
    """Deterministic: the same lock gives the same bytes (records sorted by name, stable keys)."""
    platforms = {p.platform: LockPlatform(p.platform, virtual_packages=sorted(p.virtual_packages)) for p in lock.platforms}
    lockfile = rattler.LockFile(list(platforms.values()))
    lockfile.set_channels(ENVIRONMENT, [LockChannel(c) for c in lock.channels])
    for locked in lock.platforms:
        for record in sorted(locked.records, key=lambda r: r.name.normalized):
            lockfile.add_conda_package(ENVIRONMENT, platforms[locked.platform], record)
        for pip in sorted(locked.pip, key=lambda p: p.name):
            lockfile.add_pypi_package(ENVIRONMENT, platforms[locked.platform], pip.name, pip.version, pip.url)
    with scratch_file(path) as draft:  # rattler writes a lock only to a path
        try:
            lockfile.to_path(draft)
        except Exception as exc:  # rattler's I/O errors are no OSError: a full disk where the lock goes is said as one
            code = os_errno(str(exc))
            if code is None:
                raise
            raise OSError(code, os.strerror(code), str(path)) from None
        text = draft.read_text(encoding="utf-8")
    first, _, rest = text.partition("\n")
    rest = _with_wheel_hashes(rest)
    if not first.startswith("version:"):
        raise UsageError(f"rattler wrote a lock file envkit does not recognise (first line {first!r})", hint="upgrade envkit")
    meta = {
        "envkit": {
            "lock_version": ENVKIT_LOCK_VERSION,
            "recipe": lock.recipe,
            "recipe_digest": lock.recipe_digest,
            "activation": {p.platform: list(p.activation) for p in lock.platforms},
            "pip": {
                p.platform: [{"name": q.name, "version": q.version, "url": q.url} for q in sorted(p.pip, key=lambda q: q.name)]
                for p in lock.platforms
                if p.pip
            },
        }
    }
    if lock.proofs:
        meta["envkit"]["proofs"] = [p.to_json() for p in lock.proofs]
    # JSON is YAML: one line, stable, no dependency on a YAML emitter's choices
    write_output(path, f"{first}\nenvkit: {json.dumps(meta['envkit'], sort_keys=True)}\n{rest}", f"{lock.recipe}.lock")


WHEEL_ENTRY = re.compile(r"- pypi: \S*#sha256=([0-9a-f]{64})")


def _with_wheel_hashes(text: str) -> str:
    """Each wheel's sha256 in the format's own field as well as in its URL's fragment: py-rattler
    takes only a location, and the format's other readers (pixi, pixi-sbom: rattler_lock) read a
    wheel's hash from the field alone, so a wheel locked by its fragment went unverified there.
    Entries of the top-level package list only (`- pypi:` at the start of a line); an entry's
    fields are the lines indented under it."""
    lines = text.split("\n")
    out: list[str] = []
    pending: str | None = None  # the hash of the wheel entry being copied
    for line in lines:
        if pending is not None and not line.startswith("  "):
            out.append(f"  sha256: {pending}")
            pending = None
        if pending is not None and line.startswith("  sha256:"):
            pending = None  # rattler wrote one itself
        found = WHEEL_ENTRY.fullmatch(line)
        if found:
            pending = found.group(1)
        out.append(line)
    if pending is not None:
        out.append(f"  sha256: {pending}")
    return "\n".join(out)


def _envkit_section(text: str, path: Path) -> dict[str, Any]:
    for line in text.splitlines():
        if line.startswith("envkit: "):
            try:
                data = json.loads(line[len("envkit: ") :])
            except ValueError:
                break
            if not isinstance(data, dict) or data.get("lock_version") != ENVKIT_LOCK_VERSION:
                raise UsageError(
                    f"{path}: envkit lock section version {data.get('lock_version') if isinstance(data, dict) else None!r} is not {ENVKIT_LOCK_VERSION}",
                    hint="re-lock with 'envkit lock'",
                )
            return data
    raise UsageError(f"{path} has no envkit section: it was not written by 'envkit lock'", hint="re-lock with 'envkit lock RECIPE'")


CONFLICT_MARKERS = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")  # git's, at its default size: no YAML line starts so


def _refuse_conflict(text: str, path: Path) -> None:
    """Two people locked at once and git merged the lock line by line. Its YAML may even parse, but
    a lock is made, not merged: no half of it is what a solve gave."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(CONFLICT_MARKERS):
            raise UsageError(
                f"{path}:{number}: an unresolved merge conflict ('{line[:7]}'): a lock cannot be merged by hand",
                hint=f"keep either side (git checkout --theirs {path}), then re-lock with 'envkit lock RECIPE' and commit it",
            )


def read_lock(path: Path) -> Lock:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read lock file {path}: {exc.strerror}", hint="make one with 'envkit lock RECIPE'") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not a lock file: it is not UTF-8 text", hint="re-lock with 'envkit lock RECIPE'") from None
    _refuse_conflict(text, path)
    meta = _envkit_section(text, path)
    try:
        lockfile = rattler.LockFile.from_path(path)
        env = lockfile.environment(ENVIRONMENT)
    except BaseException as exc:  # pyo3 panics derive from BaseException
        if isinstance(exc, KeyboardInterrupt):
            raise
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "newer lockfile format" in why:  # rattler: "found newer lockfile format version 8, but only up to ..."
            raise NewerLock(
                f"{path}: not a readable lock file ({why})",
                hint=f"it was written by a newer tool than this envkit's py-rattler {rattler.__version__}: upgrade envkit (and py-rattler);"
                " a lock made here would write the older format over the team's",
            ) from None
        raise UsageError(f"{path}: not a readable lock file ({why})", hint="re-lock it") from None
    if env is None:
        raise UsageError(f"{path} has no '{ENVIRONMENT}' environment", hint="re-lock with 'envkit lock RECIPE'")
    conda = env.conda_repodata_records()
    pypi = env.pypi_packages()
    ours = meta.get("pip") or {}
    platforms = []
    for platform in lockfile.platforms():
        name = platform.name
        if name in ours:
            pip = tuple(_locked_pip(path, name, q) for q in ours[name])
        else:
            pip = tuple(LockedPip(p.name, p.version, str(p.location)) for p in pypi.get(name, []))
        records = tuple(sorted(conda.get(name, []), key=lambda r: r.name.normalized))
        activation = tuple((meta.get("activation") or {}).get(name) or ())
        for item in activation:  # they become the env's activation scripts
            if (problem := op_problem(item)) is not None:
                raise UsageError(f"{path}: {name}: activation: {problem}", hint="re-lock it from its recipe")
        platforms.append(LockedPlatform(name, tuple(platform.virtual_packages), records, pip, activation))
    channels = tuple(str(getattr(c, "url", c)) for c in env.channels())
    return Lock(str(meta["recipe"]), str(meta["recipe_digest"]), channels, tuple(platforms), proofs_from_section(meta))


def _locked_pip(path: Path, platform: str, entry: Any) -> LockedPip:
    """One pip entry of the envkit section, refused where a value is not what envkit writes: these
    reach pip's and git's argument lists (a name, an https/file URL, a git URL at a full commit)."""
    from envkit.core.argv import is_commit, is_dist_name

    try:
        pip = LockedPip(str(entry["name"]), str(entry["version"]), str(entry["url"]))
    except (KeyError, TypeError):
        raise UsageError(f"{path}: {platform}: a pip entry without name, version and url", hint="re-lock it") from None
    bad = None
    if not is_dist_name(pip.name):
        bad = f"name {pip.name!r}"
    elif pip.url.startswith("-") or any(ch.isspace() or ord(ch) < 0x20 for ch in pip.url):
        bad = f"URL {pip.url[:80]!r}"
    elif pip.url.partition(":")[0].startswith("git+") and not is_commit(pip.commit or ""):
        bad = f"git revision {(pip.commit or '')[:60]!r} (a lock pins a full commit)"
    if bad is not None:
        raise UsageError(f"{path}: {platform}: pip {pip.name[:40]!r}: not a value envkit locks: {bad}", hint="re-lock it from its recipe")
    return pip


def lock_digest(path: Path) -> str:
    """What env records keep of the lock they were installed from (its proofs left out)."""
    return lock_content_digest(path)
