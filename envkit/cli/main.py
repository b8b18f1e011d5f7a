"""Argument parsing and dispatch only: each command's arguments, run and view are its module's in
envkit.commands (the registry names them); this finds the one argv names and calls it.

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
sync to a pipe or a file never load it (envkit.ui.plainout says why).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

from envkit import __version__
from envkit.commands.registry import BY_NAME, COMMANDS
from envkit.core import stdio
from envkit.core.errors import EXIT_CODE_MEANINGS, EnvkitError, ExitCode, Interrupted, OutputError, UsageError, one_line, os_refusal

if TYPE_CHECKING:
    from envkit.commands import Result
    from envkit.ui.terminal import UI

EPILOG = "exit codes (envkit run: otherwise the command's own):\n" + "\n".join(
    f"  {int(code):>3}  {meaning}" for code, meaning in EXIT_CODE_MEANINGS.items()
)


class RawEpilogFormatter(argparse.HelpFormatter):
    """The epilog's table as written, one exit code a line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line for line in text.splitlines(keepends=True))


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing and exiting, so `--json` gets its document too."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, hint=f"see '{self.prog} --help'")


def build_parser(only: str | None = None, *, every: bool = True) -> Parser:
    """Every command, with its arguments (the reference docs, `envkit` alone); with `only` (the
    command argv names, command_in) only that command's, and with `every=False` and no `only` none
    (--version, --help): a command's module is imported only when its arguments are built
    (envkit.commands.registry)."""
    parser = Parser(
        prog="envkit",
        description="Consistent numeric toolchains for conda envs, proven by a probe.",
        epilog=EPILOG,
        formatter_class=RawEpilogFormatter,
    )
    parser.add_argument("--version", action="version", version=f"envkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.summary)
        if only == command.name or (only is None and every):
            command.load().add_arguments(p)
    return parser


def command_in(argv: Sequence[str]) -> str | None:
    """The command argv names, when it names one before any help flag."""
    for arg in argv:
        if arg in ("-h", "--help"):
            return None
        if not arg.startswith("-"):
            return arg if arg in BY_NAME else None
    return None


# ------------------------------------------------------------------ running one command


def _wants_json(argv: Sequence[str]) -> bool:
    return "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit code; output is written and flushed. -N (subprocess's
    convention): the command `envkit run` ran ended by signal N, and envkit is to end by it too."""
    argv = list(sys.argv[1:] if argv is None else argv)
    from envkit.core.interrupts import terminate_as_interrupt

    terminate_as_interrupt()
    if not [arg for arg in argv if arg != "--json"]:  # bare `envkit`: what it can do, and the usage error's exit code
        sys.stderr.write(build_parser(every=False).format_help())
        return int(ExitCode.USAGE)
    args = _parse(argv)
    if isinstance(args, int):
        return args
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
    from envkit.core.notices import collecting
    from envkit.ui.terminal import UI

    ui = UI(as_json, stdout_taken=stdout_taken)
    with collecting() as notices:
        try:
            result = BY_NAME[args.command].load().invoke(args, ui)
        except (EnvkitError, KeyboardInterrupt, OSError) as exc:
            refused = _as_refusal(exc)
            if refused is None:
                raise
            _tell(notices)
            return _report_error(refused, as_json, command)
    if notices:
        result = replace(result, messages=(*notices, *result.messages))
    _write(result, ui)
    return -result.end_signal if result.end_signal else result.exit_code


def _parse(argv: list[str]) -> argparse.Namespace | int:
    """The arguments, or the exit code of --help, --version or a usage error (said)."""
    named = command_in(argv)
    try:
        return build_parser(named, every=False).parse_args(argv)
    except SystemExit as exc:  # --help and --version print and exit 0
        return int(exc.code or 0)
    except UsageError as exc:
        return _report_error(_with_suggestion(exc, argv, named), _wants_json(argv), command=named or "")
    except EnvkitError as exc:
        return _report_error(exc, _wants_json(argv), command=named or "")


def _as_refusal(exc: BaseException) -> EnvkitError | None:
    """What a command's failure tells the person: envkit's own errors, a Ctrl-C, a permission or a
    filesystem refusal (another's env, a full disk, a read-only filesystem). None: a bug."""
    if isinstance(exc, EnvkitError):
        return exc
    if isinstance(exc, KeyboardInterrupt):
        return Interrupted("interrupted")
    if isinstance(exc, PermissionError):
        where = exc.filename or "a file envkit needed"
        return UsageError(
            f"permission denied: {where} ({exc.strerror or 'not allowed'})",
            hint="run it as a user who may do this there (an env's owner), or ask its owner for access",
        )
    return os_refusal(exc) if isinstance(exc, OSError) else None


def _write(result: Result[Any], ui: UI) -> None:
    """The JSON document, the view and messages on a console, or messages alone as plain lines."""
    if ui.as_json:
        from envkit.cli.envelope import envelope, print_json

        print_json(envelope(result, command=result.command, exit_code=result.exit_code))
    elif result.view is None:
        for message in result.messages:  # plain text: nothing here needs rich
            ui.say(message)
    else:
        result.show(ui.out)


def _with_suggestion(exc: UsageError, argv: list[str], named: str | None) -> UsageError:
    """argparse's error with a did-you-mean: the command or flag nearest the one typed."""
    import difflib
    import re

    typed: list[str] = []
    candidates: list[str] = []
    if (choice := re.search(r"invalid choice: '([^']*)'", exc.message)) and named is None:
        typed, candidates = [choice.group(1)], [command.name for command in COMMANDS]
    elif exc.message.startswith("unrecognized arguments: "):
        typed = [a.split("=", 1)[0] for a in exc.message.removeprefix("unrecognized arguments: ").split() if a.startswith("-")]
        parser = build_parser(named, every=False)
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
