"""Argument parsing and dispatch only: every command is a plain function in envkit.commands."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from envkit import __version__
from envkit.errors import EnvkitError, ExitCode, one_line

if TYPE_CHECKING:  # rich and the commands load only once a command runs: `--version` stays fast
    from rich.console import Console

    from envkit.audit.fix import FixPlan
    from envkit.commands import Result
    from envkit.solve import Plan

EPILOG = "exit codes: 0 ok, 1 findings or probe failure, 2 usage or invalid input, 3 solve failure, 4 install failure, 130 interrupted"


def _json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one versioned JSON document on stdout")


def _env_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    group = p.add_mutually_exclusive_group(required=required)
    group.add_argument("-n", "--name", help="env name")
    group.add_argument("-p", "--prefix", help="env prefix path")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="envkit", description="Consistent numeric toolchains for conda envs, proven by a probe.", epilog=EPILOG
    )
    parser.add_argument("--version", action="version", version=f"envkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    recipes = sub.add_parser("recipes", help="list, show, validate recipes; manage recipe repos")
    rsub = recipes.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = rsub.add_parser("list", help="every recipe and where it comes from")
    _json_flag(p)
    p = rsub.add_parser("show", help="a recipe, or with --resolved the specs and settings it compiles to")
    p.add_argument("recipe")
    p.add_argument("--resolved", action="store_true")
    _json_flag(p)
    p = rsub.add_parser("validate", help="check recipe files (schema, extends, consistency)")
    p.add_argument("paths", nargs="+", metavar="PATH")
    _json_flag(p)
    p = rsub.add_parser("add-source", help="add a git repository of recipes, pinned to a commit")
    p.add_argument("url")
    p.add_argument("--name")
    p.add_argument("--ref", help="branch, tag or commit (default: the remote's default branch)")
    _json_flag(p)
    p = rsub.add_parser("update", help="fetch recipe repos, show what changed, then move the pins")
    p.add_argument("source", nargs="?")
    p.add_argument("--check", action="store_true", help="show what would change; move nothing")
    _json_flag(p)

    p = sub.add_parser("create", help="solve a recipe and create the env, activation scripts and probe")
    p.add_argument("recipe", help="recipe name or path to a .yaml file")
    _env_args(p, required=False)
    p.add_argument("-c", "--channel", action="append", default=[], help="add a channel (before the recipe's)")
    p.add_argument("--override-channels", action="store_true", help="use only the -c channels")
    p.add_argument("--mirror", action="append", default=[], metavar="NAME=URL", help="map a channel name to a mirror URL")
    p.add_argument("--dry-run", action="store_true", help="solve and show the plan; write nothing")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--force", action="store_true", help="replace an existing env (restored if the new one fails)")
    p.add_argument("--no-probe", action="store_true", help="skip the post-install probe")
    _json_flag(p)

    p = sub.add_parser("probe", help="run the toolchain probe inside an env")
    _env_args(p)
    _json_flag(p)

    p = sub.add_parser("audit", help="find toolchain and threading hazards in existing envs")
    p.add_argument("targets", nargs="*", metavar="NAME|PREFIX")
    p.add_argument("--all", action="store_true", help="every env conda knows about")
    p.add_argument("--probe", action="store_true", help="also run the live probe")
    p.add_argument("--fix", action="store_true", help="apply safe fixes (activation scripts only)")
    p.add_argument("-y", "--yes", action="store_true", help="apply fixes without asking")
    p.add_argument("--explain", metavar="RULE", help="explain one rule and exit")
    p.add_argument("--list-rules", action="store_true", help="list the rule catalog and exit")
    p.add_argument("--min-severity", default="info", choices=("info", "warning", "error"))
    _json_flag(p)

    act = sub.add_parser("activation", help="what an env's activation does")
    asub = act.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = asub.add_parser("show", help="print the settings and the script for one shell")
    _env_args(p)
    p.add_argument("--shell", default="bash")
    _json_flag(p)

    p = sub.add_parser("run", help="run a command under an env's activation (like conda run)")
    _env_args(p)
    _json_flag(p)
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    return parser


def _env(args: argparse.Namespace) -> str:
    return str(args.prefix or args.name)


def dispatch(args: argparse.Namespace, console: Console) -> Result:
    from envkit.commands import Result
    from envkit.render import render_plan

    interactive = sys.stdin.isatty() and sys.stdout.isatty() and not getattr(args, "json", False)
    if args.command == "recipes":
        from envkit.commands import recipes

        if args.action == "list":
            return recipes.list_recipes()
        if args.action == "show":
            return recipes.show_recipe(args.recipe, args.resolved)
        if args.action == "validate":
            return recipes.validate(args.paths)
        if args.action == "add-source":
            return recipes.add(args.url, args.name, args.ref)
        return recipes.update(args.source, args.check)
    if args.command == "create":
        from envkit.channels import parse_mirror_flags
        from envkit.commands.create import CreateRequest, create

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
        )
        reporter = None
        if interactive:
            from envkit.progress import RichInstallReporter

            reporter = RichInstallReporter(console)

        def confirm(plan: Plan) -> bool:
            answer = console.input("Proceed? [y/N] ", markup=False).strip().lower()
            return answer in ("y", "yes")

        return create(
            request,
            show_plan=(lambda plan: render_plan(console, plan)) if not args.json else None,
            confirm=confirm if interactive and not args.yes else None,
            reporter=reporter,
        )
    if args.command == "probe":
        from envkit.commands.probe import probe

        return probe(_env(args))
    if args.command == "audit":
        from envkit.commands import audit

        if args.explain:
            return audit.explain(args.explain)
        if args.list_rules:
            return Result("audit rules", audit.list_rules())

        def confirm_fix(plan: FixPlan) -> bool:
            console.print(plan.diff)
            return console.input("Apply these changes? [y/N] ", markup=False).strip().lower() in ("y", "yes")

        return audit.audit(
            args.targets,
            all_envs_flag=args.all,
            probe=args.probe,
            fix=args.fix,
            min_severity=args.min_severity,
            confirm_fix=confirm_fix if interactive and not args.yes else None,
        )
    if args.command == "activation":
        from envkit.commands.activation import show

        return show(_env(args), args.shell)
    if args.command == "run":
        from envkit.commands.activation import run

        argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        return run(_env(args), argv, capture=args.json)
    raise AssertionError(args.command)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from rich.console import Console

    from envkit.render import envelope, print_json, render_human

    as_json = bool(getattr(args, "json", False))
    out = Console(highlight=False, soft_wrap=True, emoji=False)
    err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
    command = " ".join(x for x in (args.command, getattr(args, "action", None)) if x)
    try:
        result = dispatch(args, err if as_json else out)
    except EnvkitError as exc:
        code = int(exc.exit_code)
        if as_json:
            print_json(out, envelope(None, command=command, exit_code=code, errors=exc.plain_lines(), hint=exc.hint))
        else:
            for line in exc.lines():
                err.print(f"envkit: error: {one_line(line)}", markup=False)
        return code
    except KeyboardInterrupt:
        err.print("envkit: interrupted", markup=False)
        return int(ExitCode.INTERRUPTED)
    if as_json:
        print_json(out, envelope(result, command=result.command, exit_code=result.exit_code))
    elif result.command != "run":
        render_human(out, result)
    return result.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
