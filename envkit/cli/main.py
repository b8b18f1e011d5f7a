"""Argument parsing and dispatch only: every command is a plain function in envkit.commands.

The process ends through `run()`, never through interpreter finalization: py-rattler completes
each awaited future from a tokio worker thread that runs Python code (asyncio's
call_soon_threadsafe) under the GIL. The main thread can get the GIL back in the middle of that
call, see its result, print, and finalize the interpreter while the worker is still inside Python;
the worker then dies in method_dealloc (SIGSEGV) or in PyGILState_Release (SIGABRT), and the
exit code no longer says what happened. pyo3-async-runtimes offers no way to stop its runtime
(PyO3/pyo3-async-runtimes#40), so envkit flushes its output and leaves with os._exit, which ends
every thread at once. bench/stress_exit.py measures it.

rich is imported only to draw on a terminal, or what plain text cannot lay out as rich would (a
tree): `envkit --version`, JSON output, a no-op `envkit sync` and the output of a create, lock or
sync to a pipe or a file never load it (envkit.cli.plainout says why).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

from envkit import __version__
from envkit.core import stdio
from envkit.core.errors import EXIT_CODE_MEANINGS, EnvkitError, ExitCode, Interrupted, OutputError, UsageError, one_line, os_refusal

if TYPE_CHECKING:
    from rich.console import Console

    from envkit.cli.console import Out
    from envkit.commands import Result

EPILOG = "exit codes (envkit run: otherwise the command's own):\n" + "\n".join(
    f"  {int(code):>3}  {meaning}" for code, meaning in EXIT_CODE_MEANINGS.items()
)
SHELLS = ("bash", "zsh", "dash", "sh", "posix", "fish", "csh", "tcsh", "cmd", "cmd.exe", "powershell", "pwsh")
EXPORT_FORMATS = ("environment-yml", "explicit", "dockerfile", "lock", "conda-lock", "lmod", "modulefile")


def terminal_columns() -> int:
    """The width shutil.get_terminal_size gives (COLUMNS, else the terminal's, else 80), found without
    importing shutil, which loads the bz2 and lzma modules: argparse imports it for every argument
    it adds (it makes a help formatter to check the argument's metavar)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class HelpFormatter(argparse.HelpFormatter):
    """argparse's own, at the width it would take (terminal_columns)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, terminal_columns() - 2 if width is None else width)


class RawEpilogFormatter(HelpFormatter):
    """The epilog's table as written, one exit code a line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line for line in text.splitlines(keepends=True))


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing and exiting, so `--json` gets its document too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, hint=f"see '{self.prog} --help'")


# ------------------------------------------------------------------ the parser


def _json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one versioned JSON document on stdout")


def _given(text: str) -> str:
    """An env name, prefix, file, channel or rule: an empty one names nothing (conda refuses it too),
    and was taken as not given, so `-p "$UNSET_VAR"` went to the default env and `--lock "$UNSET_VAR"`
    solved afresh instead of installing the lock."""
    if not text:
        raise argparse.ArgumentTypeError("needs a value, not an empty string")
    return text


def _env_args(p: argparse.ArgumentParser, default: str = "the active env") -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument("-n", "--name", type=_given, help=f"env name (as in 'conda env list'); default: {default}")
    group.add_argument("-p", "--prefix", type=_given, help=f"env prefix path; default: {default}")


def _channel_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--channel", action="append", default=[], type=_given, help="add a channel (before the recipe's)")
    p.add_argument("--override-channels", action="store_true", help="use only the -c channels")
    p.add_argument("--mirror", action="append", default=[], metavar="NAME=URL", help="map a channel name to a mirror URL")


def _lock_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--locked", action="store_true", help=f"{what} the lock beside the recipe (envkit lock writes it); no solve")
    p.add_argument("--lock", type=_given, metavar="FILE", help=f"{what} this lock file; no solve")
    p.add_argument("--frozen", action="store_true", help="use the lock even if the recipe changed since it was made")


def _args_recipes(recipes: Parser) -> None:
    rsub = recipes.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=Parser)
    p = rsub.add_parser("list", help="every recipe and where it comes from")
    _json_flag(p)
    p = rsub.add_parser("show", help="a recipe, or with --resolved the specs and settings it compiles to")
    p.add_argument("recipe", help="recipe name or path to a .yaml file")
    p.add_argument("--resolved", action="store_true", help="show the compiled conda/pip specs and activation settings")
    p.add_argument("--platform", metavar="P", help="compile for this platform (default: this machine's), its per_platform entry applied")
    _json_flag(p)
    p = rsub.add_parser("validate", help="check recipe files (schema, extends, consistency)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="recipe files or names")
    _json_flag(p)
    p = rsub.add_parser("check", help="for a recipe repo's CI: every recipe valid, its lock present and fresh, each platform solvable")
    p.add_argument("paths", nargs="*", metavar="PATH", help="recipe files or directories of them (default: .)")
    _json_flag(p)
    p = rsub.add_parser("add-source", help="add a git repository of recipes, pinned to a commit")
    p.add_argument("url", type=_given, help="git URL (https, ssh, file://) or a local path")
    p.add_argument("--name", type=_given, help="source name (default: from the URL)")
    p.add_argument("--ref", type=_given, help="branch, tag or commit (default: the remote's default branch)")
    _json_flag(p)
    p = rsub.add_parser("remove-source", help="forget a recipe repo and delete envkit's checkout of it")
    p.add_argument("source", help="the source's name")
    _json_flag(p)
    p = rsub.add_parser("update", help="fetch recipe repos, show what changed, then move the pins")
    p.add_argument("source", nargs="?", help="one source by name (default: all)")
    p.add_argument("--check", action="store_true", help="show what would change; move nothing")
    _json_flag(p)


def _args_create(p: Parser) -> None:
    p.add_argument("recipe", help="recipe name or path to a .yaml file")
    group = p.add_mutually_exclusive_group()
    group.add_argument("-n", "--name", type=_given, help="env name (default: the recipe's name)")
    group.add_argument("-p", "--prefix", type=_given, help="env prefix path")
    _channel_args(p)
    _lock_args(p, "install")
    p.add_argument(
        "--platform", metavar="P", help="with --dry-run: solve and show the plan for another platform (linux-64, osx-arm64, win-64, ...)"
    )
    p.add_argument("--dry-run", action="store_true", help="solve, audit and show the plan; write nothing")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--force", action="store_true", help="replace an existing env (kept if the new one fails)")
    _override_frozen_flag(p, "with --force, replace")
    p.add_argument("--no-probe", action="store_true", help="skip the post-install probe")
    _json_flag(p)


def _update_args(p: Parser, *, kept: str, afresh: str) -> None:
    """lock and sync keep what they have where the recipe allows: these let packages move."""
    p.add_argument(
        "--update",
        action="append",
        default=[],
        type=_given,
        metavar="NAME",
        help=f"let this package move to what the recipe allows now (repeatable; {kept})",
    )
    p.add_argument("--update-all", action="store_true", help=f"solve the recipe afresh: {afresh}")


def _args_lock(p: Parser) -> None:
    p.add_argument("recipe", help="recipe name or path to a .yaml file")
    p.add_argument(
        "--platform", action="append", default=[], metavar="P", help="lock this platform (repeatable; default: the recipe's platforms)"
    )
    p.add_argument(
        "-o",
        "--output",
        type=_given,
        metavar="FILE",
        help="where to write it, - for stdout (default: NAME.lock beside the recipe, ./NAME.lock for built-ins)",
    )
    _update_args(p, kept="the lock's other pins are kept where they still fit", afresh="keep none of the lock's pins")
    p.add_argument("--dry-run", action="store_true", help="solve and show what the lock would change; write nothing")
    _channel_args(p)
    _json_flag(p)


def _args_sync(p: Parser) -> None:
    _env_args(p)
    _lock_args(p, "sync to")
    p.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--no-probe", action="store_true", help="skip the probe after the change")
    _update_args(
        p, kept="conda's names or pip's; what else envkit installed stays where it still fits", afresh="every package and wheel may move"
    )
    _override_frozen_flag(p, "sync")
    _json_flag(p)


def _args_export(p: Parser) -> None:
    _env_args(p)
    p.add_argument(
        "--lock",
        type=_given,
        metavar="FILE",
        help="export this lock instead of an env: conda-lock takes every platform it holds, the others one (see --platform)",
    )
    p.add_argument(
        "--platform",
        action="append",
        default=[],
        metavar="P",
        help="with --lock: the platform to write (default: this machine's, a Dockerfile's the lock's Linux one; repeatable for conda-lock)",
    )
    p.add_argument(
        "--format",
        required=True,
        choices=EXPORT_FORMATS,
        help="environment-yml | explicit | dockerfile | lock | conda-lock | lmod | modulefile",
    )
    p.add_argument("-o", "--output", type=_given, metavar="FILE", help="write to FILE, - for stdout (default: stdout)")
    p.add_argument(
        "--base",
        type=_given,
        metavar="IMAGE",
        help="dockerfile: the image it starts FROM, one with conda on its PATH (default: condaforge/miniforge3:latest)",
    )
    _json_flag(p)


def _override_frozen_flag(p: Parser, doing: str) -> None:
    p.add_argument(
        "--override-frozen",
        action="store_true",
        help=f"{doing} an env marked frozen (conda-meta/frozen, CEP 22) all the same; at your own risk, as with conda's flag",
    )


def _args_list(p: Parser) -> None:
    _json_flag(p)


def _args_remove(p: Parser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("-n", "--name", type=_given, help="env name")
    group.add_argument("-p", "--prefix", type=_given, help="env prefix path")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation (required off a terminal)")
    _override_frozen_flag(p, "remove")
    _json_flag(p)


def _args_probe(p: Parser) -> None:
    _env_args(p)
    _json_flag(p)
    p.add_argument(
        "--slurm",
        nargs=argparse.REMAINDER,
        metavar="SBATCH_ARG",
        help="run the probe as a Slurm batch job and wait for it; what follows goes to sbatch (e.g. --slurm -p gpu --gres=gpu:2)",
    )


def _args_audit(p: Parser) -> None:
    p.add_argument("targets", nargs="*", metavar="NAME|PREFIX", help="envs to audit (default: -n/-p, else the active env)")
    _env_args(p)
    p.add_argument("--all", action="store_true", help="every env conda knows about, its base included")
    p.add_argument("--probe", action="store_true", help="also run the live probe")
    p.add_argument("--fix", action="store_true", help="apply safe fixes (activation scripts, envkit's record); shows the diff first")
    p.add_argument("-y", "--yes", action="store_true", help="apply fixes without asking (required off a terminal)")
    _override_frozen_flag(p, "with --fix, fix")
    p.add_argument("--explain", type=_given, metavar="RULE", help="explain one rule (EK001, RC003, or a slug) and exit")
    p.add_argument("--list-rules", action="store_true", help="list the rule catalog and exit")
    p.add_argument(
        "--min-severity",
        default="info",
        choices=("info", "warning", "error"),
        help="report findings of this severity and above (default: info)",
    )
    p.add_argument(
        "--fail-on",
        default="error",
        choices=("info", "warning", "error"),
        help="exit 1 on a finding of this severity or above (default: error; warning makes drift, EK024, fail CI)",
    )
    _json_flag(p)


def _args_toolchain(p: Parser) -> None:
    _env_args(p)
    _json_flag(p)


def _args_activation(act: Parser) -> None:
    asub = act.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=Parser)
    p = asub.add_parser("show", help="print the settings and the script for one shell")
    _env_args(p)
    p.add_argument("--shell", default="bash", choices=SHELLS, metavar="SHELL", help=f"one of {', '.join(SHELLS)} (default: bash)")
    _json_flag(p)


def _args_run(p: Parser) -> None:
    _env_args(p)
    _json_flag(p)
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command and its arguments")


def _args_shell(p: Parser) -> None:
    _env_args(p)
    p.add_argument("--shell", type=_given, metavar="SHELL", help="the shell to start (default: $SHELL)")


def _args_shell_hook(p: Parser) -> None:
    _env_args(p)
    p.add_argument("--shell", type=_given, metavar="SHELL", help="bash, zsh, dash, sh, fish, csh or tcsh (default: $SHELL)")
    p.add_argument("--deactivate", action="store_true", help="print what undoes the activation this shell evaluated")


# name, one line of help, what adds the command's arguments
COMMANDS: tuple[tuple[str, str, Callable[[Parser], None]], ...] = (
    ("recipes", "list, show, validate, check recipes; manage recipe repos", _args_recipes),
    ("create", "solve a recipe (or install its lock) and create the env, activation scripts and probe", _args_create),
    ("lock", "solve a recipe for each of its platforms and write a lock file (rattler's format)", _args_lock),
    ("sync", "bring an existing env to its recipe (or lock) in place, all or nothing", _args_sync),
    ("export", "write an env for other tools: environment.yml, @EXPLICIT, Dockerfile, lock", _args_export),
    ("list", "envs conda knows, with their recipe, source commit, created date, health and drift", _args_list),
    ("remove", "remove an env and its registry line (like conda env remove)", _args_remove),
    ("probe", "run the toolchain probe inside an env and record its health", _args_probe),
    ("audit", "find toolchain and threading hazards in existing envs", _args_audit),
    ("toolchain", "which package or wheel provides each BLAS, OpenMP and torch library, who brought it, what conflicts", _args_toolchain),
    ("activation", "what an env's activation does", _args_activation),
    ("run", "run a command under an env's activation (like conda run); exits with its code", _args_run),
    ("shell", "start your shell with an env activated (no conda needed); exit leaves it", _args_shell),
    ("shell-hook", 'print an env\'s activation for eval "$(envkit shell-hook -n ENV)" (no conda needed)', _args_shell_hook),
)


def command_in(argv: Sequence[str]) -> str | None:
    """The command argv names, when it names one before any help flag: only that command's
    arguments need building (argparse's per-argument cost is most of a quick command's start)."""
    names = {name for name, _, _ in COMMANDS}
    for arg in argv:
        if arg in ("-h", "--help"):
            return None
        if not arg.startswith("-"):
            return arg if arg in names else None
    return None


def build_parser(only: str | None = None) -> Parser:
    """Every command, with its arguments; with `only` (a command argv names, command_in), that
    command alone: each parser argparse makes costs a fraction of a millisecond, and a command
    named is the only one its arguments can reach."""
    parser = Parser(
        prog="envkit",
        description="Consistent numeric toolchains for conda envs, proven by a probe.",
        epilog=EPILOG,
        formatter_class=RawEpilogFormatter,
    )
    parser.add_argument("--version", action="version", version=f"envkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for name, text, add_arguments in COMMANDS:
        if only is None or only == name:
            add_arguments(sub.add_parser(name, help=text))
    return parser


# ------------------------------------------------------------------ the terminal side


class UI:
    """Where a command talks to a person: consoles made on first use, and whether one can be asked.
    `stdout_taken`: stdout carries something else (--json's document, `-o /dev/stdout`'s file), so
    what envkit says goes to stderr."""

    def __init__(self, as_json: bool, stdout_taken: bool = False) -> None:
        self.as_json = as_json
        self.stdout_taken = as_json or stdout_taken
        self.interactive = sys.stdin.isatty() and sys.stdout.isatty() and not as_json

    @functools.cached_property
    def out(self) -> Out:
        """Plans and results: stderr when stdout is taken; rich's console, unwrapped off a terminal."""
        from envkit.cli.console import console

        return console(stderr=self.stdout_taken)

    @functools.cached_property
    def terminal(self) -> Console:
        """rich's console, for questions and progress bars: used only when interactive, where it
        is `out` itself."""
        from rich.console import Console

        from envkit.cli.console import rich_console

        out = self.out
        return out if isinstance(out, Console) else rich_console(sys.stderr if self.stdout_taken else sys.stdout, None)

    def ask(self, question: str) -> bool:
        """Yes only for y or yes; Ctrl-D (the end of input) is a no, as the default is."""
        try:
            answer = self.terminal.input(f"{question} [y/N] ", markup=False)
        except EOFError:
            self.terminal.print()
            return False
        return answer.strip().lower() in ("y", "yes")


Shown = bool  # whether the handler already showed its result to the person
Handler = Callable[[argparse.Namespace, UI], "tuple[Result, Shown]"]


def _recipes(args: argparse.Namespace, ui: UI) -> tuple[Result, Shown]:
    from envkit.commands import recipes

    if args.action == "list":
        return recipes.list_recipes(), False
    if args.action == "show":
        return recipes.show_recipe(args.recipe, args.resolved, args.platform), False
    if args.action == "validate":
        return recipes.validate(args.paths), False
    if args.action == "check":
        return recipes.check(args.paths), False
    if args.action == "add-source":
        return recipes.add(args.url, args.name, args.ref), False
    if args.action == "remove-source":
        return recipes.remove(args.source), False
    return recipes.update(args.source, args.check), False


def _create(args: argparse.Namespace, ui: UI) -> tuple[Result, Shown]:
    from envkit.cli.render import render_plan
    from envkit.commands.create import CreateRequest, create
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
    result = create(
        request,
        show_plan=None if ui.as_json else (lambda plan, findings: render_plan(ui.out, plan, findings)),
        confirm=(lambda plan: ui.ask("Proceed?")) if ui.interactive and not args.yes else None,
        reporter=reporter,
    )
    return result, False


def _lock(args: argparse.Namespace, ui: UI) -> tuple[Result, Shown]:
    from envkit.commands.lock import lock
    from envkit.solve.channels import parse_mirror_flags

    result = lock(
        args.recipe,
        platforms=tuple(args.platform),
        output=args.output,
        extra_channels=tuple(args.channel),
        override_channels=args.override_channels,
        mirrors=tuple(parse_mirror_flags(args.mirror).items()),
        update=tuple(args.update),
        update_all=args.update_all,
        dry_run=args.dry_run,
    )
    return result, False


def _sync(args: argparse.Namespace, ui: UI) -> tuple[Result, Shown]:
    from envkit.install.transaction import settle_before_change
    from envkit.prefix.envs import select_env

    if not args.dry_run:
        settle_before_change(args.name, args.prefix)
    prefix = select_env(args.name, args.prefix)
    if (args.update or args.update_all) and (args.locked or args.lock or args.frozen):
        raise UsageError(
            "--update moves packages within the recipe, and a lock pins them",
            hint="re-lock with 'envkit lock --update NAME', then sync --locked",
        )
    if not (args.frozen or args.update or args.update_all):  # the quick answer, before YAML, the solver or rich are loaded
        from envkit.commands.sync_quick import quick

        done = quick(prefix, locked=args.locked, lock=args.lock, dry_run=args.dry_run, override_frozen=args.override_frozen)
        if done is not None:
            return done, False
    from envkit.install.inplace import Installer

    # the installer child waits (reading the env's records) while this process loads the rest
    with contextlib.nullcontext(None) if args.dry_run else Installer() as early:
        from envkit.cli.render import render_sync
        from envkit.commands.sync import sync
        from envkit.team.sync import SyncOutcome

        def show(changes: SyncOutcome) -> None:
            render_sync(ui.out, changes)

        result = sync(
            prefix,
            locked=args.locked,
            lock=args.lock,
            frozen=args.frozen,
            update=tuple(args.update),
            update_all=args.update_all,
            dry_run=args.dry_run,
            probe=not args.no_probe,
            override_frozen=args.override_frozen,
            show=None if ui.as_json else show,
            confirm=(lambda changes: ui.ask("Apply these changes?")) if ui.interactive and not args.yes else None,
            installer=early,
        )
    return result, False


def _export(args: argparse.Namespace, ui: UI) -> tuple[Result, Shown]:
    from envkit.commands.export import export_env, export_lock
    from envkit.prefix.envs import select_env

    if args.lock is not None:
        if args.name or args.prefix:
            raise UsageError("give either an env (-n NAME or -p PREFIX) or --lock FILE, not both")
        return export_lock(args.lock, args.format, args.output, platforms=tuple(args.platform), base=args.base), False
    if args.platform:
        raise UsageError(
            f"--platform {args.platform[0]} picks a platform of a lock, and an env is of its own",
            hint="leave out --platform, or export a lock with --lock FILE",
        )
    return export_env(select_env(args.name, args.prefix), args.format, args.output, base=args.base), False


def _list(args: argparse.Namespace, ui: UI) -> tuple[Result, Shown]:
    from envkit.commands.envs import list_envs

    return list_envs(), False


def _toolchain(args: argparse.Namespace, ui: UI) -> tuple[Result, Shown]:
    from envkit.commands.toolchain import toolchain
    from envkit.prefix.envs import select_env

    return toolchain(select_env(args.name, args.prefix)), False


def _remove(args: argparse.Namespace, ui: UI) -> tuple[Result, Shown]:
    from envkit.commands.envs import must_be_removable, remove
    from envkit.install.transaction import settle_before_change
    from envkit.prefix.envs import select_env

    settle_before_change(args.name, args.prefix)
    prefix = select_env(args.name, args.prefix)
    must_be_removable(prefix, override_frozen=args.override_frozen)
    if not args.yes:
        if not ui.interactive:
            raise UsageError(f"removing {prefix} needs a confirmation", hint="pass --yes (or -y) off a terminal")
        if not ui.ask(f"Remove {prefix} and everything in it?"):
            from envkit.commands import Result

            return Result("remove", None, messages=("aborted: nothing was removed",)), False
    return remove(prefix, override_frozen=args.override_frozen), False


def _probe(args: argparse.Namespace, ui: UI) -> tuple[Result, Shown]:
    from envkit.commands.probe import probe
    from envkit.prefix.envs import select_env

    def submitted(job: str) -> None:
        sys.stderr.write(f"submitted Slurm job {job}; waiting for it to end (Ctrl-C cancels it)\n")
        sys.stderr.flush()

    return probe(select_env(args.name, args.prefix), args.slurm, submitted), False


def _audit(args: argparse.Namespace, ui: UI) -> tuple[Result, Shown]:
    from envkit.commands import Result, audit

    if args.explain is not None:
        return audit.explain(args.explain), False
    if args.list_rules:
        return Result("audit rules", audit.list_rules()), False
    result = audit.audit(
        args.targets,
        name=args.name,
        prefix=args.prefix,
        all_envs_flag=args.all,
        probe=args.probe,
        fix=args.fix,
        min_severity=args.min_severity,
        fail_on=args.fail_on,
        override_frozen=args.override_frozen,
    )
    if not audit.fixes_pending(result):
        return result, False
    if args.yes:
        return audit.apply_fixes(result), False
    if ui.as_json:
        return audit.not_applied(result, "pass -y to apply them (no confirmation is asked with --json)"), False
    from envkit.cli.render import render_human

    render_human(ui.out, result)
    if not ui.interactive:
        return audit.not_applied(result, "no terminal to confirm on: re-run with -y to apply them"), True
    if ui.ask("Apply these changes?"):
        applied = audit.apply_fixes(result)
        render_human(ui.out, audit.after_only(applied))
        return applied, True
    return audit.not_applied(result, "aborted: nothing was changed"), True


def _activation(args: argparse.Namespace, ui: UI) -> tuple[Result, Shown]:
    from envkit.commands.activation import show
    from envkit.prefix.envs import select_env

    return show(select_env(args.name, args.prefix), args.shell), False


def _run(args: argparse.Namespace, ui: UI) -> tuple[Result, Shown]:
    from envkit.commands.activation import run
    from envkit.prefix.envs import select_env

    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    return run(select_env(args.name, args.prefix), argv, capture=ui.as_json), True


def _shell(args: argparse.Namespace, ui: UI) -> tuple[Result, Shown]:
    from envkit.commands.shell import shell
    from envkit.prefix.envs import select_env

    return shell(select_env(args.name, args.prefix), args.shell), True


def _shell_hook(args: argparse.Namespace, ui: UI) -> tuple[Result, Shown]:
    from envkit.commands.shell import hook
    from envkit.prefix.envs import select_env

    if args.deactivate:
        if args.name or args.prefix:
            raise UsageError("--deactivate undoes the env this shell activated: give no -n or -p with it")
        result = hook(None, args.shell, deactivate=True)
    else:
        result = hook(select_env(args.name, args.prefix), args.shell)
    sys.stdout.write(str(result.data))  # the text to eval, as it is
    for message in result.messages:
        sys.stderr.write(f"envkit: {one_line(message)}\n")
    return replace(result, messages=()), True


HANDLERS: dict[str, Handler] = {
    "recipes": _recipes,
    "create": _create,
    "lock": _lock,
    "sync": _sync,
    "export": _export,
    "toolchain": _toolchain,
    "list": _list,
    "remove": _remove,
    "probe": _probe,
    "audit": _audit,
    "activation": _activation,
    "run": _run,
    "shell": _shell,
    "shell-hook": _shell_hook,
}


# ------------------------------------------------------------------ running one command


def _wants_json(argv: Sequence[str]) -> bool:
    return "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit code; output is written and flushed. -N (subprocess's
    convention): the command `envkit run` ran ended by signal N, and envkit is to end by it too."""
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = _wants_json(argv)
    from envkit.core.interrupts import terminate_as_interrupt

    terminate_as_interrupt()
    if not [arg for arg in argv if arg != "--json"]:  # bare `envkit`: what it can do, and the usage error's exit code
        sys.stderr.write(build_parser().format_help())
        return int(ExitCode.USAGE)
    named = command_in(argv)
    try:
        args = build_parser(named).parse_args(argv)
    except SystemExit as exc:  # --help and --version print and exit 0
        return int(exc.code or 0)
    except UsageError as exc:
        return _report_error(_with_suggestion(exc, argv, named), as_json, command=named or "")
    except EnvkitError as exc:
        return _report_error(exc, as_json, command=named or "")
    as_json = bool(getattr(args, "json", False))
    output: str | None = getattr(args, "output", None)
    stdout_taken = False
    if output:
        from envkit.core.fsutil import is_stdout

        stdout_taken = is_stdout(output)
    command = " ".join(x for x in (args.command, getattr(args, "action", None)) if x)
    if as_json and stdout_taken:  # the JSON document and the file would be one stream
        clash = UsageError(f"--json and -o {output} both write to stdout", hint="write the file elsewhere (-o FILE), or leave out --json")
        return _report_error(clash, False, command)
    ui = UI(as_json, stdout_taken=stdout_taken)
    from envkit.core.notices import collecting

    with collecting() as notices:
        try:
            result, shown = HANDLERS[args.command](args, ui)
        except EnvkitError as exc:
            _tell(notices)
            return _report_error(exc, as_json, command)
        except KeyboardInterrupt:
            _tell(notices)
            return _report_error(Interrupted("interrupted"), as_json, command)
        except PermissionError as exc:  # another's env, channel or cache: not a bug, and nothing to trace
            _tell(notices)
            where = exc.filename or "a file envkit needed"
            denied = UsageError(
                f"permission denied: {where} ({exc.strerror or 'not allowed'})",
                hint="run it as a user who may do this there (an env's owner), or ask its owner for access",
            )
            return _report_error(denied, as_json, command)
        except OSError as exc:  # a full disk, a quota, a read-only filesystem, a file in the way: not a bug either
            refused = os_refusal(exc)
            if refused is None:
                raise
            _tell(notices)
            return _report_error(refused, as_json, command)
    if notices:
        result = replace(result, messages=(*notices, *result.messages))
    if as_json:
        from envkit.cli.envelope import envelope, print_json

        print_json(envelope(result, command=result.command, exit_code=result.exit_code))
    elif shown or getattr(result.data, "noop", False) or result.data is None:
        for message in result.messages:  # plain text: nothing here needs rich
            (sys.stderr if ui.stdout_taken else sys.stdout).write(one_line(message) + "\n")
    else:
        from envkit.cli.render import render_human

        render_human(ui.out, result)
    return -result.end_signal if result.end_signal else result.exit_code


def _with_suggestion(exc: UsageError, argv: list[str], named: str | None) -> UsageError:
    """argparse's error with a did-you-mean: the command or flag nearest the one typed."""
    import difflib
    import re

    typed: list[str] = []
    candidates: list[str] = []
    if (choice := re.search(r"invalid choice: '([^']*)'", exc.message)) and named is None:
        typed, candidates = [choice.group(1)], [name for name, _, _ in COMMANDS]
    elif exc.message.startswith("unrecognized arguments: "):
        typed = [a.split("=", 1)[0] for a in exc.message.removeprefix("unrecognized arguments: ").split() if a.startswith("-")]
        parser = build_parser(named)
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        sub = actions[0].choices.get(named) if actions and named else parser
        candidates = [option for action in (sub or parser)._actions for option in action.option_strings]
    for word in typed:
        near = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
        if near:
            return UsageError(exc.message, hint=f"did you mean '{near[0]}'? {exc.hint}" if exc.hint else f"did you mean '{near[0]}'?")
    return exc


def _tell(notices: list[str]) -> None:
    """Notices of a command that then failed: on stderr (a JSON error document has no messages)."""
    for text in notices:
        sys.stderr.write(f"envkit: {one_line(text)}\n")


def _report_error(exc: EnvkitError, as_json: bool, command: str) -> int:
    code = int(exc.exit_code)
    if isinstance(exc, OutputError):
        stdio.tell_refusal(exc)
        return code
    if as_json:
        from envkit.cli.envelope import envelope, print_json

        try:
            print_json(envelope(None, command=command, exit_code=code, errors=exc.plain_lines(), hint=exc.hint))
            sys.stdout.flush()
            return code
        except OutputError as refused:  # the error document cannot be written: both on stderr
            stdio.tell_refusal(refused)
    for line in exc.lines():
        sys.stderr.write(f"envkit: error: {one_line(line)}\n")
    return code


def hard_exit(code: int) -> NoReturn:
    """Flush what was written and end the process without interpreter finalization (see above);
    -N: end by signal N (see main)."""
    try:
        sys.stdout.flush()
    except OutputError as exc:  # the result never reached its reader: not a success
        stdio.tell_refusal(exc)
        if code in (ExitCode.OK, ExitCode.FINDINGS):
            code = int(exc.exit_code)
    except (OSError, ValueError, AttributeError):  # a closed pipe, or no stdout at all: nothing more can be said
        pass
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    if code < 0:
        _end_by_signal(-code)
    os._exit(code)


def _end_by_signal(signum: int) -> NoReturn:
    """Die of `signum`, as sudo does when its command did: a shell loop stops on a Ctrl-C only when
    the command it ran died of SIGINT (an exit code of 130 says the command handled it), and a
    job scheduler tells a kill from an exit the same way. A signal that does not end a process
    ends it with 128 + N."""
    import resource
    import signal

    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))  # its core, not envkit's
    with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
        signal.signal(signum, signal.SIG_DFL)
    with contextlib.suppress(OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
    os._exit(128 + signum)


def run(argv: Sequence[str] | None = None) -> NoReturn:
    """Run one command and end the process (the console script, `python -m envkit`, `conda envkit`)."""
    stdio.open_closed_streams()
    stdio.check_stdout()
    try:
        code = main(argv)
    except BrokenPipeError:  # `envkit audit | head`: the reader has all it wanted; nothing to say to it
        code = int(ExitCode.OUTPUT_CLOSED)
    except OutputError as exc:  # said on stderr, which may still take it
        stdio.tell_refusal(exc)
        code = int(exc.exit_code)
    except ImportError as exc:  # a broken install, not a bug in envkit: one line, no traceback
        sys.stderr.write(f"envkit: error: {exc} (reinstall envkit with its dependencies)\n")
        code = int(ExitCode.INTERNAL)
    except BaseException:  # a bug: say so, with the traceback, under its own exit code
        sys.stderr.write("envkit: internal error (please report it with this traceback):\n")
        import traceback  # with textwrap, 1 ms of every start: loaded for a bug only

        traceback.print_exc()
        code = int(ExitCode.INTERNAL)
    hard_exit(code)
