"""`envkit probe --attest`: prove a lock's slice on this kind of machine and keep the proof in the lock.

Before the probe runs, the env must hold exactly the slice: made from a lock (`create --locked`),
with conda-meta's packages and pip's wheels those of the lock's slice for the env's platform now
(a re-lock of another platform leaves this one's proofs standing). After it, the proof is written
into the lock's envkit line, atomically, if the slice is still the one probed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from envkit import __version__
from envkit.core.errors import UsageError, one_line
from envkit.core.fsutil import write_output
from envkit.prefix.envrecord import EnvRecord
from envkit.prefix.installed import pip_dists, read_conda_meta
from envkit.probe.model import ProbeReport
from envkit.team.lock import Lock, LockedPlatform, read_lock
from envkit.team.proofs import MachineKind, Proof, Runtime, kept_with, slice_digest, with_section_proofs

SHOWN_DIFFERENCES = 5


@dataclass(frozen=True)
class Attesting:
    """The lock slice an env is about to be probed for, checked to be what the env holds."""

    path: Path
    platform: str
    digest: str


def lock_to_attest(prefix: Path, record: EnvRecord | None, given: str | None) -> Attesting:
    """The lock and slice a probe of `prefix` may attest: refused in one line unless the env is
    exactly that slice."""
    if record is None or record.lock is None or record.lock.path is None:
        raise UsageError(
            f"{prefix} was not installed from a lock: a proof is of a lock's packages",
            hint=f"make it from the lock first: envkit create RECIPE --locked -p {prefix} --force",
        )
    path = Path(given).expanduser().absolute() if given else Path(record.lock.path)
    _refuse_team_checkout(path)
    lock = read_lock(path)
    platform = record.platform or ""
    locked = lock.for_platform(platform)
    if locked is None:
        raise UsageError(
            f"{path} has no {platform or 'such'} slice: the env's platform is not in it", hint="give the env's own lock: --lock FILE"
        )
    differences = slice_differences(prefix, locked)
    if differences:
        shown = "; ".join(differences[:SHOWN_DIFFERENCES]) + (
            f"; and {len(differences) - SHOWN_DIFFERENCES} more" if len(differences) > SHOWN_DIFFERENCES else ""
        )
        raise UsageError(
            f"{prefix} is not the {platform} slice of {path} ({shown}): no proof can be taken",
            hint=f"bring it to the lock first: envkit sync --locked --lock {path} -p {prefix}",
        )
    return Attesting(path, platform, slice_digest(lock, locked))


def slice_differences(prefix: Path, locked: LockedPlatform) -> list[str]:
    """How the env's packages and wheels differ from the slice's (`+` the env has more, `-` less)."""
    packages, unreadable = read_conda_meta(prefix)
    if unreadable:
        return [f"{bad.path} cannot be read" for bad in unreadable]
    have = {name: f"{p.version} {p.build}" for name, p in packages.items()}
    want = {str(r.name.normalized): f"{r.version} {r.build}" for r in locked.records}
    out = _compare(have, want, "")
    for r in locked.records:  # the same name, version and build from another archive (a rebuild, another channel)
        package = packages.get(str(r.name.normalized))
        if package is not None and package.sha256 and r.sha256 and package.sha256 != bytes(r.sha256).hex():
            out.append(f"~ {r.name.normalized} {r.version} {r.build}: another archive (sha256 {package.sha256[:12]}...)")
    wheels = {d.name: d.version for d in pip_dists(prefix).values() if d.managed}
    out += _compare(wheels, {q.name: q.version for q in locked.pip}, "pip ")
    return out


def _compare(have: dict[str, str], want: dict[str, str], kind: str) -> list[str]:
    out = [f"+ {kind}{name} {have[name]}" for name in sorted(have.keys() - want.keys())]
    out += [f"- {kind}{name} {want[name]}" for name in sorted(want.keys() - have.keys())]
    out += [
        f"~ {kind}{name} {have[name]} (the lock: {want[name]})" for name in sorted(have.keys() & want.keys()) if have[name] != want[name]
    ]
    return out


def _refuse_team_checkout(path: Path) -> None:
    """envkit's own clone of a team repo changes only by `recipes update`: a proof written there
    would stop git from updating it."""
    from envkit.recipe.sources import sources_holding

    source = next((s.name for s in sources_holding(path) if s.kind == "git"), None)
    if source is not None:
        raise UsageError(
            f"{path} is in envkit's checkout of recipe source '{source}', which only 'envkit recipes update' changes: no proof was written",
            hint=f"attest into your clone of the '{source}' repo (--lock PATH_IN_CLONE), commit it, then 'envkit recipes update'",
        )


def machine_of(report: ProbeReport, platform: str) -> MachineKind:
    """The kind of machine the probe ran on: rattler's virtual packages there, the GPU model its
    `gpu` check used, and that GPU's compute capability where rattler saw none."""
    gpu = next((c for c in report.checks if c.id == "gpu"), None)
    data = gpu.data if gpu is not None and gpu.status == "pass" else {}
    devices = data.get("devices")
    model = one_line(devices[0])[:80] if isinstance(devices, list) and devices and isinstance(devices[0], str) else None
    machine = MachineKind.of(report.platform or platform, report.machine, model)
    capability = data.get("capability")
    if machine.cuda and not machine.cuda_arch and isinstance(capability, list) and len(capability) == 2:
        machine = replace(machine, cuda_arch=f"{capability[0]}.{capability[1]}")
    return machine


def proof_of(report: ProbeReport, attesting: Attesting) -> Proof:
    """What the probe saw, as a proof of the slice on the machine it ran on."""
    by_id = {c.id: c for c in report.checks}
    machine = machine_of(report, attesting.platform)
    runtimes = by_id.get("runtimes")
    libraries = (runtimes.data.get("libraries") if runtimes is not None else None) or []
    seen = tuple(
        Runtime(str(lib.get("kind", "")), str(lib.get("api", "")), str(lib.get("identity") or lib.get("api", "")), str(lib.get("path", "")))
        for lib in libraries
        if isinstance(lib, dict)
    )
    layer = runtimes.data.get("mkl_threading_layer") if runtimes is not None else None
    return Proof(
        attesting.platform,
        attesting.digest,
        report.status if report.status in ("pass", "warn", "fail") else "pass",
        datetime.now(UTC).isoformat(timespec="seconds"),
        __version__,
        machine,
        report.node,
        report.slurm_job,
        tuple((c.id, c.status) for c in report.checks),
        layer if isinstance(layer, str) else None,
        seen,
    )


def attest(proof: Proof, path: Path) -> Lock:
    """Add `proof` to the lock at `path`, whose slice must still be the one probed; the lock's other
    bytes stay as they are. Written whole by a rename; a lock changed while it is rewritten is read
    again."""
    for _ in range(3):
        text = path.read_text(encoding="utf-8")
        lock = read_lock(path)
        locked = lock.for_platform(proof.platform)
        if locked is None or slice_digest(lock, locked) != proof.slice_digest:
            raise UsageError(
                f"the {proof.platform} slice of {path} changed while the env was probed: no proof was written",
                hint="make the env from the lock as it is now, and probe it again",
            )
        updated = with_section_proofs(text, kept_with(lock.proofs, proof), path)
        if path.read_text(encoding="utf-8") != text:
            continue
        write_output(path, updated, path.name)  # a link to the lock stays one
        return read_lock(path)
    raise UsageError(f"{path} kept changing while the proof was written: no proof was written", hint="try again")
