"""What envkit's benchmarks share: timing in turns, the isolated environment a run gets, the
replica channels and recipes, and the raw rattler scripts each envkit command is measured against."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PY = sys.executable


@dataclass(frozen=True)
class Measurement:
    name: str
    ours: float
    baseline: float
    target: float | None
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.ours / self.baseline


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def alternate(
    ours: Callable[[], object], base: Callable[[], object], rounds: int, setup: Callable[[], object] | None = None
) -> tuple[float, float]:
    """Medians of each, taking turns; which one goes first alternates too, so that whatever going
    first costs (a colder cache, a busier machine) never counts against one side only."""
    times = alternate_runs(ours, base, rounds, setup)
    return statistics.median(times["ours"]), statistics.median(times["base"])


def alternate_runs(
    ours: Callable[[], object], base: Callable[[], object], rounds: int, setup: Callable[[], object] | None = None
) -> dict[str, list[float]]:
    """Each side's times, round by round (see alternate)."""
    times: dict[str, list[float]] = {"ours": [], "base": []}
    sides = [("ours", ours), ("base", base)]
    for n in range(rounds):
        for name, fn in sides if n % 2 == 0 else sides[::-1]:
            if setup:
                setup()
            times[name].append(timed(fn))
    return times


def paired(name: str, times: dict[str, list[float]], target: float | None) -> Measurement:
    """A row from alternate_runs' times: the medians' ratio, and envkit's own time (overhead_note)."""
    return Measurement(name, statistics.median(times["ours"]), statistics.median(times["base"]), target, overhead_note(times))


def overhead_note(times: dict[str, list[float]]) -> str:
    """envkit's own time over the baseline's, the median of the rounds' differences, and the range
    of the baseline's times: a ratio is that difference over a baseline whose length moves with the
    machine (a disk that slows under sustained writes: 1.2 to 2.2 s in one run), so both are shown."""
    extra = [1000 * (a - b) for a, b in zip(times["ours"], times["base"], strict=True)]
    spans = f"{min(times['base']):.2f}-{max(times['base']):.2f}s"
    return f"envkit's own: {statistics.median(extra):+.0f} ms (median of the rounds; baseline {spans})"


def run(cmd: list[str], **kw: object) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise SystemExit(f"benchmark command failed: {' '.join(cmd[:4])}...\n{proc.stderr[-2000:]}")


# `envkit --version` with every command's module imported first, as a registry of functions would


def isolated_env(work: Path) -> dict[str, str]:
    """envkit as it runs on a user's machine: no conda or envkit settings of this one, and Python
    writing bytecode, as an installed envkit does."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONDA_", "ENVKIT_")) and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(
        HOME=str(work / "home"),
        XDG_CONFIG_HOME=str(work / "cfg"),
        XDG_CACHE_HOME=str(work / "cache"),
        ENVKIT_ENVS_DIR=str(work / "envs"),
        ENVKIT_PKGS_DIR=str(work / "pkgs"),
    )
    return env


RAW_INSTALL = """
import asyncio, sys, rattler
channel, prefix, cache = sys.argv[1:4]
specs = sys.argv[4:]
vp = rattler.VirtualPackage.detect(rattler.VirtualPackageOverrides.from_env())
records = asyncio.run(rattler.solve([channel], specs, platforms=["linux-64", "noarch"], virtual_packages=vp))
asyncio.run(rattler.install(records, prefix, cache_dir=cache, show_progress=False))
import os
os._exit(0)  # past rattler's runtime teardown, as envkit does (bench/stress_exit.py)
"""


RAW_LOCKED_INSTALL = """
import asyncio, sys, rattler
lock, prefix, cache = sys.argv[1:4]
env = rattler.LockFile.from_path(lock).default_environment()
records = next(r for p, r in env.conda_repodata_records().items() if str(p) == str(rattler.Subdir.current()))
asyncio.run(rattler.install(records, prefix, cache_dir=cache, show_progress=False))
import os
os._exit(0)  # past rattler's runtime teardown, as envkit does (bench/stress_exit.py)
"""

RAW_REINSTALL = """
import asyncio, sys, pathlib, rattler
channel, extra, prefix, cache = sys.argv[1:5]
specs = sys.argv[5:]
vp = rattler.VirtualPackage.detect(rattler.VirtualPackageOverrides.from_env())
records = asyncio.run(rattler.solve([channel, extra], specs, platforms=["linux-64", "noarch"], virtual_packages=vp))
installed = [rattler.PrefixRecord.from_path(p) for p in pathlib.Path(prefix, "conda-meta").glob("*.json")]
asyncio.run(rattler.install(records, prefix, cache_dir=cache, installed_packages=installed, show_progress=False))
import os
os._exit(0)  # past rattler's runtime teardown, as envkit does (bench/stress_exit.py)
"""

RAW_SOLVES = """
import asyncio, json, sys, rattler
channels, jobs = sys.argv[1].split(","), json.loads(sys.argv[2])
floors = {"linux-64": ["__unix=0", "__linux=5.0", "__glibc=2.28"], "osx-arm64": ["__unix=0", "__osx=11.0"], "win-64": ["__win=0"]}
for platform, specs in jobs.items():
    vp = [rattler.GenericVirtualPackage(rattler.PackageName(n), rattler.Version(v), rattler.BuildString("0"))
          for n, v in (e.split("=") for e in floors[platform])]
    asyncio.run(rattler.solve(channels, specs, platforms=[platform, "noarch"], virtual_packages=vp))
import os
os._exit(0)  # past rattler's runtime teardown, as envkit does (bench/stress_exit.py)
"""


def payload_recipe(work: Path, extra: Path | None = None, pin: str = "") -> tuple[Path, Path]:
    from tests.support.wheelchannel import build_wheel_channel

    channel = build_wheel_channel()
    recipe = work / "recipes" / "teams.yaml"
    recipe.parent.mkdir(parents=True, exist_ok=True)
    channels = f"[{channel.as_uri()}" + (f", {extra.as_uri()}]" if extra else "]")
    packages = "[pytorch ==2.13.0, numpy, mkl-service, threadpoolctl" + (f", {pin}]" if pin else "]")
    recipe.write_text(f"envkit: 1\nname: teams\nchannels: {channels}\npython: '3.11'\npackages: {packages}\n")
    return recipe, channel


def small_recipe(work: Path, channel: Path) -> Path:
    """Python and threadpoolctl from the payload channel: a lock that links in 15-25 ms, so that a
    locked create of it is mostly envkit's fixed cost."""
    small = work / "recipes" / "small.yaml"
    small.write_text(f"envkit: 1\nname: small\nchannels: [{channel.as_uri()}]\npython: '3.11'\npackages: [threadpoolctl]\n")
    return small


SYNC_PACKAGES = {"benchpkg": 50, "bigpkg": 5000}  # name -> files: the package a sync bench changes


def versions_channel(work: Path) -> Path:
    """Two packages in two versions each, for the sync that changes one version in a torch env: a
    small one (50 files) and a big one (5,000 files), to see how envkit's fixed cost amortizes."""
    from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_tar_bz2

    channel = work / "versions"
    for name, files in SYNC_PACKAGES.items():
        for version in ("1.0", "2.0"):
            payload = [PkgFile(f"share/{name}/{n // 100}/{n}.txt", version.encode() * 100) for n in range(files)]
            write_tar_bz2(channel, PkgMeta(name, version, "0"), payload)
    index_channel(channel)
    return channel


def raw_reinstall(channel: Path, versions: Path, prefix: Path, cache: Path, pin: str) -> list[str]:
    """The baseline of a sync: a raw rattler solve of the torch env's specs plus `pin`, installed
    over `prefix` (bench/ab.py uses it too)."""
    specs = ["python 3.11.*", "pytorch ==2.13.0", "numpy", "mkl-service", "threadpoolctl", pin]
    return [PY, "-c", RAW_REINSTALL, channel.as_uri(), versions.as_uri(), str(prefix), str(cache), *specs]


@contextlib.contextmanager
def fresh_prefixes(root: Path) -> Iterator[Iterator[Path]]:
    """New prefixes under `root`, one for each install a row times, all removed after the row. An
    env removed between rounds (the torch env is 22,000 files) is still being worked off by the
    filesystem while the next install runs: measured, that made both sides' installs two to three
    times slower and their times swing by a second, so the ratio said more about the disk's backlog
    than about envkit. For the same reason the disk is flushed before the first round and after the
    removal (os.sync), so that neither this row nor the next starts with another's backlog, and the
    rows that time installs flush it before each round as well (alternate_runs' setup, untimed):
    without that, each install also paid for the writeback of the 22,000 links the one before made,
    and the torch env's installs in one run spread over 0.40-0.89 s (2026-12-04), enough to move the
    medians' ratio by 0.07 in a run whose paired differences said +2 ms. Each prefix costs inodes and
    a few MB (its files are hard links)."""
    os.sync()
    try:
        yield (root / str(n) for n in itertools.count())
    finally:
        shutil.rmtree(root, ignore_errors=True)
        os.sync()


def lock_job(work: Path, history: int = 0) -> tuple[list[str], list[str], list[str]]:
    """`envkit lock` of a recipe for the replica's platforms (its channel given `history` older
    versions of every package), the raw solves of the same specs, and the platforms (bench/ab.py
    uses it too)."""
    from envkit.recipe.compile import compile_recipe
    from envkit.recipe.loader import load_recipe
    from tests.support.replica import build_replica

    replica = work / "replica"
    channel = build_replica(replica)["conda-forge"] if not replica.exists() else replica / "conda-forge"
    platforms = sorted(p.name for p in channel.iterdir() if p.name in ("linux-64", "osx-arm64", "win-64") and any(p.glob("*.tar.bz2")))
    if history:
        channel = with_history(channel, work / f"history-{history}" / "conda-forge", history)
    recipe = work / f"history-{history}" / "recipes" / "multi.yaml"
    recipe.parent.mkdir(parents=True, exist_ok=True)
    recipe.write_text(
        f"envkit: 1\nname: multi\nchannels: [{channel.as_uri()}]\nplatforms: [{', '.join(platforms)}]\n"
        "python: '3.12'\npackages: [pytorch, numpy]\n"
    )
    loaded = load_recipe(str(recipe))
    jobs = {p: [s.spec for s in compile_recipe(loaded, p).conda_specs] for p in platforms}  # what envkit solves, per platform
    return [PY, "-m", "envkit", "lock", str(recipe)], [PY, "-c", RAW_SOLVES, channel.as_uri(), json.dumps(jobs)], platforms


def locked_files(lock: Path) -> list[str]:
    return sorted(line.rsplit("/", 1)[-1] for line in lock.read_text().splitlines() if line.lstrip().startswith("- conda: "))


HISTORY = 300  # older versions per package: conda-forge carries hundreds of builds of pytorch, numpy and python


def add_older_versions(data: dict[str, Any], versions: int) -> None:
    """Every record of a repodata document also in `versions` older versions (0.0.N, same depends)."""
    for key in ("packages", "packages.conda"):
        records = data.setdefault(key, {})
        older = {}
        for filename, record in records.items():
            build_ext = filename.removeprefix(f"{record['name']}-{record['version']}-")
            for n in range(versions):
                older[f"{record['name']}-0.0.{n}-{build_ext}"] = {**record, "version": f"0.0.{n}"}
        records.update(older)


def with_history(channel: Path, out: Path, versions: int) -> Path:
    """A copy of `channel`'s repodata where every record also comes in `versions` older versions
    (add_older_versions): the solver must read and weigh them and still pick what it picked before.
    Metadata only: a lock downloads nothing."""
    for repodata in channel.glob("*/repodata.json"):
        data = json.loads(repodata.read_text())
        add_older_versions(data, versions)
        target = out / repodata.parent.name / "repodata.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(data))
    return out
