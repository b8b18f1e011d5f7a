"""Two versions of envkit on the same command, interleaved: this checkout against a git revision.

    python bench/ab.py REV [--rounds 12] [--what sync|lock|create] [--package benchpkg|bigpkg] [--small]
    python bench/ab.py --switch ENVKIT_PLAIN_OUTPUT=0 --what create --small

`--switch VAR=VALUE` compares this checkout with itself under VAR=VALUE: a speed-up's off switch,
so that what it saves is measured where it lives (envkit.ui.plainout's, for one).

A change to a command's speed is a few tens of milliseconds on a machine whose noise is larger than
that, so the two versions take turns, round after round, each timed whole as a user would run it:
`sync` after one package version changed in a torch env (yardstick: bench/run.py's raw rattler solve
+ install), `lock` of a recipe for three platforms on the replica channel (yardstick: three raw
solves), or `create --locked` of the torch env (yardstick: a raw install of the lock's records).
Both checkouts are byte-compiled first (PYTHONDONTWRITEBYTECODE would otherwise make whichever was
edited last recompile on every run), and their commands run without it. Prints the medians, the ratio
of the two versions, each round's ratio and their median: a change that helps shows in most rounds,
not just in the median (and the rounds' median holds where the machine drifts during the run, as a
disk slowing under sustained writes makes the medians of whole runs drift). The env is created by
this checkout, so REV must read this version's env record (a recent revision does).
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import common as bench  # noqa: E402 - bench/common.py: the channels and the raw baseline

SWITCH: dict[str, str] = {}  # --switch VAR=VALUE: the other side is this checkout under it


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    bench.run(cmd, env=env)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev", nargs="?", help="the version to compare with (a commit, a branch, HEAD~1)")
    parser.add_argument("--switch", metavar="VAR=VALUE", help="compare with this checkout run under VAR=VALUE instead of a revision")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--what", choices=("sync", "lock", "create"), default="sync", help="the command to time")
    parser.add_argument("--package", choices=sorted(bench.SYNC_PACKAGES), default="benchpkg", help="the package whose version changes")
    parser.add_argument("--small", action="store_true", help="create: a lock of two packages (envkit's fixed cost) for the torch env's")
    args = parser.parse_args()
    if (args.rev is None) == (args.switch is None) or (args.switch is not None and "=" not in args.switch):
        parser.error("give a revision, or --switch VAR=VALUE, not both")
    if args.switch:
        name, value = args.switch.split("=", 1)
        SWITCH[name] = value
    with tempfile.TemporaryDirectory(prefix="envkit-ab-") as tmp:
        work = Path(tmp)
        other = ROOT if SWITCH else work / "other"
        if SWITCH:
            args.rev = args.switch
        else:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(other), args.rev], check=True, capture_output=True)
        # `python -m envkit` puts the working directory first on sys.path, before PYTHONPATH: run
        # from the checkout, both sides would import this checkout's envkit
        here = os.getcwd()
        os.chdir(work)
        try:
            for tree in (ROOT, other):
                compileall.compile_dir(str(tree / "envkit"), quiet=1)
            if args.what == "lock":
                return compare_lock(work, other, args.rev, args.rounds)
            if args.what == "create":
                return compare_create(work, other, args.rev, args.rounds, small=args.small)
            return compare_sync(work, other, args.rev, args.rounds, args.package)
        finally:
            os.chdir(here)
            if not SWITCH:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], check=False, capture_output=True)


def compare_sync(work: Path, other: Path, rev: str, rounds: int, package: str) -> int:
    env = bench.isolated_env(work)
    versions = bench.versions_channel(work)
    recipe, channel = bench.payload_recipe(work, versions, f"{package} 1.0")
    prefix, raw_prefix = work / "env", work / "raw"
    sides = checked_sides(env, other, rev)
    bench.run([bench.PY, "-m", "envkit", "create", str(recipe), "-p", str(prefix), "--yes", "--no-probe"], env=sides["this"])

    def raw(version: str) -> list[str]:
        return bench.raw_reinstall(channel, versions, raw_prefix, Path(env["ENVKIT_PKGS_DIR"]), f"{package} =={version}")

    sync = [bench.PY, "-m", "envkit", "sync", "-p", str(prefix), "--yes", "--no-probe"]
    times: dict[str, list[float]] = {name: [] for name in [*sides, "raw"]}
    bench.run(raw("1.0"), env=env)
    for n in range(rounds):
        for name, side_env in in_turn(sides, n):
            bench.payload_recipe(work, versions, f"{package} 1.0")
            bench.run(sync, env=side_env)
            bench.payload_recipe(work, versions, f"{package} 2.0")
            os.sync()  # as in run.py: the put-back's writeback done, untimed
            times[name].append(timed(sync, side_env))
        bench.run(raw("1.0"), env=env)
        os.sync()
        times["raw"].append(timed(raw("2.0"), env))
    report(f"sync after one version change ({bench.SYNC_PACKAGES[package]:,} files), {rounds} rounds", rev, times)
    return 0


def compare_lock(work: Path, other: Path, rev: str, rounds: int) -> int:
    env = bench.isolated_env(work)
    lock, raw, _ = bench.lock_job(work)
    sides = checked_sides(env, other, rev)
    times: dict[str, list[float]] = {name: [] for name in [*sides, "raw"]}
    for n in range(rounds):
        for name, side_env in in_turn(sides, n):
            times[name].append(timed(lock, side_env))
        times["raw"].append(timed(raw, env))
    report(f"lock for three platforms, {rounds} rounds", rev, times)
    return 0


def compare_create(work: Path, other: Path, rev: str, rounds: int, *, small: bool = False) -> int:
    env = bench.isolated_env(work)
    recipe, channel = bench.payload_recipe(work)
    if small:
        recipe = bench.small_recipe(work, channel)
    bench.run([bench.PY, "-m", "envkit", "lock", str(recipe)], env=env)
    sides = checked_sides(env, other, rev)
    lock = str(recipe.with_suffix(".lock"))

    def create(prefix: Path) -> list[str]:
        return [bench.PY, "-m", "envkit", "create", str(recipe), "-p", str(prefix), "--locked", "--yes", "--no-probe"]

    def raw(prefix: Path) -> list[str]:
        return [bench.PY, "-c", bench.RAW_LOCKED_INSTALL, lock, str(prefix), env["ENVKIT_PKGS_DIR"]]

    times: dict[str, list[float]] = {name: [] for name in [*sides, "raw"]}
    with bench.fresh_prefixes(work / "locked") as fresh:  # each install into a prefix of its own
        timed(create(next(fresh)), env)  # the package cache, warm for every side
        for n in range(rounds):  # each install starts with the disk's writeback of the one before done, as in run.py
            for name, side_env in in_turn(sides, n):
                os.sync()
                times[name].append(timed(create(next(fresh)), side_env))
            os.sync()
            times["raw"].append(timed(raw(next(fresh)), env))
    report(f"create --locked of {'a two-package lock' if small else 'the torch env'}, {rounds} rounds", rev, times)
    return 0


def checked_sides(env: dict[str, str], other: Path, rev: str) -> dict[str, dict[str, str]]:
    """Each side's environment, this checkout's and REV's, once each is seen to import envkit from
    its own tree (or the comparison means nothing)."""
    sides = {"this": dict(env, PYTHONPATH=str(ROOT)), rev: dict(env, PYTHONPATH=str(other), **SWITCH)}
    for name, side_env in sides.items():
        where = subprocess.run(
            [bench.PY, "-c", "import envkit; print(envkit.__file__)"], env=side_env, capture_output=True, text=True, check=True
        )
        if not where.stdout.startswith(side_env["PYTHONPATH"] + os.sep):
            raise SystemExit(f"bench/ab.py: side {name} imports {where.stdout.strip()}, not envkit from {side_env['PYTHONPATH']}")
    return sides


def in_turn(sides: dict[str, dict[str, str]], n: int) -> list[tuple[str, dict[str, str]]]:
    """Round n's order: neither side always goes first."""
    order = list(sides.items())
    return order if n % 2 == 0 else order[::-1]


def report(what: str, rev: str, times: dict[str, list[float]]) -> None:
    """Medians, the two versions' ratio and each against the yardstick, then every round's ratio."""
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"{what}: " + ", ".join(f"{name} {value:.3f}s" for name, value in medians.items()))
    print(
        f"this / {rev}: {medians['this'] / medians[rev]:.3f}; against raw: this {medians['this'] / medians['raw']:.2f}x, {rev} {medians[rev] / medians['raw']:.2f}x"
    )
    rounds = [a / b for a, b in zip(times["this"], times[rev], strict=True)]
    print("each round, this / " + rev + ": " + " ".join(f"{r:.2f}" for r in rounds))
    # the two sides of one round ran within seconds of each other: where the machine drifts through
    # a run (a disk that slows under sustained writes), their ratio holds when the medians do not
    faster = sum(r < 1 for r in rounds)
    print(f"median of the rounds' ratios: {statistics.median(rounds):.3f}; this faster in {faster} of {len(rounds)} rounds")


if __name__ == "__main__":
    raise SystemExit(main())
