"""envkit benchmarks: each one times envkit and a baseline in the same run, alternating, and prints
the ratio of medians. Our machines are shared and noisy; only ratios mean anything.

    python bench/run.py                 # all
    python bench/run.py version audit   # some
"""

from __future__ import annotations

import argparse
import compileall
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    HISTORY,
    PY,
    RAW_INSTALL,
    RAW_LOCKED_INSTALL,
    ROOT,
    SYNC_PACKAGES,
    Measurement,
    alternate,
    alternate_runs,
    fresh_prefixes,
    isolated_env,
    lock_job,
    locked_files,
    paired,
    payload_recipe,
    raw_reinstall,
    run,
    small_recipe,
    timed,
    versions_channel,
)

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


def bench_create(work: Path) -> list[Measurement]:
    from tests.support.wheelchannel import build_wheel_channel, cache_root

    channel = build_wheel_channel()
    specs = ["python 3.11.*", "pytorch ==2.13.0", "numpy", "mkl-service", "threadpoolctl"]
    recipe = work / "bench-create.yaml"
    recipe.write_text(
        f"envkit: 1\nname: bench-create\nchannels: [{channel.as_uri()}]\npython: '3.11'\npackages: [pytorch ==2.13.0, numpy, mkl-service, threadpoolctl]\n"
    )
    env = isolated_env(work)

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

    env = isolated_env(work)
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
    env = isolated_env(work)
    env["ENVKIT_ENVS_DIR"] = str(root)
    ours, base = alternate(lambda: _audit_all(env), lambda: run([PY, "-c", JSON_LOAD_ONLY, *map(str, envs)]), 5)
    return Measurement("audit --all (50 envs x 300 pkgs) vs json-loading their conda-meta", ours, base, 1.5)


def _audit_all(env: dict[str, str]) -> None:
    proc = subprocess.run([PY, "-m", "envkit", "audit", "--all", "--json"], capture_output=True, text=True, env=env, check=False)
    if proc.returncode not in (0, 1):
        raise SystemExit(proc.stderr)


def _sync_change(work: Path, env: dict[str, str], channel: Path, versions: Path, package: str, rounds: int) -> Measurement:
    """`package` 1.0 -> 2.0 in a torch env: envkit sync vs a raw rattler solve + install of the
    new set over the old prefix, each side put back to 1.0 before its turn."""
    a, b = work / "sync-a", work / "sync-b"
    for p in (a, b):
        shutil.rmtree(p, ignore_errors=True)
    recipe, _ = payload_recipe(work, versions, f"{package} 1.0")
    run([PY, "-m", "envkit", "create", str(recipe), "-p", str(a), "--yes", "--no-probe"], env=env)

    def raw(version: str) -> list[str]:
        return raw_reinstall(channel, versions, b, Path(env["ENVKIT_PKGS_DIR"]), f"{package} =={version}")

    run(raw("1.0"), env=env)
    sync_cmd = [PY, "-m", "envkit", "sync", "-p", str(a), "--yes", "--no-probe"]
    ours_times: list[float] = []
    base_times: list[float] = []
    for n in range(rounds):
        payload_recipe(work, versions, f"{package} 1.0")
        run(sync_cmd, env=env)
        run(raw("1.0"), env=env)
        payload_recipe(work, versions, f"{package} 2.0")
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
    env = isolated_env(work)
    out: list[Measurement] = []
    # locked create vs raw rattler install of the lock's records (neither solves)
    recipe, channel = payload_recipe(work)
    # twice the rounds: the torch env's installs spread over 0.4-0.7 s within one run, so the
    # medians of 11 rounds a side moved the ratio by 0.05 between runs of the same code
    times, ours_cmd, a = _locked_create(work, env, recipe, 2 * rounds)
    out.append(paired("create --locked --no-probe vs raw rattler install of the lock (warm cache)", times, 1.10))
    # the same for a lock of two packages (python and threadpoolctl, 0.1 s to link): what envkit adds
    # to any locked create, where linking is a small part of the time; for reference, no target
    times, _, _ = _locked_create(work, env, small_recipe(work, channel), 2 * rounds)
    out.append(paired("create --locked --no-probe of a two-package lock vs raw install (envkit's fixed cost)", times, None))

    # sync when nothing changed: absolute, and against envkit --version
    run(ours_cmd, env=env)
    noop = [PY, "-m", "envkit", "sync", "-p", str(a)]
    ours, base = alternate(lambda: run(noop, env=env), lambda: run([PY, "-m", "envkit", "--version"], env=env), 3 * rounds)
    out.append(Measurement("sync with nothing to do vs envkit --version", ours, base, 1.5, f"absolute {ours:.3f}s (target <= 0.3s)"))

    # sync after one version changed vs raw rattler solve+install of the new set over the old prefix
    shutil.rmtree(a, ignore_errors=True)
    versions = versions_channel(work)
    out += [_sync_change(work, env, channel, versions, package, rounds) for package in SYNC_PACKAGES]

    # lock for three platforms vs three raw solves, on the replica and on its copy with a history
    ours_lock, raw_lock, platforms = lock_job(work)
    times = alternate_runs(lambda: run(ours_lock, env=env), lambda: run(raw_lock, env=env), rounds)
    out.append(paired(f"lock for {len(platforms)} platform(s) ({', '.join(platforms)}) vs raw solves", times, 1.2))
    history_lock, history_raw, _ = lock_job(work, HISTORY)
    times = alternate_runs(lambda: run(history_lock, env=env), lambda: run(history_raw, env=env), rounds)
    if locked_files(Path(history_lock[-1]).with_suffix(".lock")) != locked_files(Path(ours_lock[-1]).with_suffix(".lock")):
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
    env = {k: v for k, v in isolated_env(work).items() if not k.startswith("ENVKIT_")}
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
