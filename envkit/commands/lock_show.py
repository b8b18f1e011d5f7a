"""`envkit lock RECIPE --show`: what a lock holds per platform slice, and the proofs of each (which
kinds of machines its envs were probed on, what the probe saw loaded). Reads only."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envkit.core.errors import UsageError
from envkit.team.lock import default_lock_path, read_lock
from envkit.team.proofs import Proof, slice_digest, valid_proofs
from envkit.ui.console import Out, escape


@dataclass(frozen=True)
class ShownProof:
    proof: Proof
    valid: bool  # about the slice as it is now (its digest); False: an earlier slice's, it counts for nothing


@dataclass(frozen=True)
class ShownSlice:
    platform: str
    digest: str
    packages: int
    pip: int
    virtual_packages: tuple[str, ...]
    proofs: tuple[ShownProof, ...]


@dataclass(frozen=True)
class ShownLock:
    path: str
    recipe: str
    recipe_digest: str
    slices: tuple[ShownSlice, ...]
    orphans: tuple[Proof, ...] = ()  # proofs of platforms the lock no longer has


def lock_file_of(ref: str) -> Path:
    """A lock file given by its path, else the lock `envkit lock` writes for the recipe `ref`."""
    given = Path(ref).expanduser()
    if given.suffix == ".lock" or (given.is_file() and not ref.endswith((".yaml", ".yml"))):
        return given.absolute()
    from envkit.recipe.loader import load_recipe

    return default_lock_path(load_recipe(ref))


def show_lock(ref: str) -> ShownLock:
    path = lock_file_of(ref)
    if not path.is_file():
        raise UsageError(f"no lock file at {path}", hint=f"make one: envkit lock {ref}")
    lock = read_lock(path)
    slices = []
    for locked in lock.platforms:
        valid = set(valid_proofs(lock, locked))
        mine = sorted((p for p in lock.proofs if p.platform == locked.platform), key=lambda p: p.at, reverse=True)
        slices.append(
            ShownSlice(
                locked.platform,
                slice_digest(lock, locked),
                len(locked.records),
                len(locked.pip),
                tuple(locked.virtual_packages),
                tuple(ShownProof(p, p in valid) for p in mine),
            )
        )
    platforms = {p.platform for p in lock.platforms}
    orphans = tuple(p for p in lock.proofs if p.platform not in platforms)
    return ShownLock(str(path), lock.recipe, lock.recipe_digest, tuple(slices), orphans)


def show_view(c: Out, shown: ShownLock) -> None:
    c.print(f"[bold]{escape(shown.path)}[/bold]: recipe {escape(shown.recipe)} (digest {shown.recipe_digest[:12]})")
    for s in shown.slices:
        pip = f", {s.pip} pip" if s.pip else ""
        c.print(
            f"  {s.platform}: {s.packages} packages{pip}; slice {s.digest[:12]}; virtual packages {escape(', '.join(s.virtual_packages) or '-')}"
        )
        if not s.proofs:
            c.print("    [yellow]not proven on any machine[/yellow] (envkit create --locked, then envkit probe --attest)")
        for shown_proof in s.proofs:
            _proof_view(c, shown_proof)
    for proof in shown.orphans:
        c.print(f"  [dim]{escape(proof.platform)}: a proof of a platform the lock no longer has: {escape(proof.line())}[/dim]")


def _proof_view(c: Out, shown: ShownProof) -> None:
    p = shown.proof
    color = {"pass": "green", "warn": "yellow", "fail": "red"}[p.outcome]
    stale = "" if shown.valid else " [dim](of an earlier slice: counts for nothing)[/dim]"
    c.print(f"    [{color}]{p.outcome}[/{color}] {escape(p.line())}{stale}")
    job = f", Slurm job {escape(p.slurm_job)}" if p.slurm_job else ""
    c.print(
        f"      envkit {escape(p.envkit_version)}{job}; kind {escape(p.machine.key)}"
        + (f"; glibc {escape(p.machine.glibc)}" if p.machine.glibc else "")
    )
    if p.threading_layer:
        c.print(f"      MKL threading layer {escape(p.threading_layer)}")
    for r in p.runtimes:
        named = "" if r.identity in (r.api, "") else f" (is {escape(r.identity)})"
        c.print(f"      {escape(r.kind)} {escape(Path(r.path).name)}{named}")
