"""Materialise a solved plan as a conda env, all or nothing.

py-rattler installs in place and never rolls back (a failed package leaves the ones before it
linked), does not check sha256 for file:// channels, and can panic. So envkit owns the
transaction (envkit.install.transaction): under the target's lock, settle what interrupted runs left,
verify every archive, build the whole env in a staging directory (rattler patches the final
prefix into its files), write history, activation scripts and, last, the record; then rename it
into place, moving an env being replaced aside for the instant of the swap. A failure or Ctrl-C
deletes the staging directory (and the env's lock file, where no env is left at the prefix);
SIGKILL leaves one that no tool takes for an env and that the next run removes.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit import __version__
from envkit.core.errors import EnvkitError, InstallError, Interrupted, UsageError, filesystem_error, os_refusal
from envkit.core.fsutil import LockBusy, discard_lock, may_create_in
from envkit.core.notices import notify
from envkit.install import pkgcache
from envkit.install.transaction import env_lock, recover, remove_tree, swap_in
from envkit.prefix import envs
from envkit.prefix.envrecord import (
    EnvRecord,
    InstalledWheel,
    JSONObject,
    Provenance,
    RecipeRef,
    RecordedChannel,
    RecordedSpec,
)
from envkit.prefix.leftovers import work_dir
from envkit.prefix.protect import FROZEN_MARKER, frozen_env, frozen_marker, must_be_an_env_alone, must_not_be_frozen
from envkit.prefix.record import read_record, record_digest, write_record
from envkit.recipe.model import EnvOp, ProbeSpec, RecipeOrigin
from envkit.solve import backend
from envkit.solve.plan import Plan

if TYPE_CHECKING:
    from envkit.activation.writer import ActivationFile, RecordedActivation
    from envkit.prefix.kernels import KernelSearch
    from envkit.probe.model import ProbeReport


@dataclass(frozen=True)
class CreatedEnv:
    """An env made and in place, and the activation scripts written into it."""

    prefix: Path
    activation_files: tuple[Path, ...]
    replaced_existing: bool
    kernels: tuple[str, ...] = ()  # Jupyter kernels of the prefix (an env made again) given its settings
    kernels_failed: tuple[str, ...] = ()  # "PATH: why" for each left as it was


def _is_populated(prefix: Path) -> bool:
    return prefix.exists() and (not prefix.is_dir() or any(prefix.iterdir()))


def _read_only_filesystem(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def ensure_creatable(prefix: Path, *, force: bool, override_frozen: bool = False) -> None:
    """Refuse a target that exists (unless --force, and then only a conda env that is one env alone
    and not frozen: envkit.prefix.protect), or whose directory this user may not write to: the env is built
    beside it and renamed into place."""
    denied = may_create_in(prefix.absolute().parent)
    if denied is not None and not denied.is_dir():  # a file where a folder must be: no permission would help
        raise UsageError(
            f"{denied} is a file where envkit needs a folder (on the way to {prefix})", hint="move it aside, or pick another prefix (-p)"
        )
    if denied is not None and _read_only_filesystem(denied):  # as sync and remove say it: exit 74
        refused = filesystem_error(OSError(errno.EROFS, "read-only", str(denied)), f"{prefix} was not created")
        assert refused is not None
        raise refused
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
    must_be_an_env_alone(prefix, "replace")
    must_not_be_frozen(prefix, "replace", override=override_frozen)


def _kernel_settings_of(prefix: Path) -> dict[str, str | None] | None:
    """What the env a --force create replaces gave its Jupyter kernels (envkit.prefix.kernels), so that a
    value for a setting the new recipe has not is taken out of them; None where there is no such
    env, or its record cannot be read (its kernels then keep what they hold)."""
    try:
        record = read_record(prefix)
        if record is None:
            return None
        from envkit.activation.writer import recorded_activation  # for a fresh env, loaded while rattler links (_ahead)

        activation = recorded_activation(prefix, record)
    except EnvkitError:
        return None
    from envkit.prefix.kernels import settings_of

    return settings_of(activation.ops, activation.carried)


def _ahead(prefix: Path, activation: tuple[EnvOp, ...], replaced: dict[str, str | None] | None) -> KernelSearch | None:
    """What create does while rattler links (backend.install's `meanwhile`): load the modules that
    finish the env (_finish) and, where the env has settings for its Jupyter kernels or replaces
    one that had, read the kernels of other envs (none are looked for otherwise)."""
    import importlib

    for module in ("envkit.prefix.condameta", "envkit.prefix.history", "envkit.activation.writer"):  # those _finish imports
        importlib.import_module(module)
    from envkit.prefix.kernels import search_ahead, settings_of

    return search_ahead(prefix) if settings_of(activation) or replaced else None


def _finish(
    staging: Path, plan: Plan, records: list[Any], origin: RecipeOrigin, *, marker: bytes | None, provenance: Provenance | None
) -> list[ActivationFile]:
    """Make the freshly linked staging env complete: conda-meta as conda writes it, history, pip
    packages, activation scripts and, last, the record; returns the activation files as they will
    be at the final prefix."""
    from envkit.activation.writer import ActivationFile, RecordedActivation, prefix_tag, write_files
    from envkit.prefix import condameta
    from envkit.prefix.history import Linked, append_block, block, mark_created

    prefix = plan.prefix
    condameta.as_conda_writes(staging, archives=condameta.archives_of(records), staged=True)
    linked = [Linked(p.channel, p.subdir, p.name, p.version, p.build) for p in plan.packages]
    append_block(staging, block(["envkit", "create", plan.recipe, "-p", str(prefix)], linked, [], [s.spec for s in plan.specs]))
    mark_created(staging)
    pip_installed = _pip_install(staging, plan, prefix)
    if marker is not None:  # --override-frozen replaced it for this once; the env stays frozen
        staging.joinpath(*FROZEN_MARKER).write_bytes(marker)
    activation = RecordedActivation(plan.recipe, plan.activation, prefix_tag(prefix))
    staged = activation.files(staging)
    write_files(staged, staged=True)
    # the same files at the final place: the staging env's python says where its site-packages is
    files = [ActivationFile(prefix / f.path.relative_to(staging), f.text) for f in staged]
    record = replace(
        build_record(plan, origin, activation, files, provenance),
        pip_installed=pip_installed,
        conda_meta=condameta.stamp(staging),  # kept by the rename into place
    )
    write_record(staging, record, staged=True)  # last: the staging env is complete
    return files


def _pip_install(staging: Path, plan: Plan, prefix: Path) -> tuple[InstalledWheel, ...]:
    """The plan's pip list into the staging env; pip's machinery is loaded only for a recipe with one."""
    if not plan.pip_specs:
        return ()
    from envkit.pip.install import pip_install

    installed = pip_install(staging, plan.pip_specs, final_prefix=prefix, locked=plan.pip_locked)
    return tuple(InstalledWheel.from_report(w) for w in installed)


def create_env(
    plan: Plan,
    records: list[Any],
    origin: RecipeOrigin,
    *,
    force: bool,
    override_frozen: bool = False,
    reporter: Any | None = None,
    provenance: Provenance | None = None,
) -> CreatedEnv:
    prefix = plan.prefix
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with env_lock(prefix) as lock:
        recover(prefix)
        ensure_creatable(prefix, force=force, override_frozen=override_frozen)
        replaced = _kernel_settings_of(prefix)
        marker = frozen_marker(prefix) if force else None
        cache = envs.pkgs_dir()
        for path in pkgcache.sweep(cache):
            notify(f"removed {path.name} from the package cache, left by an interrupted install")
        staging = work_dir(prefix, "staging")
        old: Path | None = None
        try:
            pkgcache.verify_archives(records, cache)
            search = backend.install(
                records,
                staging,
                cache,
                [s.spec for s in plan.specs],
                reporter,
                final_prefix=prefix,
                meanwhile=lambda: _ahead(prefix, plan.activation, replaced),
            )
            files = _finish(staging, plan, records, origin, marker=marker, provenance=provenance)
            old = swap_in(staging, prefix)
        except BaseException as exc:
            remove_tree(staging, writers_may_linger=True)
            if not os.path.lexists(prefix) and not staging.exists():  # no env here, before or now: no lock file either
                discard_lock(lock)
            if isinstance(exc, KeyboardInterrupt):
                raise Interrupted(
                    f"interrupted: nothing was left at {prefix}" + (" (the previous env is untouched)" if force else "")
                ) from None
            if isinstance(exc, EnvkitError):
                raise
            if isinstance(exc, OSError) and (refused := os_refusal(exc, f"nothing was left at {prefix}")):
                raise refused from None
            raise InstallError(f"creating {prefix} failed: {exc}") from None
        envs.register(prefix)
        if old is not None:
            remove_tree(old)
    from envkit.prefix.kernels import give_settings, settings_of  # kernels made for an env at this prefix before

    given = give_settings(prefix, settings_of(plan.activation), before=replaced, search=search)
    return CreatedEnv(prefix, tuple(f.path for f in files), old is not None, given.written, given.failed)


def recorded_specs(plan: Plan) -> tuple[RecordedSpec, ...]:
    """The specs a plan was solved for, as the record keeps them (the env's requests to conda)."""
    return tuple(RecordedSpec(s.spec, s.reason, str(s.origin) if s.origin else None) for s in plan.specs)


def build_record(
    plan: Plan, origin: RecipeOrigin, activation: RecordedActivation, files: list[ActivationFile], provenance: Provenance | None = None
) -> EnvRecord:
    from envkit.activation.writer import activation_section

    now = datetime.now(UTC).isoformat(timespec="seconds")
    return EnvRecord(
        envkit_version=__version__,
        created=now,
        updated=now,
        recipe=provenance.recipe if provenance else RecipeRef(plan.recipe, origin.source, origin.path, origin.commit),
        platform=plan.platform,
        channels=tuple(RecordedChannel(c.name, c.url) for c in plan.channels),
        specs=recorded_specs(plan),
        pip=tuple(plan.pip_specs),
        virtual_packages=tuple(plan.virtual_packages),
        assumed=tuple(plan.assumed),
        packages=plan.packages,
        activation=activation_section(activation, plan.prefix, files),
        lock=provenance.lock if provenance else None,
    )


def keep_verdict(prefix: Path, summary: JSONObject, healthy: bool, basis: str | None) -> str | None:
    """Keep a probe's verdict in the record the probe started from (`basis`, its record_digest);
    returns why it was not kept. A sync, a fix or another probe that changed the record while this
    one ran made the verdict about an env that is no longer there."""
    if basis is None:
        return None  # no record: an env envkit did not make keeps no verdict
    if frozen_env(prefix) is not None:  # CEP 22: not even envkit's own file in it changes
        return "the env is frozen (conda-meta/frozen): its record keeps no verdict from this probe"
    try:
        with env_lock(prefix, wait=10):
            if record_digest(prefix) != basis:
                return "the env changed while it was probed: its record keeps no verdict from this probe"
            record = read_record(prefix)
            if record is None:
                return None
            now = datetime.now(UTC).isoformat(timespec="seconds")
            write_record(prefix, record.with_verdict({**summary, "at": now}, healthy, now))
    except LockBusy:
        return "another envkit was changing the env: its record keeps no verdict from this probe"
    except OSError as exc:
        return f"the verdict is not kept in the env's record: {exc.strerror}"
    return None


def probe_and_keep(
    prefix: Path, spec: ProbeSpec | None = None, *, elsewhere: Callable[[Path], ProbeReport] | None = None
) -> tuple[ProbeReport, str | None]:
    """Run the probe here (or `elsewhere`: a Slurm job) and keep its verdict in the record it
    started from (keep_verdict); with why it was not kept, if it was not. Run with the env's lock
    released, as create, sync and probe do."""
    from envkit.probe.runner import run_probe  # the probe's machinery only when it runs

    basis = record_digest(prefix)
    report = run_probe(prefix, spec) if elsewhere is None else elsewhere(prefix)
    return report, keep_verdict(prefix, report.summary(), report.healthy, basis)
