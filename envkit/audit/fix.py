"""Safe fixes only: write or repair envkit's activation scripts, move envkit's own record, open
records to those who share the env, and give the env's Jupyter kernels its settings. Packages are
never touched; for package-level findings the report carries the command to run and what else it
would take with it."""

from __future__ import annotations

import difflib
import stat
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

from envkit import __version__
from envkit.activation import FILE_PREFIX
from envkit.activation.writer import (
    FIX_NAME,
    ActivationFile,
    RecordedActivation,
    activation_section,
    carried_beside,
    prefix_tag,
    recorded_activation,
    remove_stale,
    write_files,
)
from envkit.audit.engine import Finding
from envkit.audit.inventory import carried_values, private_records, read_activation
from envkit.audit.rules import RULES_BY_ID
from envkit.core.digests import sha256
from envkit.core.errors import UsageError
from envkit.core.fsutil import atomic_write_text, read_exact
from envkit.install.transaction import env_lock
from envkit.prefix.envrecord import FIX_SOURCE, EnvRecord, RecipeRef
from envkit.prefix.kernels import KernelSpec, env_kernels, settings_of, settings_writes
from envkit.prefix.record import (
    LEGACY_RECORD_REL,
    RECORD_REL,
    drop_record,
    legacy_record_path,
    move_legacy_record,
    read_record,
    record_path,
    write_record,
)
from envkit.recipe.model import EnvOp


@dataclass(frozen=True)
class FixPlan:
    """What `audit --fix` would change in one env, shown as a diff before anything is written."""

    JSON_EXCLUDE: ClassVar[tuple[str, ...]] = ("files", "basis", "kernels")  # the diff says what changes

    prefix: Path
    activation: RecordedActivation
    files: tuple[ActivationFile, ...]
    move_record: bool
    diff: str
    reasons: tuple[str, ...]
    open_records: tuple[tuple[str, int], ...] = ()  # (relative path, read bits to add)
    basis: str = ""  # fix_basis when planned: the plan holds only while it is unchanged
    kernels: tuple[tuple[KernelSpec, str], ...] = ()  # the env's Jupyter kernels to write, each with its new kernel.json

    @property
    def changes(self) -> bool:
        return bool(self.diff)


def _with(ops: tuple[EnvOp, ...], op: EnvOp) -> tuple[EnvOp, ...]:
    return (*(o for o in ops if o.name != op.name), op)


# A rule's `safe_fix` names one of these: how it changes the activation settings, and what it says
# it does. Rewriting the scripts needs no change of settings: every plan renders them from the ops,
# and moving the record is done by every plan that finds one at the old place.
SAFE_FIXES: dict[str, tuple[Callable[[tuple[EnvOp, ...]], tuple[EnvOp, ...]], str]] = {
    "threading-layer-gnu": (lambda ops: _with(ops, EnvOp("MKL_THREADING_LAYER", "set", value="GNU")), "export MKL_THREADING_LAYER=GNU"),
    "rewrite-activation": (lambda ops: ops, f"rewrite activation scripts from {RECORD_REL}"),
    "move-record": (lambda ops: ops, f"move {LEGACY_RECORD_REL} to {RECORD_REL}, where conda does not read it"),
    "open-records": (lambda ops: ops, "let the others who can reach the env read its records"),
    "kernel-settings": (lambda ops: ops, "write the env's activation settings into its Jupyter kernels"),
    "carry-activation": (lambda ops: ops, "give a python started without activation the threading values activation sets"),
}


def fix_basis(prefix: Path) -> str:
    """A digest of what a fix is planned from and writes over: envkit's record (at either place),
    envkit's activation files and the records' modes. Between the plan shown and its answer, a sync
    may have changed the env; a fix planned before would write the old settings back over it."""
    digest = sha256()
    paths = [record_path(prefix), legacy_record_path(prefix)]
    for sub in ("activate.d", "deactivate.d"):
        paths += sorted((prefix / "etc" / "conda" / sub).glob(f"{FILE_PREFIX}*"))
    paths += [k.path for k in env_kernels(prefix)]
    for path in paths:
        digest.update(f"{path}\0".encode())
        try:
            digest.update(path.read_bytes())
        except OSError as exc:
            digest.update(f"\0{exc.errno}".encode())
    digest.update(repr(private_records(prefix)).encode())
    return digest.hexdigest()


# radon cc 26: one step per fixable finding kind, planned together so the diff shown is the one written
def plan_fix(prefix: Path, findings: list[Finding]) -> FixPlan:
    basis = fix_basis(prefix)  # before reading: a change while planning shows as a mismatch
    record = read_record(prefix)
    recorded = recorded_activation(prefix, record) if record else None
    activation = recorded or RecordedActivation(FIX_NAME, (), prefix_tag(prefix))
    ops, carried = activation.ops, activation.carried
    reasons = []
    opening: tuple[tuple[str, int], ...] = ()
    for finding in findings:
        safe_fix = RULES_BY_ID[finding.rule_id].safe_fix if finding.rule_id in RULES_BY_ID else None
        if safe_fix is None:
            continue
        change, says = SAFE_FIXES[safe_fix]
        ops = change(ops)
        reasons.append(f"{finding.rule_id}: {says}")
        if safe_fix == "open-records":
            opening = private_records(prefix)
        elif safe_fix == "carry-activation":  # as the activation leaves them now
            carried = tuple(carried_values(read_activation(prefix, record)).items())
    carried = carried_beside(ops, carried)
    activation = RecordedActivation(activation.recipe_name, ops, activation.tag, carried)
    kernels = settings_writes(prefix, settings_of(ops, carried), settings_of(recorded.ops, recorded.carried) if recorded else None)
    if kernels:  # also where no EK036 was found: settings this fix adds reach the kernels too
        reasons.append(f"EK036: {SAFE_FIXES['kernel-settings'][1]}")
    # an env envkit made has its scripts even with nothing to set (create and sync write them); one
    # it did not make gets them only for a setting (without `recorded`, a fix deleted them all)
    files = activation.files(prefix) if recorded or ops or carried else []
    move = legacy_record_path(prefix).is_file()
    diff_parts = [f"rename {LEGACY_RECORD_REL} -> {RECORD_REL}\n"] if move else []
    diff_parts += [f"chmod {_who(bits)}+r {rel}\n" for rel, bits in opening]
    # files the record lists that these settings no longer need (carried values activation dropped)
    keep = {str(f.path.relative_to(prefix)) for f in files}
    listed = (record.activation.files if record and record.activation else None) or ()
    diff_parts += [f"delete {rel}\n" for rel in listed if rel not in keep and (prefix / rel).is_file()]
    for f in files:
        old = read_exact(f.path) or ""
        if old != f.text:
            rel = str(f.path.relative_to(prefix))
            diff_parts.append("".join(difflib.unified_diff(old.splitlines(True), f.text.splitlines(True), f"a/{rel}", f"b/{rel}")))
    for kernel, text in kernels:
        diff_parts.append(
            "".join(difflib.unified_diff(kernel.text.splitlines(True), text.splitlines(True), f"a{kernel.path}", f"b{kernel.path}"))
        )
    return FixPlan(prefix, activation, tuple(files), move, "".join(diff_parts), tuple(dict.fromkeys(reasons)), opening, basis, kernels)


def _who(bits: int) -> str:
    return ("g" if bits & stat.S_IRGRP else "") + ("o" if bits & stat.S_IROTH else "")


class FixOutdated(UsageError):
    """The env changed between the plan shown and its answer."""


def apply_fix(plan: FixPlan) -> list[Path]:
    """Write `plan` under the env's lock, and only while the env is as it was planned on: a sync
    (or a second fix) may have run while the question waited, and the plan would write the old
    settings back over it. Raises LockBusy or FixOutdated, and then writes nothing."""
    with env_lock(plan.prefix):
        if fix_basis(plan.prefix) != plan.basis:
            raise FixOutdated(f"{plan.prefix} changed after it was audited", hint="run envkit audit --fix again")
        return _write_fix(plan)


def _write_kernels(kernels: tuple[tuple[KernelSpec, str], ...]) -> list[Path]:
    """Each kernel.json whole or not at all (it keeps its mode); one the user may not write (a
    system-wide kernel) is said in one line."""
    written = []
    for kernel, text in kernels:
        try:
            atomic_write_text(kernel.path, text)
        except PermissionError:
            raise UsageError(
                f"{kernel.path}: you may not write to this Jupyter kernel's spec", hint="run envkit audit --fix as its owner"
            ) from None
        written.append(kernel.path)
    return written


def _write_fix(plan: FixPlan) -> list[Path]:
    if not plan.changes:
        return []
    changed = write_files(list(plan.files))
    scripts = bool(changed) | bool(remove_stale(plan.prefix, list(plan.files)))
    if plan.move_record and move_legacy_record(plan.prefix):
        changed.append(plan.prefix / RECORD_REL)
    for rel, bits in plan.open_records:
        path = plan.prefix / rel
        try:
            path.chmod(path.stat().st_mode & 0o7777 | bits)
        except PermissionError:
            raise UsageError(
                f"{path}: only its owner (or root) can change its mode", hint="run envkit audit --fix as the env's owner"
            ) from None
        changed.append(path)
    changed += _write_kernels(plan.kernels)
    existing = read_record(plan.prefix)
    if not scripts or not (plan.files or existing):  # settings as recorded (a fix of kernels or modes alone)
        return changed
    if existing is not None and existing.only_fixed and not plan.activation.ops and not plan.activation.carried:
        drop_record(plan.prefix)  # an env envkit did not make, where envkit now writes nothing
        return [*changed, plan.prefix / RECORD_REL]
    record = existing or EnvRecord(recipe=RecipeRef(plan.activation.recipe_name, FIX_SOURCE))
    section = activation_section(plan.activation, plan.prefix, list(plan.files))
    if record.activation != section:  # the verdict was about the settings this fix replaced
        record = replace(record, probe=None, healthy=None)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    write_record(plan.prefix, replace(record, activation=section, updated=now, envkit_version=__version__))
    return changed
