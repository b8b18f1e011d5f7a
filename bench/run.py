"""envkit benchmarks: each one times envkit and a baseline in the same run, alternating, and prints
the ratio of medians. Our machines are shared and noisy; only ratios mean anything.

    python bench/run.py                 # all
    python bench/run.py version audit   # some
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import functools
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

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
EAGER_VERSION = (
    "import runpy, sys; from envkit.commands.registry import COMMANDS; [c.load() for c in COMMANDS]; "
    "sys.argv = ['envkit', '--version']; runpy.run_module('envkit', run_name='__main__')"
)


def bench_version() -> list[Measurement]:
    """envkit's start against importing its two heaviest dependencies; and the registry's lazy
    loading (envkit.commands.registry) against importing every command first (>= 5% or it goes)."""
    version = [PY, "-m", "envkit", "--version"]
    ours, base = alternate(lambda: run(version), lambda: run([PY, "-c", "import rich.console, yaml"]), 15)
    lazy, eager = alternate(lambda: run(version), lambda: run([PY, "-c", EAGER_VERSION]), 15)
    return [
        Measurement("envkit --version vs import rich+yaml", ours, base, 2.0),
        Measurement("envkit --version, commands imported when named vs all at start", lazy, eager, 0.95),
    ]


def _isolated_env(work: Path) -> dict[str, str]:
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


def bench_create(work: Path) -> list[Measurement]:
    from tests.support.wheelchannel import build_wheel_channel, cache_root

    channel = build_wheel_channel()
    specs = ["python 3.11.*", "pytorch ==2.13.0", "numpy", "mkl-service", "threadpoolctl"]
    recipe = work / "bench-create.yaml"
    recipe.write_text(
        f"envkit: 1\nname: bench-create\nchannels: [{channel.as_uri()}]\npython: '3.11'\npackages: [pytorch ==2.13.0, numpy, mkl-service, threadpoolctl]\n"
    )
    env = _isolated_env(work)

    def ours_cmd(prefix: Path) -> list[str]:
        return [PY, "-m", "envkit", "create", str(recipe), "-p", str(prefix), "--yes", "--no-probe"]

    def raw_cmd(prefix: Path) -> list[str]:
        return [PY, "-c", RAW_INSTALL, channel.as_uri(), str(prefix), env["ENVKIT_PKGS_DIR"], *specs]

    with fresh_prefixes(work / "create-rounds") as fresh:
        run(ours_cmd(next(fresh)), env=env)  # warm the package cache
        ours, base = alternate(lambda: run(ours_cmd(next(fresh)), env=env), lambda: run(raw_cmd(next(fresh)), env=env), 5)
    out = [Measurement("create --no-probe vs raw rattler solve+install (warm cache)", ours, base, 1.15)]
    wheels = cache_root() / "wheels"
    venv = work / "venv"
    shutil.rmtree(venv, ignore_errors=True)

    def pip_install() -> None:
        run([PY, "-m", "venv", str(venv)])
        pip = [str(venv / "bin" / "pip"), "install", "--quiet", "--no-index", "--find-links", str(wheels)]
        run([*pip, "torch==2.13.0", "numpy", "mkl-service", "threadpoolctl"])

    pip_time = timed(pip_install)
    out.append(Measurement("create --no-probe vs pip+venv from the same wheels", ours, pip_time, None, "the alternative users would pick"))
    shutil.rmtree(venv, ignore_errors=True)
    return out


def bench_activation(work: Path) -> list[Measurement]:
    """Sourcing the activate script vs plain exports of the same variables, 2000 times in one bash.
    Each round unsets the variables again, as a fresh shell would have them; a second measurement
    has them already set, which makes envkit save every prior value (plain exports save nothing)."""
    from envkit.activation.writer import render_files, write_files
    from envkit.recipe.model import EnvOp

    prefix = work / "act-env"
    names = [f"ENVKIT_BENCH_{i}" for i in range(20)]
    ops = tuple(EnvOp(n, "set", value=f"value {i}") for i, n in enumerate(names))
    files = render_files(prefix, "bench", ops, ("sh",))
    write_files(files)
    tag = next(line.split("_ACTIVE=1")[0].split()[-1] for line in files[0].text.splitlines() if "_ACTIVE=1" in line)
    plain = work / "plain.sh"
    plain.write_text("".join(f"export {n}='value {i}'\n" for i, n in enumerate(names)))
    loops = 2000
    reset = f"unset {' '.join(names)}"
    out = []
    for label, between in (("variables unset before", reset), ("variables already set", ":")):
        ours_script = f"i=0; while [ $i -lt {loops} ]; do . '{files[0].path}'; unset {tag}_ACTIVE {tag}_STATE; {between}; i=$((i+1)); done"
        base_script = f"i=0; while [ $i -lt {loops} ]; do . '{plain}'; unset ENVKIT_BENCH_X ENVKIT_BENCH_Y; {between}; i=$((i+1)); done"
        ours, base = alternate(
            functools.partial(run, ["bash", "--noprofile", "--norc", "-c", ours_script]),
            functools.partial(run, ["bash", "--noprofile", "--norc", "-c", base_script]),
            7,
        )
        out.append(
            Measurement(
                f"source activate script vs plain exports (bash, 20 vars, {label})",
                ours,
                base,
                1.5 if between != ":" else None,
                "" if between != ":" else "saves 20 prior values; plain exports cannot restore anything",
            )
        )
    return out


def bench_probe(work: Path, prefix: Path | None = None, rounds: int = 5) -> Measurement:
    """Full probe vs the 2-rank gloo job alone. Without --prefix it builds the env from the test
    suite's real-payload channel; with it, it measures an existing env (e.g. on a GPU machine)."""
    from envkit.activation.runenv import activated_environment

    env = _isolated_env(work)
    if prefix is None:
        from tests.support.wheelchannel import build_wheel_channel

        channel = build_wheel_channel()
        recipe = work / "bench-probe.yaml"
        recipe.write_text(
            f"envkit: 1\nname: bench-probe\nchannels: [{channel.as_uri()}]\npython: '3.11'\n"
            "packages: [pytorch ==2.13.0, numpy, mkl-service, threadpoolctl]\n"
            "probe: {imports: [numpy, torch, mkl], import_orders: [[torch, numpy], [numpy, torch]], ddp: {enabled: true, nproc: 2}}\n"
        )
        prefix = work / "probe-env"
        shutil.rmtree(prefix, ignore_errors=True)
        run([PY, "-m", "envkit", "create", str(recipe), "-p", str(prefix), "--yes", "--no-probe"], env=env)
    # the rank the probe's DDP job runs, as a plain script: the baseline has no package to import
    worker = work / "worker.py"
    worker.write_text((ROOT / "envkit" / "probe" / "inenv" / "ddp_worker.py").read_text())
    act = activated_environment(prefix)
    python = str(prefix / "bin" / "python")
    # the baseline worker imports what the probe's DDP children import after torch
    side = subprocess.run(
        [python, "-c", "import importlib.util as u; print(' '.join(m for m in ('numpy', 'mkl') if u.find_spec(m)))"],
        capture_output=True,
        text=True,
        check=True,
        env=act,
    ).stdout.split()
    logs = str(work / "torchrun-logs")
    ddp = [
        python,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes",
        "1",
        "--nproc_per_node",
        "2",
        "--log_dir",
        logs,
        str(worker),
        *side,
    ]
    probe_cmd = [PY, "-m", "envkit", "probe", "-p", str(prefix), "--json"]
    ours, base = alternate(lambda: run(probe_cmd, env=env), lambda: run(ddp, env=act), rounds)
    return Measurement("full probe vs the 2-rank torch.distributed check alone", ours, base, 1.3, f"{os.cpu_count()} CPUs")


def _fake_envs(root: Path, n_envs: int, n_pkgs: int) -> list[Path]:
    """Envs with real conda-meta shapes (depends, files, paths_data), as conda writes them."""
    envs = []
    for e in range(n_envs):
        prefix = root / f"env{e:02d}"
        meta = prefix / "conda-meta"
        meta.mkdir(parents=True)
        (meta / "history").write_text("")
        for p in range(n_pkgs):
            name = f"pkg{p:03d}" if p else "numpy"
            files = [f"lib/python3.12/site-packages/{name}/mod{i}.py" for i in range(20)]
            record = {
                "name": name,
                "version": "1.0.0",
                "build": "py312_0",
                "build_number": 0,
                "fn": f"{name}-1.0.0-py312_0.conda",
                "channel": "https://conda.anaconda.org/conda-forge/",
                "depends": ["python >=3.12,<3.13.0a0", "libgcc >=14"],
                "subdir": "linux-64",
                "files": files,
                "paths_data": {
                    "paths": [{"_path": f, "path_type": "hardlink", "sha256": "0" * 64, "size_in_bytes": 100} for f in files],
                    "paths_version": 1,
                },
                "requested_spec": name,
                "sha256": "0" * 64,
                "url": f"https://conda.anaconda.org/conda-forge/linux-64/{name}-1.0.0-py312_0.conda",
            }
            (meta / f"{name}-1.0.0-py312_0.json").write_text(json.dumps(record))
        envs.append(prefix)
    return envs


JSON_LOAD_ONLY = """
import json, sys
from pathlib import Path
for prefix in sys.argv[1:]:
    for p in Path(prefix, "conda-meta").glob("*.json"):
        json.loads(p.read_bytes())
"""


def bench_audit(work: Path) -> Measurement:
    root = work / "audit-envs"
    shutil.rmtree(root, ignore_errors=True)
    envs = _fake_envs(root, 50, 300)
    env = _isolated_env(work)
    env["ENVKIT_ENVS_DIR"] = str(root)
    ours, base = alternate(lambda: _audit_all(env), lambda: run([PY, "-c", JSON_LOAD_ONLY, *map(str, envs)]), 5)
    return Measurement("audit --all (50 envs x 300 pkgs) vs json-loading their conda-meta", ours, base, 1.5)


def _audit_all(env: dict[str, str]) -> None:
    proc = subprocess.run([PY, "-m", "envkit", "audit", "--all", "--json"], capture_output=True, text=True, env=env, check=False)
    if proc.returncode not in (0, 1):
        raise SystemExit(proc.stderr)


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


def _payload_recipe(work: Path, extra: Path | None = None, pin: str = "") -> tuple[Path, Path]:
    from tests.support.wheelchannel import build_wheel_channel

    channel = build_wheel_channel()
    recipe = work / "recipes" / "teams.yaml"
    recipe.parent.mkdir(parents=True, exist_ok=True)
    channels = f"[{channel.as_uri()}" + (f", {extra.as_uri()}]" if extra else "]")
    packages = "[pytorch ==2.13.0, numpy, mkl-service, threadpoolctl" + (f", {pin}]" if pin else "]")
    recipe.write_text(f"envkit: 1\nname: teams\nchannels: {channels}\npython: '3.11'\npackages: {packages}\n")
    return recipe, channel


def _small_recipe(work: Path, channel: Path) -> Path:
    """Python and threadpoolctl from the payload channel: a lock that links in 15-25 ms, so that a
    locked create of it is mostly envkit's fixed cost."""
    small = work / "recipes" / "small.yaml"
    small.write_text(f"envkit: 1\nname: small\nchannels: [{channel.as_uri()}]\npython: '3.11'\npackages: [threadpoolctl]\n")
    return small


SYNC_PACKAGES = {"benchpkg": 50, "bigpkg": 5000}  # name -> files: the package a sync bench changes


def _versions_channel(work: Path) -> Path:
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


def _sync_change(work: Path, env: dict[str, str], channel: Path, versions: Path, package: str, rounds: int) -> Measurement:
    """`package` 1.0 -> 2.0 in a torch env: envkit sync vs a raw rattler solve + install of the
    new set over the old prefix, each side put back to 1.0 before its turn."""
    a, b = work / "sync-a", work / "sync-b"
    for p in (a, b):
        shutil.rmtree(p, ignore_errors=True)
    recipe, _ = _payload_recipe(work, versions, f"{package} 1.0")
    run([PY, "-m", "envkit", "create", str(recipe), "-p", str(a), "--yes", "--no-probe"], env=env)

    def raw(version: str) -> list[str]:
        return raw_reinstall(channel, versions, b, Path(env["ENVKIT_PKGS_DIR"]), f"{package} =={version}")

    run(raw("1.0"), env=env)
    sync_cmd = [PY, "-m", "envkit", "sync", "-p", str(a), "--yes", "--no-probe"]
    ours_times: list[float] = []
    base_times: list[float] = []
    for n in range(rounds):
        _payload_recipe(work, versions, f"{package} 1.0")
        run(sync_cmd, env=env)
        run(raw("1.0"), env=env)
        _payload_recipe(work, versions, f"{package} 2.0")
        pair = [(ours_times, sync_cmd), (base_times, raw("2.0"))]
        for into, cmd in pair if n % 2 == 0 else pair[::-1]:  # which goes first alternates (see alternate)
            os.sync()  # the writeback of the put-backs done, untimed (fresh_prefixes)
            into.append(timed(functools.partial(run, cmd, env=env)))
    for p in (a, b):
        shutil.rmtree(p, ignore_errors=True)
    return paired(
        f"sync after one version change ({SYNC_PACKAGES[package]:,} files) vs raw rattler solve+install over the old prefix",
        {"ours": ours_times, "base": base_times},
        1.2,
    )


TEAM_ROUNDS = 11  # each side's rounds in the team rows: a median of 5 moved by 5-10% between runs minutes apart


def bench_teams(work: Path, rounds: int = TEAM_ROUNDS) -> list[Measurement]:
    env = _isolated_env(work)
    out: list[Measurement] = []
    # locked create vs raw rattler install of the lock's records (neither solves)
    recipe, channel = _payload_recipe(work)
    # twice the rounds: the torch env's installs spread over 0.4-0.7 s within one run, so the
    # medians of 11 rounds a side moved the ratio by 0.05 between runs of the same code
    times, ours_cmd, a = _locked_create(work, env, recipe, 2 * rounds)
    out.append(paired("create --locked --no-probe vs raw rattler install of the lock (warm cache)", times, 1.05))
    # the same for a lock of two packages (python and threadpoolctl, 0.1 s to link): what envkit adds
    # to any locked create, where linking is a small part of the time; for reference, no target
    times, _, _ = _locked_create(work, env, _small_recipe(work, channel), 2 * rounds)
    out.append(paired("create --locked --no-probe of a two-package lock vs raw install (envkit's fixed cost)", times, None))

    # sync when nothing changed: absolute, and against envkit --version
    run(ours_cmd, env=env)
    noop = [PY, "-m", "envkit", "sync", "-p", str(a)]
    ours, base = alternate(lambda: run(noop, env=env), lambda: run([PY, "-m", "envkit", "--version"], env=env), 3 * rounds)
    out.append(Measurement("sync with nothing to do vs envkit --version", ours, base, 1.5, f"absolute {ours:.3f}s (target <= 0.3s)"))

    # sync after one version changed vs raw rattler solve+install of the new set over the old prefix
    shutil.rmtree(a, ignore_errors=True)
    versions = _versions_channel(work)
    out += [_sync_change(work, env, channel, versions, package, rounds) for package in SYNC_PACKAGES]

    # lock for three platforms vs three raw solves, on the replica and on its copy with a history
    ours_lock, raw_lock, platforms = lock_job(work)
    times = alternate_runs(lambda: run(ours_lock, env=env), lambda: run(raw_lock, env=env), rounds)
    out.append(paired(f"lock for {len(platforms)} platform(s) ({', '.join(platforms)}) vs raw solves", times, 1.2))
    history_lock, history_raw, _ = lock_job(work, HISTORY)
    times = alternate_runs(lambda: run(history_lock, env=env), lambda: run(history_raw, env=env), rounds)
    if _locked_files(Path(history_lock[-1]).with_suffix(".lock")) != _locked_files(Path(ours_lock[-1]).with_suffix(".lock")):
        raise SystemExit(
            "bench teams: the lock on the replica with a history picked other packages; the two rows would time different solves"
        )
    out.append(paired(f"lock for {len(platforms)} platform(s), {HISTORY} older versions of each package, vs raw solves", times, 1.2))
    return out


def _locked_create(work: Path, env: dict[str, str], recipe: Path, rounds: int) -> tuple[dict[str, list[float]], list[str], Path]:
    """`envkit create --locked` of `recipe`, locked first, against the raw install of its lock, each
    into a prefix of its own (fresh_prefixes), the package cache warm: the times, and envkit's
    command for a prefix that is left empty."""
    run([PY, "-m", "envkit", "lock", str(recipe)], env=env)
    a = work / f"{recipe.stem}-a"

    def ours(prefix: Path) -> list[str]:
        return [PY, "-m", "envkit", "create", str(recipe), "-p", str(prefix), "--locked", "--yes", "--no-probe"]

    def raw(prefix: Path) -> list[str]:
        return [PY, "-c", RAW_LOCKED_INSTALL, str(recipe.with_suffix(".lock")), str(prefix), env["ENVKIT_PKGS_DIR"]]

    with fresh_prefixes(work / f"{recipe.stem}-rounds") as fresh:
        run(ours(next(fresh)), env=env)  # warm the package cache
        # each install starts with the disk's writeback of the one before done (fresh_prefixes)
        times = alternate_runs(lambda: run(ours(next(fresh)), env=env), lambda: run(raw(next(fresh)), env=env), rounds, os.sync)
    return times, ours(a), a


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
        channel = _with_history(channel, work / f"history-{history}" / "conda-forge", history)
    recipe = work / f"history-{history}" / "recipes" / "multi.yaml"
    recipe.parent.mkdir(parents=True, exist_ok=True)
    recipe.write_text(
        f"envkit: 1\nname: multi\nchannels: [{channel.as_uri()}]\nplatforms: [{', '.join(platforms)}]\n"
        "python: '3.12'\npackages: [pytorch, numpy]\n"
    )
    loaded = load_recipe(str(recipe))
    jobs = {p: [s.spec for s in compile_recipe(loaded, p).conda_specs] for p in platforms}  # what envkit solves, per platform
    return [PY, "-m", "envkit", "lock", str(recipe)], [PY, "-c", RAW_SOLVES, channel.as_uri(), json.dumps(jobs)], platforms


def _locked_files(lock: Path) -> list[str]:
    return sorted(line.rsplit("/", 1)[-1] for line in lock.read_text().splitlines() if line.lstrip().startswith("- conda: "))


HISTORY = 300  # older versions per package: conda-forge carries hundreds of builds of pytorch, numpy and python


def _with_history(channel: Path, out: Path, versions: int) -> Path:
    """A copy of `channel`'s repodata where every record also comes in `versions` older versions
    (0.0.N, same depends): the solver must read and weigh them and still pick what it picked before.
    Metadata only: a lock downloads nothing."""
    for repodata in channel.glob("*/repodata.json"):
        data = json.loads(repodata.read_text())
        for key in ("packages", "packages.conda"):
            records = data.get(key) or {}
            older = {}
            for filename, record in records.items():
                build_ext = filename.removeprefix(f"{record['name']}-{record['version']}-")
                for n in range(versions):
                    older[f"{record['name']}-0.0.{n}-{build_ext}"] = {**record, "version": f"0.0.{n}"}
            records.update(older)
        target = out / repodata.parent.name / "repodata.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(data))
    return out


def _conda() -> Path:
    found = os.environ.get("ENVKIT_TEST_CONDA") or str(ROOT / ".conda-test" / "bin" / "conda")
    if not Path(found).exists():
        raise SystemExit("bench conda: needs the test conda with envkit installed (bash tools/test.sh makes .conda-test)")
    return Path(found)


HOOK_TIMING = """
import contextlib, io, sys, time
from conda.base.context import context, reset_context
from conda.core.prefix_data import PrefixData
reset_context()
which, prefix = sys.argv[1:3]
records = tuple(PrefixData(prefix).iter_records())
t0 = time.perf_counter()
if which == "doctor":
    from envkit.conda.plugin import doctor_check
    with contextlib.redirect_stdout(io.StringIO()):
        doctor_check(prefix, False)
else:
    from envkit.conda.hooks import judge_transaction
    judge_transaction(prefix, records[:1], records[:1])
print(time.perf_counter() - t0)
import os
os._exit(0)
"""


def _hook_seconds(conda: Path, which: str, prefix: Path, env: dict[str, str]) -> float:
    """envkit's own time inside a conda process that has not loaded envkit yet (imports included):
    conda loaded, its records read, then the hook."""
    times = []
    for _ in range(7):
        cmd = [str(conda.parent / "python"), "-c", HOOK_TIMING, which, str(prefix)]
        times.append(float(subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout))
    return statistics.median(times)


def bench_conda(work: Path) -> list[Measurement]:
    """The plugin's cost inside conda: conda --help with and without plugins, conda doctor and a
    solve with and without envkit's part, on the seed env as conda makes it."""
    from tests.support.wheelchannel import build_wheel_channel

    conda = _conda()
    env = {k: v for k, v in _isolated_env(work).items() if not k.startswith("ENVKIT_")}
    env.update(CONDA_PKGS_DIRS=str(work / "conda-pkgs"), CONDA_ADD_PIP_AS_PYTHON_DEPENDENCY="false")
    env.pop("REQUESTS_CA_BUNDLE", None)
    out = []
    ours, base = alternate(lambda: run([str(conda), "--help"], env=env), lambda: run([str(conda), "--no-plugins", "--help"], env=env), 15)
    out.append(
        Measurement(
            "conda --help with envkit installed vs --no-plugins", ours, base, None, f"extra {1000 * (ours - base):.0f} ms (target <= 50 ms)"
        )
    )
    channel = build_wheel_channel().as_uri()
    prefix = work / "conda-seed"
    shutil.rmtree(prefix, ignore_errors=True)
    run(
        [
            str(conda),
            "create",
            "-y",
            "-q",
            "-p",
            str(prefix),
            "--override-channels",
            "-c",
            channel,
            "python=3.11",
            "pytorch=2.13.0",
            "numpy",
            "mkl-service",
        ],
        env=env,
    )
    doctor = [str(conda), "doctor", "-p", str(prefix)]
    ours, base = alternate(lambda: run(doctor, env=env), lambda: run([str(conda), "--no-plugins", "doctor", "-p", str(prefix)], env=env), 7)
    out.append(
        Measurement(
            "conda doctor with envkit's check vs without",
            ours,
            base,
            None,
            f"envkit's part {1000 * (ours - base):.0f} ms (target <= 300 ms)",
        )
    )
    doctor_s = _hook_seconds(conda, "doctor", prefix, env)
    out.append(Measurement("envkit's health check in a conda process, imports included (s vs the 0.3 s budget)", doctor_s, 0.3, 1.0))
    guard_s = _hook_seconds(conda, "guard", prefix, env)
    out.append(Measurement("envkit's guard on a transaction, imports included (s vs the 0.2 s budget)", guard_s, 0.2, 1.0))
    solve = [str(conda), "install", "--dry-run", "-y", "-p", str(prefix), "--override-channels", "-c", channel, "threadpoolctl"]
    ours, base = alternate(lambda: run(solve, env=env), lambda: run(solve, env={**env, "CONDA_PLUGINS_ENVKIT_GUARD": "off"}), 7)
    out.append(
        Measurement(
            "conda install --dry-run with envkit_guard warn vs off",
            ours,
            base,
            None,
            f"the guard adds {1000 * (ours - base):.0f} ms (target <= 200 ms)",
        )
    )
    return out


BENCHES = ("version", "activation", "audit", "create", "probe", "teams", "conda")


def run_bench(name: str, work: Path, args: argparse.Namespace) -> list[Measurement]:
    if name == "version":
        return bench_version()
    if name == "activation":
        return bench_activation(work)
    if name == "audit":
        return [bench_audit(work)]
    if name == "create":
        return bench_create(work)
    if name == "teams":
        return bench_teams(work, args.rounds or TEAM_ROUNDS)
    if name == "conda":
        return bench_conda(work)
    return [bench_probe(work, args.prefix, args.rounds or 5)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME", help="any of: " + ", ".join(BENCHES))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--prefix", type=Path, help="probe: measure this existing env instead of building one")
    parser.add_argument("--rounds", type=int, help=f"rounds of each side: probe (default 5), teams (default {TEAM_ROUNDS})")
    args = parser.parse_args()
    names = args.names or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    # pip compiles bytecode when it installs a package; an editable checkout on a machine with
    # PYTHONDONTWRITEBYTECODE set would otherwise recompile envkit on every run and skew the ratios.
    compileall.compile_dir(str(ROOT / "envkit"), quiet=1)
    results: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="envkit-bench-") as tmp:
        for name in names:
            for m in run_bench(name, Path(tmp), args):
                results.append(m)
                verdict = "" if m.target is None else ("  ok" if m.ratio <= m.target else "  OVER TARGET")
                target = "" if m.target is None else f" (target <= {m.target}x)"
                print(
                    f"{m.name}: {m.ours:.3f}s vs {m.baseline:.3f}s = {m.ratio:.2f}x{target}{verdict}{'  ' + m.note if m.note else ''}",
                    flush=True,
                )
    if args.json:
        print(
            json.dumps(
                [{"name": m.name, "ours_s": m.ours, "baseline_s": m.baseline, "ratio": m.ratio, "target": m.target} for m in results],
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
