"""`envkit create`: resolve -> check -> solve -> plan -> (confirm) -> create -> activation -> probe."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit.audit.engine import Finding, audit_plan, inventory_of_plan
from envkit.audit.recipe_rules import plan_warnings
from envkit.commands import Result
from envkit.commands.arguments import channel_args, given, json_flag, lock_args, override_frozen_flag
from envkit.core.errors import ExitCode, InstallError, UsageError
from envkit.install.create import CreatedEnv, create_env, ensure_creatable, probe_and_keep
from envkit.prefix.envrecord import LockRef, Provenance, RecipeRef
from envkit.prefix.envs import target_prefix
from envkit.recipe.compile import CompiledRecipe, compile_recipe
from envkit.recipe.digest import resolved_digest
from envkit.recipe.loader import load_recipe
from envkit.recipe.model import EnvOp, Recipe
from envkit.recipe.platforms import known_platform
from envkit.recipe.settings import ActivationSettings, Setting, resolve
from envkit.solve import backend
from envkit.solve.channels import DEFAULT_ALIAS, ResolvedChannel, from_canonical, resolve_channels
from envkit.solve.plan import Plan, SolveOutcome, Target, plan_from_records, solve_recipe
from envkit.ui.console import Out, escape
from envkit.ui.terminal import UI
from envkit.ui.views import kernels_view, plan_view, probe_view, toolchain_view

if TYPE_CHECKING:  # for annotations only
    from envkit.audit.toolchain import ToolchainMap
    from envkit.probe.model import ProbeReport
    from envkit.team.lock import Lock, LockedPlatform
    from envkit.team.proofs import ProofNote


@dataclass(frozen=True)
class CreateRequest:
    """The command line of `envkit create`, as data (the conda plugin builds one too)."""

    recipe: str
    name: str | None = None
    prefix: str | None = None
    channels: tuple[str, ...] = ()
    override_channels: bool = False
    mirrors: tuple[tuple[str, str], ...] = ()
    dry_run: bool = False
    force: bool = False
    probe: bool = True
    locked: bool = False  # install the lock beside the recipe, no solve
    lock: str | None = None  # ... or this lock file
    frozen: bool = False  # use the lock even when the recipe changed since
    platform: str | None = None  # with dry_run: plan for another platform
    override_frozen: bool = False  # with force: replace an env marked frozen (CEP 22) all the same


@dataclass(frozen=True)
class CreateOutcome:
    """What a create planned, made and proved, or why it stopped."""

    plan: Plan
    dry_run: bool
    created: CreatedEnv | None
    probe: ProbeReport | None
    aborted: bool = False
    findings: tuple[Finding, ...] = ()  # the audit's rules over the plan, before anything is installed
    refused: bool = False  # error findings the recipe does not force: nothing was written
    toolchain: ToolchainMap | None = None  # a dry run shows the plan's toolchain map
    conda_here: bool = False  # a conda is installed for this user: `conda activate` works, else envkit's own activation
    proof: ProofNote | None = None  # for --locked: what the lock's proofs say of this kind of machine


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("recipe", help="recipe name or path to a .yaml file")
    group = p.add_mutually_exclusive_group()
    group.add_argument("-n", "--name", type=given, help="env name (default: the recipe's name)")
    group.add_argument("-p", "--prefix", type=given, help="env prefix path")
    channel_args(p)
    lock_args(p, "install")
    p.add_argument(
        "--platform", metavar="P", help="with --dry-run: solve and show the plan for another platform (linux-64, osx-arm64, win-64, ...)"
    )
    p.add_argument("--dry-run", action="store_true", help="solve, audit and show the plan; write nothing")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--force", action="store_true", help="replace an existing env (kept if the new one fails)")
    override_frozen_flag(p, "with --force, replace")
    p.add_argument("--no-probe", action="store_true", help="skip the post-install probe")
    json_flag(p)


def invoke(args: argparse.Namespace, ui: UI) -> Result[CreateOutcome]:
    from envkit.solve.channels import parse_mirror_flags

    request = CreateRequest(
        recipe=args.recipe,
        name=args.name,
        prefix=args.prefix,
        channels=tuple(args.channel),
        override_channels=args.override_channels,
        mirrors=tuple(parse_mirror_flags(args.mirror).items()),
        dry_run=args.dry_run,
        force=args.force,
        probe=not args.no_probe,
        locked=args.locked,
        lock=args.lock,
        frozen=args.frozen,
        platform=args.platform,
        override_frozen=args.override_frozen,
    )
    reporter = None
    if ui.interactive:
        from envkit.install.progress import RichInstallReporter

        reporter = RichInstallReporter(ui.terminal)
    return create(
        request,
        show_plan=None if ui.as_json else (lambda plan, findings: plan_view(ui.out, plan, findings)),
        confirm=(lambda plan: ui.ask("Proceed?")) if ui.interactive and not args.yes else None,
        reporter=reporter,
    )


def create(
    request: CreateRequest,
    *,
    show_plan: Callable[[Plan, tuple[Finding, ...]], None] | None = None,
    confirm: Callable[[Plan], bool] | None = None,
    reporter: Any | None = None,
) -> Result[CreateOutcome]:
    _check_request(request)
    recipe = load_recipe(request.recipe)
    warnings = plan_warnings(recipe, request.platform or backend.native_platform())
    compiled = compile_recipe(recipe, request.platform)
    prefix = target_prefix(request.name or (None if request.prefix else recipe.name), request.prefix)
    try:
        ensure_creatable(prefix, force=request.force, override_frozen=request.override_frozen)  # before the solve: say it now
    except UsageError as exc:
        if not request.dry_run:
            raise
        if request.platform in (None, backend.native_platform()):  # a plan for elsewhere makes nothing here
            # as conda's dry run does: the plan all the same, and what the create itself would say
            warnings += (f"the create itself would stop here: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""),)
    lock_info: LockRef | None = None
    proven: ProofNote | None = None
    if request.locked or request.lock or request.frozen:
        outcome, lock_info, proven = plan_from_lock(request, recipe, compiled, prefix, warnings)
    else:
        outcome = solve_recipe(
            compiled,
            prefix,
            extra_channels=list(request.channels),
            override_channels=request.override_channels,
            mirrors=dict(request.mirrors),
            platform=compiled.platform,
            warnings=warnings,
        )
    plan = outcome.plan
    findings = tuple(audit_plan(plan, recipe.force))
    if stopped := _before_install(request, plan, findings, show_plan, confirm):
        return _noted(stopped, proven)
    provenance = Provenance(RecipeRef.of(recipe), lock_info)
    try:
        created = create_env(
            plan,
            outcome.records,
            recipe.origin,
            force=request.force,
            override_frozen=request.override_frozen,
            reporter=reporter,
            provenance=provenance,
        )
    except InstallError as exc:
        raise _withdrawn_hint(exc, outcome.records, request, recipe) if lock_info else exc from None
    if not request.probe:
        made = CreateOutcome(plan, False, created, None, findings=findings, conda_here=_conda_here())
        return _noted(Result("create", made, view=create_view), proven)
    return _noted(_probed(plan, created, findings, recipe, prefix), proven)


def _noted(result: Result[CreateOutcome], proven: ProofNote | None) -> Result[CreateOutcome]:
    return result if proven is None else replace(result, data=replace(result.data, proof=proven))


def _check_request(request: CreateRequest) -> None:
    if request.name and request.prefix:
        raise UsageError("give either -n NAME or -p PREFIX, not both")
    if request.platform is not None:
        known_platform(request.platform, "--platform")
        if not request.dry_run and request.platform != backend.native_platform():
            raise UsageError(
                f"--platform {request.platform}: an env for another platform cannot be created here",
                hint="add --dry-run to see its plan, or 'envkit lock --platform' to lock it",
            )


def _before_install(
    request: CreateRequest,
    plan: Plan,
    findings: tuple[Finding, ...],
    show_plan: Callable[[Plan, tuple[Finding, ...]], None] | None,
    confirm: Callable[[Plan], bool] | None,
) -> Result[CreateOutcome] | None:
    """Where a create ends before it installs: the audit refuses the plan, a dry run, a no."""
    blocking = [f for f in findings if f.severity == "error"]
    if blocking:
        refused = CreateOutcome(plan, request.dry_run, None, None, findings=findings, refused=True)
        errors = tuple(f"{f.rule_id} {f.title}: {f.evidence}" for f in blocking)
        why = (
            f"the plan fails the audit ({', '.join(dict.fromkeys(f.rule_id for f in blocking))}): nothing was written",
            "fix the recipe (each finding says how), or accept a rule's risk by adding its id to the recipe's force: list",
        )
        return Result("create", refused, int(ExitCode.FINDINGS), why, errors, view=create_view)
    if request.dry_run:
        from envkit.audit.toolchain import plan_toolchain

        toolchain = plan_toolchain(inventory_of_plan(plan), [s.name for s in plan.specs], list(findings))
        return Result("create", CreateOutcome(plan, True, None, None, findings=findings, toolchain=toolchain), view=create_view)
    if show_plan is not None:
        show_plan(plan, findings)
    if confirm is not None and not confirm(plan):
        outcome_aborted = CreateOutcome(plan, False, None, None, aborted=True, findings=findings)
        return Result("create", outcome_aborted, int(ExitCode.OK), ("aborted: nothing was changed",), view=create_view)
    return None


def _probed(plan: Plan, created: CreatedEnv, findings: tuple[Finding, ...], recipe: Recipe, prefix: Path) -> Result[CreateOutcome]:
    from envkit.probe.runner import spec_for  # the probe's machinery only when it runs

    report, kept = probe_and_keep(prefix, spec_for(prefix, recipe))
    messages: tuple[str, ...] = (kept,) if kept else ()
    code = ExitCode.OK
    if not report.healthy:
        code = ExitCode.FINDINGS
        messages += (
            f"the env was created but its probe failed; it is kept at {prefix} and marked unhealthy in etc/envkit/record.json",
            f"fix: follow each failed check's remedy, then 'envkit probe -p {prefix}'; or remove it with 'rm -rf {prefix}'",
        )
    outcome = CreateOutcome(plan, False, created, report, findings=findings, conda_here=_conda_here())
    return Result("create", outcome, int(code), messages, view=create_view)


def create_view(c: Out, out: CreateOutcome) -> None:
    if out.refused:
        plan_view(c, out.plan, out.findings)
        return
    if out.dry_run:
        plan_view(c, out.plan, out.findings)
        if out.proof is not None:
            c.print(f"lock: {escape(out.proof.line)}")
        if out.toolchain is not None:
            toolchain_view(c, out.toolchain)
        c.print("[dim]dry run: nothing was written[/dim]")
        return
    if out.aborted:
        return
    if out.created is not None:
        c.print(
            f"[green]created[/green] {escape(str(out.created.prefix))}"
            + (" (replaced the previous env)" if out.created.replaced_existing else "")
        )
        pasted = escape(shlex.quote(str(out.created.prefix)))  # a command to paste: `$` or `'` in the path stay the path's
        if out.conda_here:
            c.print(f"activate with: conda activate {pasted}   or run: envkit run -p {pasted} -- CMD")
        else:  # no conda here: envkit's own activation
            c.print(
                f'activate with: envkit shell -p {pasted} (or eval "$(envkit shell-hook -p {pasted})")   or run: envkit run -p {pasted} -- CMD'
            )
        kernels_view(c, out.created)
    if out.proof is not None:
        if out.proof.proven:
            c.print(f"[green]lock:[/green] {escape(out.proof.line)}")
        else:
            then = (
                "the probe will tell"
                if out.probe is not None
                else f"'envkit probe --attest -p {escape(shlex.quote(str(out.plan.prefix)))}' proves it"
            )
            c.print(f"[yellow]lock:[/yellow] {escape(out.proof.line)}; {then}")
    if out.probe is not None:
        probe_view(c, out.probe)


def _withdrawn_hint(exc: InstallError, records: list[Any], request: CreateRequest, recipe: Recipe) -> InstallError:
    """A locked package whose file is gone from its channel (HTTP 404, or a local channel's file
    missing): the lock pins a build the channel took back, which a re-lock moves."""
    if exc.hint or not any(sign in exc.message for sign in ("404", "No such file or directory")):
        return exc
    gone = [str(r.name.normalized) for r in records if str(r.url).rsplit("/", 1)[-1] in exc.message]
    if not gone:
        return exc
    update = "".join(f" --update {name}" for name in gone)
    return InstallError(
        exc.message,
        hint=f"the lock pins a file its channel no longer has (removed, or marked broken): move it with {_relock(request, recipe, lock_file_for(request.lock, recipe), update)}",
    )


def lock_file_for(request_lock: str | None, recipe: Recipe) -> Path:
    from envkit.team.lock import default_lock_path

    return Path(request_lock).expanduser().absolute() if request_lock else default_lock_path(recipe)


def lock_settings(locked: LockedPlatform) -> ActivationSettings:
    return ActivationSettings(
        tuple(
            Setting(
                EnvOp(str(s["name"]), s["action"], str(s.get("value", "")), tuple(s.get("entries") or ()), str(s.get("separator", ":"))),
                "locked",
                s.get("computed"),
            )
            for s in locked.activation
        )
    )


def _relock(request: CreateRequest, recipe: Recipe, path: Path, flags: str = "") -> str:
    """How to make the lock at `path` again. A team repo's lock is made in a clone of the repo and
    comes back through 'recipes update': envkit's checkout of it is not the place to edit."""
    from envkit.commands.lock import lock_in_a_clone, team_checkout
    from envkit.team.lock import default_lock_path

    source = team_checkout(path)
    if source is not None:
        return lock_in_a_clone(recipe, source, flags)
    elsewhere = request.lock and path != default_lock_path(recipe)  # where lock writes it anyway needs no -o
    return f"'envkit lock {request.recipe}{flags}" + (f" -o {request.lock}'" if elsewhere else "'")


def _add_platform(request: CreateRequest, recipe: Recipe, path: Path, lock: Lock, platform: str) -> str:
    """How a lock comes to hold `platform` and keep the ones it has: a re-lock for `--platform`
    alone would drop them (and one for the recipe's platforms drops one they do not name)."""
    if platform in recipe.platforms:
        return f"lock it again for the recipe's platforms: {_relock(request, recipe, path)}"
    if recipe.platforms:
        where = recipe.located("platforms")
        return f"add {platform} to the recipe's platforms ({where or recipe.origin.path}), then {_relock(request, recipe, path)}"
    flags = "".join(f" --platform {p}" for p in dict.fromkeys([*(p.platform for p in lock.platforms), platform]))
    return f"add it: {_relock(request, recipe, path, flags)}"


def plan_from_lock(
    request: CreateRequest, recipe: Recipe, compiled: CompiledRecipe, prefix: Path, warnings: tuple[str, ...]
) -> tuple[SolveOutcome, LockRef, ProofNote]:
    """No solve: the lock's records for this machine's platform, if the lock has them and is fresh;
    with what its proofs say of this kind of machine."""
    from envkit.team.lock import lock_digest, moved, read_lock
    from envkit.team.proofs import MachineKind, proof_note

    path = lock_file_for(request.lock, recipe)
    if path.is_dir():
        raise UsageError(f"{path} is a directory, not a lock file", hint="move it aside, or give --lock FILE")
    if not path.is_file():
        raise UsageError(f"no lock file at {path}", hint=f"make one: {_relock(request, recipe, path)}; or give --lock FILE")
    lock = read_lock(path)
    platform = backend.native_platform()
    locked = lock.for_platform(platform)
    if locked is None:
        have = ", ".join(p.platform for p in lock.platforms) or "none"
        raise UsageError(f"{path} has no {platform} packages (it locks {have})", hint=_add_platform(request, recipe, path, lock, platform))
    if lock.recipe != recipe.name:  # before staleness: another recipe's lock is not a stale one, nor one --frozen may take
        raise UsageError(f"{path} locks recipe '{lock.recipe}', not '{recipe.name}'", hint="give the lock that belongs to this recipe")
    stale = lock.recipe_digest != resolved_digest(recipe)
    if stale and not request.frozen:
        raise UsageError(
            f"{path} is stale: recipe '{recipe.name}' (or one it extends) changed since it was locked",
            hint=f"re-lock: {_relock(request, recipe, path)}; or pass --frozen to install the lock as it is",
        )
    detected = backend.virtual_packages(platform)
    goal = Target(platform, tuple(detected), machine_gaps(locked.virtual_packages, detected))
    proven = proof_note(lock, locked, MachineKind.of(platform, map(backend.describe_virtual, detected)))  # before the records move
    # the lock keeps the URLs channel names have everywhere: this machine reaches them through its mirrors
    named = [url.removeprefix(f"{DEFAULT_ALIAS}/") for url in lock.channels if url.startswith(f"{DEFAULT_ALIAS}/")]
    here = resolve_channels(named, dict(request.mirrors)) if named else []  # no name, no mirror (nor config to read)
    mirrored = {c.canonical: c for c in here if c.url != c.canonical}
    channels = [mirrored.get(url) or ResolvedChannel(url, url, "lock") for url in lock.channels]
    records = moved(list(locked.records), from_canonical(list(mirrored.values())))
    plan = plan_from_records(
        compiled,
        prefix,
        goal,
        channels,
        list(records),
        activation=resolve(lock_settings(locked)),
        warnings=warnings,
        pip_specs=tuple(p.requirement for p in locked.pip),
        pip_locked=True,
    )
    # stale: `envkit list` says so: the env is not what its recipe asks for
    return SolveOutcome(plan, list(records)), LockRef(str(path), lock_digest(path), frozen=request.frozen, stale=stale), proven


def machine_gaps(locked: tuple[str, ...], detected: list[Any]) -> tuple[str, ...]:
    """What the lock assumed of a machine that this one does not offer (an older glibc, no driver,
    GPUs of a lower compute capability than its builds were picked for)."""
    have = dict(backend.describe_virtual(v).partition("=")[::2] for v in detected)
    gaps = []
    for entry in locked:
        name, _, version = entry.partition("=")
        mine = have.get(name)
        if mine is None:
            gaps.append(
                f"the lock assumes {entry}; this machine has no {name}"
                + (" (no NVIDIA driver: the GPU part cannot be proven here)" if name == "__cuda" else "")
            )
        elif version and name in ("__glibc", "__osx", "__cuda", "__cuda_arch") and _older(mine, version):
            gaps.append(
                f"the lock assumes {entry}; this machine has {name}={mine}"
                + (": builds picked for its GPUs may have no kernels for these (EK038 says which)" if name == "__cuda_arch" else "")
            )
    return tuple(gaps)


def _older(mine: str, wanted: str) -> bool:
    import rattler

    try:
        return bool(rattler.Version(mine) < rattler.Version(wanted))
    except Exception:
        return False


def _conda_here() -> bool:
    """Whether `conda activate` can work here: a conda named by CONDA_EXE (its shell hook sets it)
    or on PATH."""
    import os
    import shutil

    return bool(os.environ.get("CONDA_EXE")) or shutil.which("conda") is not None
