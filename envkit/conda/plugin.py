"""envkit inside the conda users already have (conda's plugin API, entry point group `conda`).

- `conda envkit ...`: every envkit command, with conda's own settings (channel_alias,
  custom_channels, default_channels, envs_dirs, pkgs_dirs from conda's context);
- `conda doctor`: the `envkit-toolchain` health check runs the audit's static rules on the env and
  `conda doctor --fix` applies envkit's safe fixes through conda's confirmation;
- after every conda solve, the `envkit_guard` setting (warn | refuse | off; default warn) judges the
  env as it would be with the audit's plan rules and names the errors the change would introduce;
- `conda env export --format envkit-recipe`: an envkit recipe from any env;
- `conda env export` and `conda export`: the environment.yml conda writes of an envkit env has
  envkit's settings under `variables:` (so `conda env create -f` of it keeps MKL_THREADING_LAYER);
- after `conda remove --all`, `conda env remove` and `conda rename`, the lock file envkit kept
  beside the env that is now gone is taken away, as `envkit remove` takes it.

conda imports this module on every command, so it imports nothing of envkit here: each hook
imports what it needs when it runs. A hook whose import fails (a broken envkit install) says so in
one line and stands aside; conda itself is never stopped by it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conda import plugins
from conda.plugins.types import (
    CondaEnvironmentExporter,
    CondaHealthCheck,
    CondaPostCommand,
    CondaPostSolve,
    CondaPreCommand,
    CondaSetting,
    CondaSubcommand,
)

if TYPE_CHECKING:
    from argparse import Namespace

GUARD_MODES = ("warn", "refuse", "off")
OK_MARK = "✅"
X_MARK = "❌"


def _inactive(what: str, exc: BaseException) -> None:
    print(f"envkit: {what} is inactive: envkit cannot be imported ({type(exc).__name__}: {exc})", file=sys.stderr)


# ------------------------------------------------------------------ conda envkit ...


def run_subcommand(args: tuple[str, ...]) -> int:
    """`conda envkit ARGS`: envkit's CLI under conda's settings. envkit ends the process itself
    (os._exit after flushing): rattler's runtime must not be finalized (envkit.cli.main.hard_exit)."""
    try:
        from envkit.cli.main import run
        from envkit.solve import condaconfig
    except Exception as exc:  # any failure to load envkit leaves conda working
        _inactive("conda envkit", exc)
        return 1
    condaconfig.use(condaconfig.from_context())
    return run(list(args))


@plugins.hookimpl
def conda_subcommands() -> Iterator[CondaSubcommand]:
    yield CondaSubcommand(
        name="envkit",
        summary="Consistent numeric toolchains (BLAS, OpenMP, threading) for conda envs: envkit's commands.",
        action=run_subcommand,
    )


# ------------------------------------------------------------------ conda doctor


def doctor_check(prefix: str, verbose: bool) -> None:
    try:
        from envkit.conda.hooks import doctor_report
    except Exception as exc:
        _inactive("the envkit-toolchain health check", exc)
        return
    findings = doctor_report(prefix)
    if not findings:
        print(f"{OK_MARK} No BLAS, OpenMP or threading hazards found by envkit's audit rules.\n")
        return
    print(f"{X_MARK} envkit found toolchain hazards in {prefix}:")
    for line in findings:
        print(f"  {line}")
    print()


def doctor_fix(prefix: str, args: Namespace, confirm: Any) -> int:
    try:
        from envkit.conda.hooks import doctor_fix_plan
    except Exception as exc:
        _inactive("the envkit-toolchain fixer", exc)
        return 1
    from conda.base.context import context

    if context.protect_frozen_envs:  # conda doctor's own --override-frozen turns it off
        from envkit.prefix.protect import frozen_env

        frozen = frozen_env(Path(prefix))
        if frozen is not None:
            refused = frozen.refusal("fix")
            print(f"envkit: error: {refused.message} ({refused.hint})", file=sys.stderr)
            return 1
    plan = doctor_fix_plan(prefix)
    if plan is None:
        print("envkit: nothing to fix with a safe fix (see 'conda envkit audit' for the rest).")
        return 0
    print(plan.diff, end="" if plan.diff.endswith("\n") else "\n")
    for reason in plan.reasons:
        print(f"  {reason}")
    confirm("Apply envkit's fixes?")  # raises on no, and in dry-run mode
    from envkit.audit.fix import apply_fix
    from envkit.core.errors import EnvkitError

    try:
        written = apply_fix(plan)
    except EnvkitError as exc:  # changed or locked since the plan was shown: nothing was written
        print(f"envkit: error: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""), file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


@plugins.hookimpl
def conda_health_checks() -> Iterator[CondaHealthCheck]:
    yield CondaHealthCheck(
        name="envkit-toolchain",
        action=doctor_check,
        fixer=doctor_fix,
        summary="BLAS/OpenMP/threading hazards (envkit's audit rules: the mkl-service + libgomp crash, two OpenMP runtimes, ...)",
        fix="Write envkit's safe fixes: activation scripts with MKL_THREADING_LAYER=GNU and the like",
    )


# ------------------------------------------------------------------ the guard after each solve


def _guard_mode() -> str:
    from conda.base.context import context

    mode = str(getattr(context.plugins, "envkit_guard", "warn") or "warn").strip().lower()
    return mode if mode in GUARD_MODES else "warn"


def guard(repodata_fn: str, unlink_precs: tuple[Any, ...], link_precs: tuple[Any, ...]) -> None:
    mode = _guard_mode()
    if mode == "off":
        return
    from conda.base.context import context

    try:
        from envkit.conda.hooks import judge_transaction, stale_request_moves

        moves = stale_request_moves(context.target_prefix, unlink_precs, link_precs)
    except Exception as exc:
        _inactive("envkit_guard", exc)
        return
    if moves:
        print("envkit_guard: this change moves the env away from its recipe because of a request conda kept:", file=sys.stderr)
        for line in moves:
            print(f"  {line}", file=sys.stderr)
    verdict = judge_transaction(context.target_prefix, unlink_precs, link_precs)
    if not verdict:
        return
    print("envkit_guard: this change would bring toolchain errors into the env:", file=sys.stderr)
    for line in verdict:
        print(f"  {line}", file=sys.stderr)
    if mode == "refuse":
        from conda.exceptions import CondaError

        raise CondaError(
            "envkit_guard refused the transaction (see the findings above; "
            "'conda envkit audit --explain ID' says why; `plugins: {envkit_guard: warn}` in .condarc lets such changes through)"
        )
    print("  (envkit_guard is warn: `plugins: {envkit_guard: refuse}` in .condarc stops such changes)", file=sys.stderr)


@plugins.hookimpl
def conda_post_solves() -> Iterator[CondaPostSolve]:
    yield CondaPostSolve(name="envkit-guard", action=guard)


def _guard_validation(value: str) -> str | bool:
    return True if str(value).strip().lower() in GUARD_MODES else f"envkit_guard must be one of {', '.join(GUARD_MODES)}, not {value!r}"


@plugins.hookimpl
def conda_settings() -> Iterator[CondaSetting]:
    from conda.common.configuration import PrimitiveParameter

    yield CondaSetting(
        name="envkit_guard",
        description="What envkit does when a conda transaction would bring a toolchain error into an env: warn, refuse or off.",
        parameter=PrimitiveParameter("warn", element_type=str, validation=_guard_validation),
    )


# ------------------------------------------------------------------ after conda removes or renames an env

REMOVING_COMMANDS = {"remove", "env_remove", "rename"}  # conda's names for them (its main_*.py modules)


def tidy_after(command: str) -> None:
    """The env conda worked on (the source of a rename), if it is gone now: its envkit lock file
    goes too. A package removal leaves the env, and so the lock file."""
    from conda.base.context import context

    prefix = Path(context.target_prefix)
    if prefix.exists() or prefix.is_symlink():  # nothing gone (a package removal): nothing to load
        return
    try:
        from envkit.install.transaction import discard_lock_of_gone_env
    except Exception as exc:
        _inactive("the lock file's removal after conda removed an env", exc)
        return
    discard_lock_of_gone_env(prefix)


@plugins.hookimpl
def conda_post_commands() -> Iterator[CondaPostCommand]:
    yield CondaPostCommand(name="envkit-tidy-removed-env", action=tidy_after, run_for=REMOVING_COMMANDS)


# ------------------------------------------------------------------ conda's own export keeps envkit's settings

EXPORTING_COMMANDS = {"export"}  # conda export and conda env export (both run conda/cli/main_export.py)


def settings_into_export(command: str) -> None:
    try:
        from envkit.conda.hooks import settings_into_conda_export

        settings_into_conda_export()
    except Exception as exc:
        _inactive("envkit's settings in conda's export", exc)


@plugins.hookimpl
def conda_pre_commands() -> Iterator[CondaPreCommand]:
    yield CondaPreCommand(name="envkit-settings-in-export", action=settings_into_export, run_for=EXPORTING_COMMANDS)


# ------------------------------------------------------------------ conda env export --format envkit-recipe


def export_recipe(environment: Any) -> str:
    from envkit.conda.hooks import recipe_for_environment

    return recipe_for_environment(environment)


@plugins.hookimpl
def conda_environment_exporters() -> Iterator[CondaEnvironmentExporter]:
    yield CondaEnvironmentExporter(
        name="envkit-recipe",
        aliases=("envkit",),
        default_filenames=(),  # a recipe's file is named after the recipe: no fixed name to detect
        export=export_recipe,
        description="an envkit recipe: toolchain inferred, activation variables kept",
    )
