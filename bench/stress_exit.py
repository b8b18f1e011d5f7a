"""Exit codes must never lie: run envkit many times under load and count every exit that is not the
one the command means.

Three scenarios, each `--json` so the document's exit_code can be compared with the process's:
  unsat        a solve that cannot be satisfied against a local channel    expected 3
  unreachable  a channel on a closed port (connection refused)             expected 3
  dry-run      a successful `create --dry-run` against a local channel     expected 0

Both cores are kept busy by spinning processes while envkit runs, because the crash this guards
against (a py-rattler tokio worker still inside Python while the interpreter finalizes, see
envkit/cli/main.py) is a race that load widens.

    python bench/stress_exit.py                  # 500 runs of each scenario through `python -m envkit`
    python bench/stress_exit.py --runs 50 --entry finalize   # the same runs ending in a normal
                                                 # interpreter exit, to see the race it avoids
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from multiprocessing.synchronize import Event
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PY = sys.executable

# `module`: the real entry (python -m envkit). `finalize`: main() and then an ordinary interpreter
# exit, which is what envkit did before it ended through envkit.cli.main.run (os._exit).
ENTRIES = {
    "module": [PY, "-m", "envkit"],
    "finalize": [PY, "-c", "import sys; from envkit.cli.main import main; sys.exit(main())"],
}


def _spin(stop: Event) -> None:
    while not stop.is_set():
        pass


def _recipe(folder: Path, name: str, channel: str, packages: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(f"envkit: 1\nname: {name}\nchannels: [{channel}]\npackages: [{packages}]\n", encoding="utf-8")
    return path


def scenarios(work: Path) -> dict[str, tuple[list[str], int]]:
    from tests.support.condapkg import PkgMeta, index_channel, write_tar_bz2

    channel = work / "channel"
    write_tar_bz2(channel, PkgMeta("tool", "1.0", "0", depends=["helper >=1"]))
    write_tar_bz2(channel, PkgMeta("helper", "1.0", "0"))
    index_channel(channel)
    recipes = work / "recipes"
    recipes.mkdir()
    ok = _recipe(recipes, "ok", channel.as_uri(), "tool")
    unsat = _recipe(recipes, "unsat", channel.as_uri(), "tool >=2")
    closed = _recipe(recipes, "closed", "http://127.0.0.1:9/conda-forge", "tool")
    return {
        "unsat": (["create", str(unsat), "--dry-run", "--json"], 3),
        "unreachable": (["create", str(closed), "--dry-run", "--json"], 3),
        "dry-run": (["create", str(ok), "--dry-run", "--json"], 0),
    }


def one_run(cmd: list[str], env: dict[str, str]) -> tuple[int, int | None, str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)
    try:
        said = json.loads(proc.stdout)["exit_code"]
    except (ValueError, KeyError, TypeError):
        said = None
    return proc.returncode, said, proc.stderr[-300:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=500, help="runs per scenario (default 500)")
    parser.add_argument("--entry", choices=sorted(ENTRIES), default="module")
    parser.add_argument("--no-load", action="store_true", help="do not keep the cores busy")
    parser.add_argument("--only", choices=("unsat", "unreachable", "dry-run"), action="append")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envkit-stress-") as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CONDA_", "ENVKIT_"))}
        env.update(HOME=str(work / "home"), XDG_CONFIG_HOME=str(work / "cfg"), XDG_CACHE_HOME=str(work / "cache"))
        env.update(ENVKIT_ENVS_DIR=str(work / "envs"), ENVKIT_PKGS_DIR=str(work / "pkgs"), PYTHONPATH=str(ROOT))
        cases = {k: v for k, v in scenarios(work).items() if not args.only or k in args.only}
        stop = multiprocessing.Event()
        spinners = [] if args.no_load else [multiprocessing.Process(target=_spin, args=(stop,)) for _ in range(os.cpu_count() or 1)]
        for s in spinners:
            s.start()
        bad_total = 0
        try:
            print(f"entry={args.entry} runs={args.runs} load={'off' if args.no_load else f'{len(spinners)} spinning processes'}")
            print(f"{'scenario':12} {'runs':>5} {'expected':>8}  exit codes seen                 lies  seconds")
            for name, (argv, expected) in cases.items():
                codes: collections.Counter[int] = collections.Counter()
                lies = 0
                sample = ""
                start = time.monotonic()
                for _ in range(args.runs):
                    code, said, tail = one_run([*ENTRIES[args.entry], *argv], env)
                    codes[code] += 1
                    if code != expected or said != expected:
                        lies += 1
                        sample = sample or f"rc={code} json={said} {tail.strip().splitlines()[-1] if tail.strip() else ''}"
                bad_total += lies
                seen = ", ".join(f"{c}: {n}" for c, n in sorted(codes.items()))
                print(f"{name:12} {args.runs:5} {expected:8}  {seen:30} {lies:5}  {time.monotonic() - start:7.0f}")
                if sample:
                    print(f"    first bad run: {sample}")
        finally:
            stop.set()
            for s in spinners:
                s.join()
        print("result: " + ("no exit code lied" if bad_total == 0 else f"{bad_total} runs exited with a code that lies"))
        return 0 if bad_total == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
