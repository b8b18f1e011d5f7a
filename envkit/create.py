"""Materialise a solved plan as a conda env, all or nothing.

py-rattler installs in place and never rolls back (a failed package leaves the ones before it
linked), does not check sha256 for file:// channels, and can panic. So envkit owns the
transaction: lock the target, verify every archive, move an old env aside, install, write the
activation scripts and the record, and on any failure (Ctrl-C included) delete what it made and
put the old env back.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from envkit import __version__, backend, envs, paths
from envkit.activation.writer import ActivationFile, RecordedActivation, activation_json, prefix_tag, remove_stale, write_files
from envkit.errors import EnvkitError, InstallError, Interrupted, UsageError
from envkit.fsutil import exclusive_lock
from envkit.history import Linked, append_block, block
from envkit.recipe.model import RecipeOrigin
from envkit.record import read_record, write_record
from envkit.solve import Plan


@dataclass(frozen=True)
class CreatedEnv:
    prefix: Path
    activation_files: tuple[Path, ...]
    replaced_existing: bool


def lock_for(prefix: Path) -> Path:
    digest = hashlib.sha256(str(prefix).encode()).hexdigest()[:16]
    return paths.cache_dir() / "locks" / f"{digest}.lock"


def cached_sha256(cache: Path, rec: Any) -> bytes | None:
    """The sha256 of the archive rattler extracted into its cache for this record, if any.

    rattler writes `<cache>/<name>-<version>-<build>.lock` as an 8-byte revision followed by the
    archive's 32-byte sha256; an entry whose hash matches is reused without reading the archive.
    Anything unexpected means "unknown", and the archive is hashed.
    """
    lock = cache / f"{rec.name.normalized}-{rec.version}-{rec.build}.lock"
    try:
        data = lock.read_bytes()
    except OSError:
        return None
    return data[8:40] if len(data) == 40 and (cache / lock.stem / "info" / "index.json").is_file() else None


def verify_archives(records: list[Any], cache: Path | None = None) -> None:
    """Check sha256 of local archives against repodata (rattler skips this for file://)."""
    for rec in records:
        url = str(rec.url)
        parsed = urlparse(url)
        if parsed.scheme != "file" or rec.sha256 is None:
            continue
        if cache is not None and cached_sha256(cache, rec) == bytes(rec.sha256):
            continue
        path = Path(unquote(parsed.path))
        try:
            with path.open("rb") as handle:
                digest = hashlib.file_digest(handle, "sha256")
        except OSError as exc:
            raise InstallError(f"cannot read package {path}: {exc.strerror}") from None
        if digest.hexdigest() != rec.sha256.hex():
            raise InstallError(
                f"package {path.name} does not match its channel index (sha256 {digest.hexdigest()[:12]}... != {rec.sha256.hex()[:12]}...)",
                hint="the archive is corrupt or was replaced; re-download it or re-index the channel",
            )


def _remove_tree(path: Path) -> None:
    # rattler's background extraction can outlive a failed install() and write again: sweep,
    # give it a moment, sweep again.
    shutil.rmtree(path, ignore_errors=True)
    time.sleep(0.2)
    shutil.rmtree(path, ignore_errors=True)


def _is_populated(prefix: Path) -> bool:
    return prefix.exists() and (not prefix.is_dir() or any(prefix.iterdir()))


def ensure_creatable(prefix: Path, *, force: bool) -> None:
    """Refuse a target that exists (unless --force, and then only a conda env)."""
    if not _is_populated(prefix):
        return
    if not force:
        raise UsageError(f"{prefix} already exists", hint="pass --force to replace it (the old env is restored if the new one fails)")
    if not (prefix / "conda-meta").is_dir():
        raise UsageError(f"{prefix} exists and is not a conda env; refusing to replace it", hint="remove it yourself or pick another name")


def pip_install(prefix: Path, specs: tuple[str, ...]) -> None:
    if not specs:
        return
    python = prefix / "bin" / "python"
    if not python.exists():
        raise InstallError(f"the recipe has a pip list but {python} does not exist", hint="add python to the recipe")
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-input", *specs],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise InstallError(f"pip install failed: {tail[0]}")


def create_env(
    plan: Plan,
    records: list[Any],
    origin: RecipeOrigin,
    *,
    force: bool,
    reporter: Any | None = None,
) -> CreatedEnv:
    prefix = plan.prefix
    with exclusive_lock(lock_for(prefix), f"env {prefix}"):
        replaced = False
        backup: Path | None = None
        ensure_creatable(prefix, force=force)
        if _is_populated(prefix):
            backup = prefix.with_name(f".{prefix.name}.envkit-old-{os.getpid()}")
            os.rename(prefix, backup)
            replaced = True
        try:
            verify_archives(records, envs.pkgs_dir())
            prefix.parent.mkdir(parents=True, exist_ok=True)
            backend.install(records, prefix, envs.pkgs_dir(), [s.spec for s in plan.specs], reporter)
            linked = [Linked(p.channel, p.subdir, p.name, p.version, p.build) for p in plan.packages]
            append_block(prefix, block(["envkit", "create", plan.recipe, "-p", str(prefix)], linked, [], [s.spec for s in plan.specs]))
            pip_install(prefix, plan.pip_specs)
            activation = RecordedActivation(plan.recipe, plan.activation, prefix_tag(prefix))
            files = activation.files(prefix)
            write_files(files)
            remove_stale(prefix, files)
            write_record(prefix, build_record(plan, origin, activation, files))
        except BaseException as exc:
            _remove_tree(prefix)
            if backup is not None:
                os.rename(backup, prefix)
            if isinstance(exc, KeyboardInterrupt):
                raise Interrupted(
                    f"interrupted: nothing was left at {prefix}" + (" (the previous env was restored)" if backup else "")
                ) from None
            if isinstance(exc, EnvkitError):
                raise
            raise InstallError(f"creating {prefix} failed: {exc}") from None
        envs.register(prefix)
        if backup is not None:
            _remove_tree(backup)
        return CreatedEnv(prefix, tuple(f.path for f in files), replaced)


def build_record(plan: Plan, origin: RecipeOrigin, activation: RecordedActivation, files: list[ActivationFile]) -> dict[str, Any]:
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return {
        "envkit_version": __version__,
        "created": now,
        "updated": now,
        "recipe": {"name": plan.recipe, "source": origin.source, "path": origin.path, "commit": origin.commit},
        "platform": plan.platform,
        "channels": [{"name": c.name, "url": c.url} for c in plan.channels],
        "specs": [{"spec": s.spec, "reason": s.reason, "origin": str(s.origin) if s.origin else None} for s in plan.specs],
        "pip": list(plan.pip_specs),
        "virtual_packages": list(plan.virtual_packages),
        "packages": [asdict(p) for p in plan.packages],
        "activation": activation_json(activation, plan.prefix, files),
        "probe": None,
        "healthy": None,
    }


def update_record_probe(prefix: Path, summary: dict[str, Any], healthy: bool) -> None:
    record = read_record(prefix)
    if record is None:
        return
    record["probe"] = summary
    record["healthy"] = healthy
    record["updated"] = datetime.now(UTC).isoformat(timespec="seconds")
    with contextlib.suppress(OSError):
        write_record(prefix, record)
