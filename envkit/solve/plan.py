"""Recipe -> channels + specs -> a solved plan. Nothing here touches the target prefix."""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import rattler

from envkit.core.credentials import refuse_credentials
from envkit.core.errors import ChannelError, SolveError, UsageError
from envkit.recipe.checker import spec_name
from envkit.recipe.compile import CompiledRecipe, CompiledSpec
from envkit.recipe.model import EnvOp
from envkit.recipe.settings import resolve
from envkit.solve import backend
from envkit.solve.channels import ResolvedChannel, check_local_channel, resolve_channels
from envkit.solve.packages import PlannedPackage

# Packages whose presence or build decides BLAS, OpenMP or torch behaviour: shown highlighted.
TOOLCHAIN_ROLES: dict[str, str] = {
    "libblas": "blas",
    "libcblas": "blas",
    "liblapack": "blas",
    "blas": "blas",
    "mkl": "blas",
    "libopenblas": "blas",
    "openblas": "blas",
    "blis": "blas",
    "nomkl": "blas",
    "mkl-service": "blas",
    "_openmp_mutex": "openmp",
    "llvm-openmp": "openmp",
    "intel-openmp": "openmp",
    "libgomp": "openmp",
    "pytorch": "pytorch",
    "libtorch": "pytorch",
    "pytorch-mutex": "pytorch",
    "pytorch-cuda": "pytorch",
    "cuda-version": "pytorch",
    "cpuonly": "pytorch",
    "pytorch-cpu": "pytorch",
    "pytorch-gpu": "pytorch",
}


@dataclass(frozen=True)
class Plan:
    """What create or sync will install and set, shown and audited before anything changes."""

    recipe: str
    prefix: Path
    platform: str
    channels: tuple[ResolvedChannel, ...]
    specs: tuple[CompiledSpec, ...]
    pip_specs: tuple[str, ...]
    virtual_packages: tuple[str, ...]
    packages: tuple[PlannedPackage, ...]
    activation: tuple[EnvOp, ...]
    warnings: tuple[str, ...]
    assumed: tuple[str, ...] = ()  # virtual packages taken from the recipe, not this machine, and why
    pip_locked: bool = False  # pip_specs are exact URLs from a lock: installed without resolving


@dataclass(frozen=True)
class Target:
    """What a solve for one platform assumes of the machine."""

    platform: str
    virtual: tuple[Any, ...]
    assumed: tuple[str, ...]

    @property
    def described(self) -> tuple[str, ...]:
        return tuple(backend.describe_virtual(v) for v in self.virtual)


@dataclass(frozen=True)
class SolveOutcome:
    """A plan and the rattler records that install it."""

    plan: Plan
    records: list[Any]


def choose_channels(compiled: CompiledRecipe, extra: list[str], override: bool) -> list[str]:
    for channel in extra:
        refuse_credentials(channel, "-c")
    if override:
        if not extra:
            raise UsageError("--override-channels needs at least one -c CHANNEL")
        return list(dict.fromkeys(extra))
    return list(dict.fromkeys([*extra, *compiled.channels]))


CHANNEL_HINT = "map each channel to a reachable mirror with --mirror NAME=URL (or custom_channels in .condarc)"
# where a channel answers 401 or 403: envkit (rattler) reads credentials where pixi writes them
CREDENTIALS_HINT = (
    "the channel asks for credentials: store them for its host with 'pixi auth login HOST --token ...' (or --username/--password), "
    "in ~/.rattler/credentials.json, in a file named by RATTLER_AUTH_FILE, or in ~/.netrc; name the channel without them, "
    "so that no lock or export carries them"
)


def channel_hint(text: str) -> str:
    return CREDENTIALS_HINT if re.search(r"\b(401|403)\b", text) else CHANNEL_HINT


def channel_failure(text: str, channels: list[ResolvedChannel]) -> str:
    """One line: which channel, which URL failed, and the root cause from rattler's chain
    ('Caused by: ...' lines), e.g. connection refused or a host name that does not resolve."""
    first, causes = backend.error_chain(text)
    first = first or "unknown error"
    culprit = next((c for c in channels if c.url.rstrip("/") in first), None)
    which = f"channel '{culprit.name}' ({culprit.url})" if culprit else "channel(s) " + ", ".join(c.name for c in channels)
    cause = causes[-1] if causes else first
    if any("dns" in c.lower() for c in causes):
        cause = f"the host name could not be resolved ({cause})"
    url = re.search(r"url \((\S+?)\)", first)
    return f"cannot reach {which}: {cause}" + (f" [{url.group(1)}]" if url else "")


def _cuda_hint(cuda: str | None, assumed: bool) -> str:
    """What to do when __cuda is in the conflict: there is none (no driver), the driver's is too old
    for what the recipe asks, or the recipe's own declaration (assumed, no driver) is."""
    if cuda is None:
        return (
            "; it needs __cuda, which no NVIDIA driver here provides: declare the CUDA version in the recipe "
            "(toolchain.pytorch.cuda), solve as if a driver were there with CONDA_OVERRIDE_CUDA=12.9, or use the CPU recipe"
        )
    if assumed:
        return (
            f"; __cuda={cuda} is assumed from the recipe's toolchain.pytorch.cuda (no NVIDIA driver here), and the "
            "packages need another: make toolchain.pytorch.cuda the CUDA they are built for"
        )
    return (
        f"; this machine's NVIDIA driver provides __cuda={cuda}, older than the packages need: update the driver, "
        f'or pin builds it runs (toolchain.pytorch.cuda: "{cuda}")'
    )


def _arch_hint(arch: str, assumed: str | None) -> str:
    """What to say when __cuda_arch is in the conflict: no build has kernels for these GPUs, and
    where they came from (this machine's, or the plan line that assumed them)."""
    if assumed is None:
        gpus = "this machine's GPUs"
    elif "CONDA_OVERRIDE_CUDA_ARCH" in assumed:
        gpus = "from CONDA_OVERRIDE_CUDA_ARCH"
    else:
        gpus = "assumed from the recipe's toolchain.pytorch.cuda_arch"
    return (
        f"; no build of these packages has kernels for GPUs of compute capability {arch} (__cuda_arch={arch}, {gpus}): "
        "pick versions built for them, or GPUs they are built for"
    )


def _hint(error_text: str, specs: tuple[CompiledSpec, ...], goal: Target | None = None) -> str:
    """Name the recipe lines and toolchain pins that take part in the conflict."""
    involved = []
    lowered = error_text.lower()
    for spec in specs:
        name = spec.name
        if name and (f"{name} " in lowered or f"{name}\n" in lowered or lowered.endswith(name)):
            where = f"{spec.origin} ({spec.reason})" if spec.origin else f"envkit's default ({spec.reason})"
            if (line := f"'{spec.spec}' from {where}") not in involved:
                involved.append(line)
    cuda = ""
    described, assumed = (goal.described, goal.assumed) if goal else ((), ())
    arch = next((v.partition("=")[2] for v in described if v.startswith("__cuda_arch=")), None)
    if "__cuda_arch" in lowered and arch is not None:
        cuda = _arch_hint(arch, next((a for a in assumed if a.startswith("assumed __cuda_arch=")), None))
    elif "__cuda" in lowered:
        have = next((v.partition("=")[2] for v in described if v.startswith("__cuda=")), None)
        cuda = _cuda_hint(have, any(a.startswith("assumed __cuda=") for a in assumed))
    if not involved:
        return "no recipe spec is named in the conflict; check the channels with 'envkit create --dry-run -c ...'" + cuda
    return "recipe specs in the conflict: " + "; ".join(involved) + cuda


def target(compiled: CompiledRecipe, platform: str, *, detect: bool = True) -> Target:
    """The virtual packages to solve with. A CUDA recipe on a machine without an NVIDIA driver (a
    login node, CI) assumes the CUDA its recipe declares (toolchain.pytorch.cuda), as pixi's
    system-requirements do, and the GPUs' compute capability it declares (cuda_arch, as
    __cuda_arch; CONDA_OVERRIDE_CUDA_ARCH wins), without which the solver would pick builds made
    for the newest GPUs only. A detected driver and GPU win. Locks never detect: they hold on any
    machine."""
    virtual = list(backend.virtual_packages(platform, detect=detect))
    assumed: list[str] = []
    torch = compiled.recipe.toolchain.pytorch
    if torch is None or torch.variant != "cuda" or platform.startswith("osx"):
        return Target(platform, tuple(virtual), ())
    names = {backend.describe_virtual(v).partition("=")[0] for v in virtual}
    here = detect and platform == backend.native_platform()
    if torch.cuda and "__cuda" not in names:
        virtual.append(backend.virtual_from("__cuda", torch.cuda))
        names.add("__cuda")
        assumed.append(
            _assumed("__cuda", torch.cuda, compiled, "cuda", "no NVIDIA driver on this machine" if here else f"solving for {platform}")
        )
    override = os.environ.get("CONDA_OVERRIDE_CUDA_ARCH")
    arch = override or torch.cuda_arch
    if arch and "__cuda" in names and "__cuda_arch" not in names:
        virtual.append(backend.virtual_from("__cuda_arch", arch))
        why = "no NVIDIA GPU seen on this machine" if here else f"solving for {platform}"
        if override:
            assumed.append(f"assumed __cuda_arch={arch}, from CONDA_OVERRIDE_CUDA_ARCH; {why}")
        else:
            assumed.append(_assumed("__cuda_arch", arch, compiled, "cuda_arch", why))
    return Target(platform, tuple(virtual), tuple(assumed))


def _assumed(name: str, version: str, compiled: CompiledRecipe, field: str, why: str) -> str:
    where = compiled.recipe.located(f"toolchain.pytorch.{field}")
    return f"assumed {name}={version}, declared by the recipe (toolchain.pytorch.{field}{f', {where}' if where else ''}); {why}"


def solve_recipe(
    compiled: CompiledRecipe,
    prefix: Path,
    *,
    extra_channels: list[str],
    override_channels: bool,
    mirrors: dict[str, str],
    platform: str | None = None,
    warnings: tuple[str, ...] = (),
    prefer: list[backend.Preferred] | None = None,
) -> SolveOutcome:
    """`prefer`: what the env has from envkit, kept where the recipe allows (a sync)."""
    platform = platform or backend.native_platform()
    channels = resolve_channels(choose_channels(compiled, extra_channels, override_channels), mirrors)
    for channel in channels:
        check_local_channel(channel, platform)
    goal = target(compiled, platform)
    jobs = [(compiled, goal)]
    records = (solve_keeping(jobs, channels, [prefer]) if prefer else solve_or_explain(jobs, channels))[0]
    plan = plan_from_records(compiled, prefix, goal, channels, records, activation=resolve(compiled.activation), warnings=warnings)
    return SolveOutcome(plan, records)


def solve_or_explain(
    jobs: list[tuple[CompiledRecipe, Target]],
    channels: list[ResolvedChannel],
    *,
    name_platform: bool = False,
    preferred: list[list[backend.Preferred]] | None = None,
) -> list[list[Any]]:
    """Solve each (recipe compiled for a platform, that platform's target), keeping `preferred`
    records (per job) where the specs allow; failures become one envkit error naming the channel
    or the recipe lines, and the platform where there are several or `name_platform` (a lock,
    which may be for another machine)."""
    urls = [c.url for c in channels]
    try:
        if len(jobs) == 1 and preferred is None:
            compiled, goal = jobs[0]
            return [backend.solve(urls, [s.spec for s in compiled.conda_specs], goal.platform, list(goal.virtual))]
        return backend.solve_many(
            urls, [(goal.platform, list(goal.virtual), [s.spec for s in c.conda_specs]) for c, goal in jobs], preferred
        )
    except ChannelError as exc:
        raise SolveError(channel_failure(exc.message, channels), hint=channel_hint(exc.message)) from None
    except SolveError as exc:
        first = jobs[0][0]
        failed = [(c, goal) for c, goal in jobs if goal.platform == exc.platform] or jobs
        where = f" for {', '.join(goal.platform for _, goal in failed)}" if name_platform or len(jobs) > 1 else ""
        specs = tuple(s for c, _ in failed for s in c.conda_specs)
        raise SolveError(
            f"the recipe '{first.recipe.name}' cannot be solved{where}:\n{exc.message}", hint=_hint(exc.message, specs, failed[0][1])
        ) from None


def solve_keeping(
    jobs: list[tuple[CompiledRecipe, Target]],
    channels: list[ResolvedChannel],
    preferred: list[list[backend.Preferred]],
    *,
    name_platform: bool = False,
) -> list[list[Any]]:
    """solve_or_explain keeping `preferred` (what a lock pins, what a sync's env has), and their
    versions too where only a build had to change. A preferred record the solve cannot keep (its
    python moved, its channel took the build back) is a record, not a version, to rattler: the
    package went to its newest version, as in pixi, where `conda install python=3.12` keeps
    numpy's version and takes its py312 build. So each job whose solve moved a preferred package
    to another version the recipe did not ask for is solved again with those held at their
    versions, and what the first solve chose for the rest (a package released to move, a new one)
    held there too; where that cannot solve (a package the recipe or an update moved needs the
    newer one), the first solve stands."""
    solved = solve_or_explain(jobs, channels, name_platform=name_platform, preferred=preferred)
    out = []
    for (compiled, goal), prefer, first in zip(jobs, preferred, solved, strict=True):
        held = held_versions(compiled.conda_specs, prefer, first)
        records = first
        if held:
            pinned = {name for name, *_ in prefer}
            chosen = tuple(f"{r.name.normalized} =={r.version}" for r in first if r.name.normalized not in pinned)
            specs = compiled.conda_specs + tuple(CompiledSpec(spec, "the version it had") for spec in (*held, *chosen))
            with contextlib.suppress(SolveError):
                records = solve_or_explain([(replace(compiled, conda_specs=specs), goal)], channels, preferred=[prefer])[0]
        out.append(records)
    return out


def held_versions(specs: tuple[CompiledSpec, ...], preferred: list[backend.Preferred], records: list[Any]) -> tuple[str, ...]:
    """`NAME ==VERSION` for each preferred package that `records` has at another version, where no
    spec of the recipe rules that version out (one that does moved it on purpose)."""
    now = {r.name.normalized: str(r.version) for r in records}
    ranges: dict[str, list[str]] = {}
    for spec in specs:
        match = rattler.MatchSpec(spec.spec, strict=False)
        if match.version:
            ranges.setdefault(spec_name(match), []).append(match.version)
    held = []
    for name, version, _build, _url in preferred:
        if name not in now or now[name] == version:
            continue
        if all(rattler.VersionSpec(r).matches(rattler.Version(version)) for r in ranges.get(name, [])):
            held.append(f"{name} =={version}")
    return tuple(held)


def plan_from_records(
    compiled: CompiledRecipe,
    prefix: Path,
    goal: Target,
    channels: list[ResolvedChannel] | tuple[ResolvedChannel, ...],
    records: list[Any],
    *,
    activation: tuple[EnvOp, ...],
    warnings: tuple[str, ...] = (),
    pip_specs: tuple[str, ...] | None = None,
    pip_locked: bool = False,
) -> Plan:
    packages = []
    for rec in sorted(records, key=lambda r: r.name.normalized):
        name = rec.name.normalized
        packages.append(
            PlannedPackage(
                name=name,
                version=str(rec.version),
                build=str(rec.build),
                channel=str(rec.channel or ""),
                subdir=str(rec.subdir),
                url=str(rec.url),
                sha256=rec.sha256.hex() if rec.sha256 else None,
                role=TOOLCHAIN_ROLES.get(name),
                depends=tuple(str(d) for d in rec.depends),
            )
        )
    return Plan(
        recipe=compiled.recipe.name,
        prefix=prefix,
        platform=goal.platform,
        channels=tuple(channels),
        specs=compiled.conda_specs,
        pip_specs=compiled.pip_specs if pip_specs is None else pip_specs,
        virtual_packages=goal.described,
        packages=tuple(packages),
        activation=activation,
        warnings=warnings,
        assumed=goal.assumed,
        pip_locked=pip_locked,
    )
