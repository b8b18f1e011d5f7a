"""Where one envkit command's time goes: the entry and exit of chosen functions, marked in envkit's
process and in any installer child it starts, as milliseconds since envkit's interpreter began
running Python code (a forked child shares that clock; a spawned one counts from its own start).

    python bench/phases.py [--mark MODULE:FUNCTION ...] [--env-from-bench WORK] -- sync -p ENV --yes

A ratio from bench/run.py says how far a command is from its baseline, not where the difference
lies; a profiler's own cost is larger than the steps it would time. This puts a `sitecustomize`
first on the command's PYTHONPATH that wraps each listed module-level function when its module is
first imported (so nothing is imported earlier than envkit would import it) and appends one line
per entry and exit, with the process id, to a file read back at the end. The default marks cover
the steps of `sync`, `create` and `lock`; `--mark` adds others. Timings include the marks' own cost
(a few microseconds each) and are one run's: repeat, and compare versions in one sitting.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_MARKS = {
    "envkit.cli.main": ["main"],
    "envkit.commands.sync_quick": ["quick"],
    "envkit.commands.sync": ["sync"],
    "envkit.commands.sync_look": ["look"],
    "envkit.commands.sync_apply": ["apply", "_sync_pip", "_journal_folders"],
    "envkit.commands.create": ["create", "plan_from_lock"],
    "envkit.commands.lock": ["lock", "solve_for_lock"],
    "envkit.install.create": ["create_env"],
    "envkit.install.pkgcache": ["verify_archives"],
    "envkit.install.inplace": ["_fork", "_serve", "_read_installed", "_write_records", "_child"],
    "envkit.solve.plan": ["solve_recipe", "solve_or_explain"],
    "envkit.solve.backend": ["client", "install", "reinstall", "_run"],
    "envkit.prefix.condameta": ["as_conda_writes", "stamp"],
    "envkit.install.journal": ["write_journal"],
    "envkit.prefix.history": ["append_block"],
    "envkit.activation.writer": ["write_files"],
    "envkit.prefix.record": ["write_record"],
    "envkit.audit.engine": ["audit_plan"],
    "envkit.team.lock": ["read_lock", "write_lock"],
}

# The sitecustomize: stdlib only, run before envkit's first import in every process of the command.
SITECUSTOMIZE = """
import functools, importlib.util, os, sys, time
_T0 = time.perf_counter()
_OUT = open(os.environ["ENVKIT_PHASES_OUT"], "a", encoding="utf-8")
_MARKS = {marks!r}

def _mark(what):
    _OUT.write(f"{{os.getpid()}} {{1000 * (time.perf_counter() - _T0):.1f}} {{what}}\\n")
    _OUT.flush()

def _wrap(module, name):
    owner, _, attr = name.rpartition(".")  # a method: CLASS.NAME
    holder = getattr(module, owner, None) if owner else module
    inner = getattr(holder, attr, None)
    if not callable(inner):
        return

    @functools.wraps(inner)
    def marked(*args, **kwargs):
        _mark(f"> {{module.__name__}}.{{name}}")
        try:
            return inner(*args, **kwargs)
        finally:
            _mark(f"< {{module.__name__}}.{{name}}")

    setattr(holder, attr, marked)

class _Finder:
    def find_spec(self, fullname, path, target=None):
        if fullname not in _MARKS:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            _mark(f"import {{fullname}}")
            run(module)
            for name in _MARKS[fullname]:
                _wrap(module, name)

        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _Finder())
_exit = os._exit

def _marked_exit(code):
    _mark("exit")
    _exit(code)

os._exit = _marked_exit  # envkit leaves through os._exit (envkit.cli.main.hard_exit), past atexit
_mark("start")
"""


def timeline(args: list[str], marks: dict[str, list[str]], env: dict[str, str]) -> tuple[int, list[tuple[int, float, str]]]:
    """The command's exit code and its marks: (pid, ms, what), in the order they were written."""
    with tempfile.TemporaryDirectory(prefix="envkit-phases-") as tmp:
        site, out = Path(tmp) / "site", Path(tmp) / "marks.txt"
        site.mkdir()
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(marks=marks), encoding="utf-8")
        path = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
        done = subprocess.run(
            [sys.executable, "-m", "envkit", *args],
            env={**env, "PYTHONPATH": path, "ENVKIT_PHASES_OUT": str(out)},
            capture_output=True,
            text=True,
            check=False,
        )
        rows = []
        for line in out.read_text(encoding="utf-8").splitlines() if out.exists() else []:
            pid, ms, what = line.split(" ", 2)
            rows.append((int(pid), float(ms), what))
    return done.returncode, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mark", action="append", default=[], metavar="MODULE:FUNCTION", help="another function (or CLASS.METHOD) to mark")
    parser.add_argument("--env-from-bench", metavar="WORK", help="run in bench/common.py's isolated environment for this work dir")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="envkit's arguments, after --")
    options = parser.parse_args()
    args = options.args[1:] if options.args[:1] == ["--"] else options.args
    if not args:
        parser.error("give envkit's arguments after --")
    marks = {module: list(names) for module, names in DEFAULT_MARKS.items()}
    for extra in options.mark:
        module, _, name = extra.partition(":")
        if not module or not name:
            parser.error(f"--mark {extra}: give MODULE:FUNCTION")
        marks.setdefault(module, []).append(name)
    env = dict(os.environ)
    if options.env_from_bench:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import common as bench  # bench/common.py: HOME, caches and channels of its own

        env = bench.isolated_env(Path(options.env_from_bench))
    code, rows = timeline(args, marks, env)
    first = rows[0][0] if rows else 0
    for pid, ms, what in rows:
        who = "envkit" if pid == first else f"child {pid}"
        print(f"{ms:8.1f} ms  {who:<12} {what}")
    print(json.dumps({"exit": code, "marks": len(rows)}))
    return 0 if code == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
