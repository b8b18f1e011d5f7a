"""Materialise a solved plan as a conda env, all or nothing.

py-rattler installs in place and never rolls back (a failed package leaves the ones before it
linked), does not check sha256 for file:// channels, and can panic. So envkit owns the
transaction (envkit.transaction): under the target's lock, settle what interrupted runs left,
verify every archive, build the whole env in a staging directory (rattler patches the final
prefix into its files), write history, activation scripts and, last, the record; then rename it
into place, moving an env being replaced aside for the instant of the swap. A failure or Ctrl-C
deletes the staging directory; SIGKILL leaves one that no tool takes for an env and that the next
run removes.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from envkit import __version__, backend, condameta, envs, pkgcache
from envkit.activation.writer import ActivationFile, RecordedActivation, activation_json, prefix_tag, write_files
from envkit.errors import EnvkitError, InstallError, Interrupted, UsageError, filesystem_error
from envkit.fsutil import LockBusy, may_create_in
from envkit.history import Linked, append_block, block
from envkit.installed import pip_dists
from envkit.notices import notify
from envkit.recipe.model import ProbeSpec, RecipeOrigin
from envkit.record import read_record, record_digest, write_record
from envkit.solve import Plan
from envkit.transaction import env_lock, recover, remove_tree, swap_in, work_dir

if TYPE_CHECKING:
    from envkit.probe.model import ProbeReport
    from envkit.sync import PipRepair


@dataclass(frozen=True)
class CreatedEnv:
    """An env made and in place, and the activation scripts written into it."""

    prefix: Path
    activation_files: tuple[Path, ...]
    replaced_existing: bool


def verify_archives(records: list[Any], cache: Path | None = None) -> None:
    """Check sha256 of local archives against repodata (rattler skips this for file://)."""
    for rec in records:
        url = str(rec.url)
        parsed = urlparse(url)
        if parsed.scheme != "file" or rec.sha256 is None:
            continue
        if cache is not None and pkgcache.cached_sha256(cache, rec) == bytes(rec.sha256):
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


def _is_populated(prefix: Path) -> bool:
    return prefix.exists() and (not prefix.is_dir() or any(prefix.iterdir()))


def ensure_creatable(prefix: Path, *, force: bool) -> None:
    """Refuse a target that exists (unless --force, and then only a conda env), or whose directory
    this user may not write to: the env is built beside it and renamed into place."""
    denied = may_create_in(prefix.absolute().parent)
    if denied is not None:
        raise UsageError(
            f"{prefix}: you may not create it, {denied} is not writable by you",
            hint="pick a prefix in a directory you own (-p), or ask the directory's owner to create the env",
        )
    if not _is_populated(prefix):
        return
    if not (prefix / "conda-meta").is_dir():  # --force would not help: say so now
        raise UsageError(f"{prefix} exists and is not a conda env; refusing to replace it", hint="remove it yourself or pick another name")
    if not force:
        raise UsageError(f"{prefix} already exists", hint="pass --force to replace it; the old env is restored if the new one fails")


def pip_reason(output: str) -> str:
    """One line from pip's failure: its last `ERROR:` line (the most precise: "No matching
    distribution found for X"), first sentence only; for a hash mismatch, which file and both
    digests (pip puts those on the lines after its ERROR, and ends with "Got <hex>")."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line.removeprefix("ERROR:").strip() for line in lines if line.startswith("ERROR:")]
    if not errors:
        return lines[-1] if lines else "no output"
    reason = errors[-1].split(". ")[0].rstrip(".")
    at = next((n for n, line in enumerate(lines) if line.startswith("Expected sha256 ")), None)
    if "DO NOT MATCH THE HASHES" in reason and at and at + 1 < len(lines) and lines[at + 1].startswith("Got "):
        # "NAME @ URL#sha256=...:" (or "NAME==V from URL:"), then "Expected sha256 X", then "Got Y"
        what = lines[at - 1].rstrip(":").split("#", 1)[0]
        return f"{what}: its sha256 is {lines[at + 1].split()[-1]}, not the {lines[at].split()[-1]} its lock or requirement names"
    return reason


def pip_install(prefix: Path, specs: tuple[str, ...], *, final_prefix: Path | None = None, locked: bool = False) -> list[dict[str, str]]:
    """pip into the (staging) env; with `final_prefix`, the paths pip wrote into its files (script
    shebangs) are moved to the final prefix, as rattler does for conda packages. Locked specs are
    exact URLs (with #sha256=, which pip checks), installed as they are: no resolving. Returns what
    pip installed, URL and hash included (its --report), for the record, exports and locks."""
    if not specs:
        return []
    python = prefix / "bin" / "python"
    if not python.exists():
        raise InstallError(f"the recipe has a pip list but {python} does not exist", hint="add python to the recipe")
    before = set(pip_dists(prefix))
    with tempfile.TemporaryDirectory(prefix="envkit-pip-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [str(python), "-m", "pip", "install", "--no-input", "--no-compile", "--report", str(report)]
        proc = subprocess.run(
            [*cmd, *(["--no-deps"] if locked else []), *specs],
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
            env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        )
        if proc.returncode != 0:
            raise InstallError(f"pip install failed: {pip_reason(proc.stderr or proc.stdout)}")
        from packaging.utils import canonicalize_name

        installed = []
        for item in json.loads(report.read_text()).get("install", []):
            info = item.get("download_info", {})
            sha = (info.get("archive_info") or {}).get("hashes", {}).get("sha256")
            url = str(info.get("url", "")) + (f"#sha256={sha}" if sha else "")
            installed.append({"name": canonicalize_name(item["metadata"]["name"]), "version": str(item["metadata"]["version"]), "url": url})
    if final_prefix is not None and final_prefix != prefix:
        relocate_pip_files(prefix, final_prefix, [d for name, d in pip_dists(prefix).items() if name not in before])
    return sorted(installed, key=lambda p: p["name"])


def pip_put_back(prefix: Path, repair: PipRepair) -> None:
    """Undo what pip changed in the env since envkit installed it: uninstall what was pip-installed
    since, then reinstall the recorded wheels as they were (no resolving: --no-deps): from their
    exact URLs (pip checks the hash), by name and version where the record kept no URL."""
    python = str(prefix / "bin" / "python")
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    if repair.extra:
        names = [name for name, _ in repair.extra]
        proc = subprocess.run(
            [python, "-m", "pip", "uninstall", "--yes", *names], capture_output=True, text=True, timeout=600, check=False, env=env
        )
        if proc.returncode != 0:
            raise InstallError(f"pip could not uninstall {', '.join(names)}: {pip_reason(proc.stderr or proc.stdout)}")
    if repair.missing:
        sources = [url or f"{name}=={version}" for name, version, url in repair.missing]
        proc = subprocess.run(
            [python, "-m", "pip", "install", "--no-input", "--no-compile", "--no-deps", *sources],
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
            env=env,
        )
        if proc.returncode != 0:
            wheels = ", ".join(f"{name} {version}" for name, version, _ in repair.missing)
            by_hand = " ".join(f"{name}=={version}" for name, version, _ in repair.missing)
            raise InstallError(
                f"pip could not put back {wheels} from the files envkit recorded: {pip_reason(proc.stderr or proc.stdout)}",
                hint=f"if those files are gone, install the same versions by hand: {prefix}/bin/python -m pip install {by_hand}; then sync again",
            )


def relocate_pip_files(staging: Path, final: Path, dists: list[Any]) -> None:
    old, new = str(staging).encode(), str(final).encode()
    for dist in dists:
        record = staging / dist.dist_info / "RECORD"
        if not record.is_file():
            continue
        site = record.parent.parent
        for line in record.read_text(errors="replace").splitlines():
            path = (site / line.split(",", 1)[0]).resolve()
            if not path.is_file() or path.is_symlink() or staging.resolve() not in path.parents:
                continue
            data = path.read_bytes()
            if old in data and b"\0" not in data[:8192]:  # text files only, as conda does
                path.write_bytes(data.replace(old, new))


def create_env(
    plan: Plan,
    records: list[Any],
    origin: RecipeOrigin,
    *,
    force: bool,
    reporter: Any | None = None,
    provenance: dict[str, Any] | None = None,
) -> CreatedEnv:
    prefix = plan.prefix
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with env_lock(prefix):
        recover(prefix)
        ensure_creatable(prefix, force=force)
        cache = envs.pkgs_dir()
        for path in pkgcache.sweep(cache):
            notify(f"removed {path.name} from the package cache, left by an interrupted install")
        staging = work_dir(prefix, "staging")
        old: Path | None = None
        try:
            verify_archives(records, cache)
            backend.install(records, staging, cache, [s.spec for s in plan.specs], reporter, final_prefix=prefix)
            condameta.as_conda_writes(staging)
            linked = [Linked(p.channel, p.subdir, p.name, p.version, p.build) for p in plan.packages]
            append_block(staging, block(["envkit", "create", plan.recipe, "-p", str(prefix)], linked, [], [s.spec for s in plan.specs]))
            pip_installed = pip_install(staging, plan.pip_specs, final_prefix=prefix, locked=plan.pip_locked)
            activation = RecordedActivation(plan.recipe, plan.activation, prefix_tag(prefix))
            write_files(activation.files(staging))
            files = activation.files(prefix)
            record = {
                **build_record(plan, origin, activation, files),
                "pip_installed": pip_installed,
                "conda_meta": condameta.stamp(staging),  # kept by the rename into place
                **(provenance or {}),
            }
            write_record(staging, record)  # last: the staging env is complete
            old = swap_in(staging, prefix)
        except BaseException as exc:
            remove_tree(staging, writers_may_linger=True)
            if isinstance(exc, KeyboardInterrupt):
                raise Interrupted(
                    f"interrupted: nothing was left at {prefix}" + (" (the previous env is untouched)" if force else "")
                ) from None
            if isinstance(exc, EnvkitError):
                raise
            if isinstance(exc, OSError) and (refused := filesystem_error(exc, f"nothing was left at {prefix}")):
                raise refused from None
            raise InstallError(f"creating {prefix} failed: {exc}") from None
        envs.register(prefix)
        if old is not None:
            remove_tree(old)
        return CreatedEnv(prefix, tuple(f.path for f in files), old is not None)


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
        "assumed": list(plan.assumed),
        "packages": [asdict(p) for p in plan.packages],
        "activation": activation_json(activation, plan.prefix, files),
        "probe": None,
        "healthy": None,
    }


def keep_verdict(prefix: Path, summary: dict[str, Any], healthy: bool, basis: str | None) -> str | None:
    """Keep a probe's verdict in the record the probe started from (`basis`, its record_digest);
    returns why it was not kept. A sync, a fix or another probe that changed the record while this
    one ran made the verdict about an env that is no longer there."""
    if basis is None:
        return None  # no record: an env envkit did not make keeps no verdict
    try:
        with env_lock(prefix, wait=10):
            if record_digest(prefix) != basis:
                return "the env changed while it was probed: its record keeps no verdict from this probe"
            record = read_record(prefix)
            if record is None:
                return None
            record["probe"] = summary
            record["healthy"] = healthy
            record["updated"] = datetime.now(UTC).isoformat(timespec="seconds")
            write_record(prefix, record)
    except LockBusy:
        return "another envkit was changing the env: its record keeps no verdict from this probe"
    except OSError as exc:
        return f"the verdict is not kept in the env's record: {exc.strerror}"
    return None


def probe_and_keep(prefix: Path, spec: ProbeSpec | None = None) -> tuple[ProbeReport, str | None]:
    """Run the probe and keep its verdict in the record it started from (keep_verdict); with why it
    was not kept, if it was not. Run with the env's lock released, as create, sync and probe do."""
    from envkit.probe.runner import run_probe  # the probe's machinery only when it runs

    basis = record_digest(prefix)
    report = run_probe(prefix, spec)
    return report, keep_verdict(prefix, report.summary(), report.healthy, basis)
