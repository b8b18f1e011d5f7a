"""Two versions of envkit on the same sync, interleaved: this checkout against a git revision.

    python bench/ab.py REV [--rounds 12] [--package benchpkg|bigpkg]

A change to sync's speed is a few tens of milliseconds on a machine whose noise is larger than that,
so the two versions take turns on one env, round after round, each timed whole as a user would run
it (`envkit sync` after one package version changed), with the raw rattler solve + install of
bench/run.py as the yardstick. Both checkouts are byte-compiled first (PYTHONDONTWRITEBYTECODE would
otherwise make whichever was edited last recompile on every run). Prints the medians, the ratio of
the two versions and each round's ratio: a change that helps shows in most rounds, not just in the
median. The env is created by this checkout, so REV must read this version's env record (a recent
revision does).
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import run as bench  # noqa: E402 - bench/run.py, the channels and the raw baseline


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    bench.run(cmd, env=env)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev", help="the version to compare with (a commit, a branch, HEAD~1)")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--package", choices=sorted(bench.SYNC_PACKAGES), default="benchpkg", help="the package whose version changes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envkit-ab-") as tmp:
        work = Path(tmp)
        other = work / "other"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(other), args.rev], check=True, capture_output=True)
        try:
            return compare(work, other, args.rev, args.rounds, args.package)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], check=False, capture_output=True)


def compare(work: Path, other: Path, rev: str, rounds: int, package: str) -> int:
    for tree in (ROOT, other):
        compileall.compile_dir(str(tree / "envkit"), quiet=1)
    env = bench._isolated_env(work)
    versions = bench._versions_channel(work)
    recipe, channel = bench._payload_recipe(work, versions, f"{package} 1.0")
    prefix, raw_prefix = work / "env", work / "raw"
    bench.run([bench.PY, "-m", "envkit", "create", str(recipe), "-p", str(prefix), "--yes", "--no-probe"], env=env)

    def raw(version: str) -> list[str]:
        return bench.raw_reinstall(channel, versions, raw_prefix, Path(env["ENVKIT_PKGS_DIR"]), f"{package} =={version}")

    sides = {"this": dict(env, PYTHONPATH=str(ROOT)), rev: dict(env, PYTHONPATH=str(other))}
    sync = [bench.PY, "-m", "envkit", "sync", "-p", str(prefix), "--yes", "--no-probe"]
    times: dict[str, list[float]] = {name: [] for name in [*sides, "raw"]}
    bench.run(raw("1.0"), env=env)
    for n in range(rounds):
        order = list(sides.items()) if n % 2 == 0 else list(reversed(sides.items()))  # neither side always goes first
        for name, side_env in order:
            bench._payload_recipe(work, versions, f"{package} 1.0")
            bench.run(sync, env=side_env)
            bench._payload_recipe(work, versions, f"{package} 2.0")
            times[name].append(timed(sync, side_env))
        bench.run(raw("1.0"), env=env)
        times["raw"].append(timed(raw("2.0"), env))
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"sync after one version change ({bench.SYNC_PACKAGES[package]:,} files), {rounds} rounds: "
        + ", ".join(f"{name} {value:.3f}s" for name, value in medians.items())
    )
    print(
        f"this / {rev}: {medians['this'] / medians[rev]:.3f}; against raw: this {medians['this'] / medians['raw']:.2f}x, {rev} {medians[rev] / medians['raw']:.2f}x"
    )
    print("each round, this / " + rev + ": " + " ".join(f"{a / b:.2f}" for a, b in zip(times["this"], times[rev], strict=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
