"""Proofs in a lock: which kinds of machines a lock's envs were probed on, and what the probe saw.

A proof is kept per platform slice of the lock, in the `envkit:` line that rattler's readers
(pixi, conda's lockfile support, pixi-sbom) skip. Each names the digest of its slice (the slice's
records, wheels, activation, virtual packages and the lock's channels): a `lock --update` that
moves a slice, or a hand edit of it, leaves its proofs naming another digest, and they no longer
count. The lock's own digest, which env records keep, leaves the proofs out, so attesting a lock
does not make its envs look out of date.

What this protects against: a proof taken for a set of packages other than the one the lock now
holds. What it does not: a proof written by hand. The digest ties a proof to its slice; nothing
signs it. Treat a lock's proofs as you treat its review history, as trustworthy as the repo.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.core.digests import file_sha256, sha256
from envkit.core.errors import UsageError, one_line
from envkit.recipe.model import KNOWN_PLATFORMS, MACHINE_KIND

if TYPE_CHECKING:
    from envkit.team.lock import Lock, LockedPlatform

SECTION_PREFIX = "envkit: "
KEPT_PER_KIND = 3  # proofs kept per machine kind of a slice: the newest ones
OUTCOMES = ("pass", "warn", "fail")


def _text(value: object, limit: int = 200) -> str:
    """A value a proof holds, fit for one line: a lock is a file anyone in the repo can edit."""
    return one_line(value)[:limit] if isinstance(value, str) else ""


@dataclass(frozen=True)
class MachineKind:
    """What the packages of a slice depend on in a machine: its platform and the virtual packages
    that pick builds (__glibc, __cuda, __cuda_arch), with the GPU the probe saw."""

    platform: str
    glibc: str | None = None
    cuda: str | None = None  # the driver's CUDA (__cuda)
    cuda_arch: str | None = None  # the lowest compute capability of its GPUs (__cuda_arch)
    gpu: str | None = None  # the model the probe ran on

    @classmethod
    def of(cls, platform: str, virtual_packages: Iterable[str], gpu: str | None = None) -> MachineKind:
        found = dict(v.partition("=")[::2] for v in virtual_packages)
        return cls(platform, found.get("__glibc") or None, found.get("__cuda") or None, found.get("__cuda_arch") or None, gpu)

    @property
    def key(self) -> str:
        """linux-64, linux-64+cuda, linux-64+cuda_arch=9.0: as --require-proof names kinds."""
        if self.cuda_arch:
            return f"{self.platform}+cuda_arch={self.cuda_arch}"
        return f"{self.platform}+cuda" if self.cuda else self.platform

    def shown(self) -> str:
        parts = [self.platform]
        if self.cuda_arch:
            parts.append(f"__cuda_arch {self.cuda_arch}")
        if self.cuda:
            parts.append(f"__cuda {self.cuda}")
        if self.gpu:
            parts.append(self.gpu)
        return parts[0] + (f" with {', '.join(parts[1:])}" if parts[1:] else "")

    def satisfies(self, required: RequiredKind) -> bool:
        if self.platform != required.platform:
            return False
        if required.cuda_arch is not None:
            return self.cuda_arch == required.cuda_arch
        return self.cuda is not None if required.cuda else True

    def same_kind(self, other: MachineKind) -> bool:
        """A machine of this kind: the same platform, with or without CUDA alike, and the same
        compute capability where both have GPUs envkit saw."""
        if self.platform != other.platform or bool(self.cuda) != bool(other.cuda):
            return False
        return not (self.cuda_arch and other.cuda_arch) or self.cuda_arch == other.cuda_arch


@dataclass(frozen=True)
class RequiredKind:
    """A kind of machine CI requires a passing proof for (`--require-proof linux-64+cuda`)."""

    platform: str
    cuda: bool = False
    cuda_arch: str | None = None

    @classmethod
    def parse(cls, text: str) -> RequiredKind:
        found = MACHINE_KIND.fullmatch(text.strip())
        if found is None or found.group("platform") not in KNOWN_PLATFORMS:
            raise UsageError(
                f"--require-proof: {one_line(text)!r} is not a machine kind",
                hint=f"name kinds as PLATFORM, PLATFORM+cuda or PLATFORM+cuda_arch=X.Y, e.g. linux-64,linux-64+cuda; "
                f"platforms: {', '.join(KNOWN_PLATFORMS)}",
            )
        return cls(found.group("platform"), found.group("cuda") is not None, found.group("arch"))

    def __str__(self) -> str:
        return f"{self.platform}+cuda_arch={self.cuda_arch}" if self.cuda_arch else f"{self.platform}+cuda" if self.cuda else self.platform


@dataclass(frozen=True)
class Runtime:
    """A BLAS or OpenMP library the probe's process had mapped, and what it really is."""

    kind: str  # blas | openmp
    api: str  # as its file name says (libgomp, openblas, ...)
    identity: str  # as its symbols and version strings say (gnu-openmp, llvm-openmp, mkl, ...)
    path: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "api": self.api, "identity": self.identity, "path": self.path}


@dataclass(frozen=True)
class Proof:
    """One probe of an env made from a slice of the lock, on one machine."""

    platform: str
    slice_digest: str
    outcome: str  # pass | warn | fail
    at: str
    envkit_version: str
    machine: MachineKind
    node: str = ""
    slurm_job: str = ""
    checks: tuple[tuple[str, str], ...] = ()  # (check id, status), in the probe's order
    threading_layer: str | None = None  # MKL's, in effect in the probe's process
    runtimes: tuple[Runtime, ...] = ()

    @property
    def ddp(self) -> str | None:
        """The DDP check's outcome: the gloo job of two ranks, else the seed scenario's."""
        checks = dict(self.checks)
        return checks.get("ddp-gloo") or checks.get("ddp-seed")

    def line(self) -> str:
        ddp = f", DDP {self.ddp}" if self.ddp and self.ddp != "skip" else ""
        node = f" on {self.node}" if self.node else ""
        return f"{self.machine.shown()}, {self.at[:10]}{node}, {self.outcome}{ddp}"

    def to_json(self) -> dict[str, object]:
        m = self.machine
        return {
            "platform": self.platform,
            "slice": self.slice_digest,
            "outcome": self.outcome,
            "at": self.at,
            "envkit": self.envkit_version,
            "machine": {"platform": m.platform, "glibc": m.glibc, "cuda": m.cuda, "cuda_arch": m.cuda_arch, "gpu": m.gpu},
            "node": self.node,
            "slurm_job": self.slurm_job,
            "checks": dict(self.checks),
            "threading_layer": self.threading_layer,
            "runtimes": [r.to_json() for r in self.runtimes],
        }

    @classmethod
    def from_json(cls, data: object) -> Proof | None:
        """None for an entry that is not one envkit writes: it is data, shown escaped, and counts
        for nothing."""
        if not isinstance(data, dict):
            return None
        m = data.get("machine")
        platform, digest, outcome = data.get("platform"), data.get("slice"), data.get("outcome")
        if not (isinstance(platform, str) and isinstance(digest, str) and outcome in OUTCOMES and isinstance(m, dict)):
            return None
        checks = data.get("checks")
        runtimes = data.get("runtimes")
        return cls(
            _text(platform, 40),
            _text(digest, 64),
            str(outcome),
            _text(data.get("at"), 40),
            _text(data.get("envkit"), 40),
            MachineKind(
                _text(m.get("platform"), 40),
                _text(m.get("glibc"), 20) or None,
                _text(m.get("cuda"), 20) or None,
                _text(m.get("cuda_arch"), 20) or None,
                _text(m.get("gpu"), 80) or None,
            ),
            _text(data.get("node")),
            _text(data.get("slurm_job"), 40),
            tuple((_text(k, 40), _text(v, 10)) for k, v in checks.items()) if isinstance(checks, dict) else (),
            _text(data.get("threading_layer"), 40) or None,
            tuple(
                Runtime(_text(r.get("kind"), 20), _text(r.get("api"), 40), _text(r.get("identity"), 40), _text(r.get("path"), 300))
                for r in runtimes
                if isinstance(r, dict)
            )
            if isinstance(runtimes, list)
            else (),
        )


def slice_digest(lock: Lock, locked: LockedPlatform) -> str:
    """What a proof of this slice is about: each record's name, version, build, URL and hashes,
    the wheels, the activation settings, the virtual packages and the lock's channels."""
    records = [
        [str(r.name.normalized), str(r.version), str(r.build), str(r.url), _hex(r.sha256), _hex(r.md5)]
        for r in sorted(locked.records, key=lambda r: r.name.normalized)
    ]
    body = {
        "platform": locked.platform,
        "channels": list(lock.channels),
        "virtual_packages": sorted(locked.virtual_packages),
        "records": records,
        "pip": sorted([q.name, q.version, q.url] for q in locked.pip),
        "activation": list(locked.activation),
    }
    return sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _hex(value: object) -> str:
    return value.hex() if isinstance(value, bytes) else str(value or "")


def valid_proofs(lock: Lock, locked: LockedPlatform) -> tuple[Proof, ...]:
    """The slice's proofs that are about it as it is now."""
    digest = slice_digest(lock, locked)
    return tuple(p for p in lock.proofs if p.platform == locked.platform and p.slice_digest == digest)


def proofs_from_section(section: Mapping[str, object]) -> tuple[Proof, ...]:
    entries = section.get("proofs")
    if not isinstance(entries, list):
        return ()
    return tuple(p for p in map(Proof.from_json, entries) if p is not None)


def kept_with(proofs: Iterable[Proof], new: Proof) -> tuple[Proof, ...]:
    """`proofs` and `new`, keeping the newest KEPT_PER_KIND of each platform and machine kind."""
    out: list[Proof] = []
    seen: dict[tuple[str, str], int] = {}
    for proof in sorted([new, *proofs], key=lambda p: p.at, reverse=True):
        kind = (proof.platform, proof.machine.key)
        if seen.get(kind, 0) < KEPT_PER_KIND:
            seen[kind] = seen.get(kind, 0) + 1
            out.append(proof)
    return tuple(sorted(out, key=lambda p: (p.platform, p.machine.key, p.at)))


def _without_proofs(text: str) -> str | None:
    """The lock's text with its envkit line as it is without proofs; None where it has none."""
    lines = text.split("\n")
    for at, line in enumerate(lines):
        if line.startswith(SECTION_PREFIX):
            try:
                section = json.loads(line[len(SECTION_PREFIX) :])
            except ValueError:
                return None
            if not isinstance(section, dict) or "proofs" not in section:
                return None
            del section["proofs"]
            lines[at] = SECTION_PREFIX + json.dumps(section, sort_keys=True)
            return "\n".join(lines)
    return None


def lock_content_digest(path: Path) -> str:
    """The lock's digest as env records keep it: its bytes, its proofs left out (the digest of a
    lock without proofs is its file's sha256)."""
    data = path.read_bytes()
    try:
        stripped = _without_proofs(data.decode("utf-8"))
    except UnicodeDecodeError:
        stripped = None
    return file_sha256(path) if stripped is None else sha256(stripped.encode("utf-8")).hexdigest()


def with_section_proofs(text: str, proofs: tuple[Proof, ...], path: Path) -> str:
    """`text` with its envkit line holding `proofs` (and nothing else of it changed)."""
    lines = text.split("\n")
    for at, line in enumerate(lines):
        if line.startswith(SECTION_PREFIX):
            section = json.loads(line[len(SECTION_PREFIX) :])
            section.pop("proofs", None)
            if proofs:
                section["proofs"] = [p.to_json() for p in proofs]
            lines[at] = SECTION_PREFIX + json.dumps(section, sort_keys=True)
            return "\n".join(lines)
    raise UsageError(f"{path} has no envkit section: it was not written by 'envkit lock'", hint="re-lock with 'envkit lock RECIPE'")


@dataclass(frozen=True)
class ProofNote:
    """What a lock's proofs say of a machine of one kind, as `create --locked` says it."""

    proven: bool
    line: str


def proof_note(lock: Lock, locked: LockedPlatform, here: MachineKind) -> ProofNote:
    """The newest passing proof of the slice on a machine of `here`'s kind, else why there is none."""
    valid = valid_proofs(lock, locked)
    same = sorted((p for p in valid if p.machine.same_kind(here)), key=lambda p: p.at)
    passing = [p for p in same if p.outcome != "fail"]
    if passing:
        return ProofNote(True, f"proven on {passing[-1].line()}")
    if same:
        return ProofNote(False, f"this kind of machine ({here.key}) failed the lock's probe: {same[-1].line()}")
    elsewhere = sorted({p.machine.key for p in valid if p.outcome != "fail"})
    also = f" (proven on {', '.join(elsewhere)})" if elsewhere else ""
    return ProofNote(False, f"not proven on this kind of machine ({here.key}){also}")


def missing_kinds(lock: Lock, required: Iterable[RequiredKind]) -> list[str]:
    """The required kinds with no passing proof of the slice of their platform as it is now."""
    out = []
    for kind in required:
        locked = lock.for_platform(kind.platform)
        if locked is None:
            out.append(f"{kind}: the lock has no {kind.platform} slice")
            continue
        valid = valid_proofs(lock, locked)
        if not any(p.outcome != "fail" and p.machine.satisfies(kind) for p in valid):
            stale = sum(1 for p in lock.proofs if p.platform == kind.platform and p not in valid)
            why = f" ({stale} proof{'s' if stale != 1 else ''} of an earlier {kind.platform} slice no longer count)" if stale else ""
            out.append(f"{kind}: no passing proof{why}")
    return out
