"""A lock at conda-forge's scale: `envkit lock yolov8-cpu` for its four platforms against a channel
the size of conda-forge, and raw rattler solves of the same specs, with the peak memory of each.

    python bench/scale.py [--rounds 3] [--records 500000]

conda-forge's linux-64 repodata holds several hundred thousand records. The channel here is the
test replica (tests/support/replica.py: the shipped recipes' packages, as conda-forge builds them)
with every record also in older versions, and filler packages with realistic names, versions,
builds and depends: `--records` in linux-64 and 40% of that in each other subdir (noarch too).
Metadata only: a lock downloads nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import PY, ROOT, add_older_versions, isolated_env

PLATFORMS = ("linux-64", "linux-aarch64", "osx-arm64", "win-64")
OLDER = 40  # older versions of each real record: conda-forge keeps hundreds of builds of numpy, python, pytorch
STEMS = (
    *("arrow", "boost", "cairo", "dask", "eigen", "fftw", "gdal", "hdf5", "icu", "jpeg", "krb5", "lz4", "netcdf", "openssl"),
    *("pandas", "proj", "qt", "re2", "snappy", "tiff", "uvloop", "vtk", "xarray", "yaml", "zstd", "zarr", "grpc", "nccl"),
)
PREFIXES = ("", "lib", "py", "r-", "perl-", "ros-humble-", "go-", "rust-", "jupyterlab-", "font-", "sphinx-", "types-")
RUNTIME = {
    "linux-64": ["libgcc >=14", "__glibc >=2.17"],
    "linux-aarch64": ["libgcc >=14", "__glibc >=2.17"],
    "osx-arm64": ["libcxx >=19", "__osx >=11.0"],
    "win-64": ["ucrt >=10.0.20348.0", "vc >=14.3"],
    "noarch": [],
}
# what a raw solve is given in place of envkit's view of the machine: each platform's floors
RAW_SOLVES = """
import asyncio, json, sys, rattler
channel, jobs = sys.argv[1], json.loads(sys.argv[2])
floors = {"linux-64": ["__unix=0", "__linux=5.0", "__glibc=2.28"], "linux-aarch64": ["__unix=0", "__linux=5.0", "__glibc=2.28"],
          "osx-arm64": ["__unix=0", "__osx=11.0"], "win-64": ["__win=0"]}
for platform, specs in jobs.items():
    vp = [rattler.GenericVirtualPackage(rattler.PackageName(n), rattler.Version(v), rattler.BuildString("0"))
          for n, v in (e.split("=") for e in floors[platform])]
    asyncio.run(rattler.solve([channel], specs, platforms=[platform, "noarch"], virtual_packages=vp))
import os
os._exit(0)
"""
# one run under a fresh parent, so that the children's peak RSS is that run's alone
PEAK = "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"


def filler(subdir: str, count: int, rng: random.Random) -> dict[str, dict[str, object]]:
    """`count` records of made-up packages shaped like conda-forge's: ~20 records a name, versions
    X.Y.Z, Python builds for a third of them, depends on earlier names and the platform's runtime."""
    out: dict[str, dict[str, object]] = {}
    names: list[str] = []
    while len(out) < count:
        name = f"{rng.choice(PREFIXES)}{rng.choice(STEMS)}{len(names)}"
        names.append(name)
        python = rng.random() < 0.33
        for _ in range(rng.randint(5, 35)):
            version = f"{rng.randint(0, 30)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
            build_number = rng.randint(0, 5)
            build = f"{'py312' if python else ''}h{rng.getrandbits(32):08x}_{build_number}"
            depends = [
                f"{dep} >={rng.randint(0, 9)}.{rng.randint(0, 9)}"
                for dep in rng.sample(names[-2000:], k=min(len(names) - 1, rng.randint(0, 5)))
                if dep != name
            ]
            depends += RUNTIME[subdir] + (["python >=3.12,<3.13.0a0", "python_abi 3.12.* *_cp312"] if python else [])
            out[f"{name}-{version}-{build}.conda"] = {
                "name": name,
                "version": version,
                "build": build,
                "build_number": build_number,
                "depends": depends,
                "subdir": subdir,
                "md5": f"{rng.getrandbits(128):032x}",
                "sha256": f"{rng.getrandbits(256):064x}",
                "size": rng.randint(10_000, 50_000_000),
                "timestamp": 1_700_000_000_000 + rng.randint(0, 10**11),
                "license": "BSD-3-Clause",
                **({"noarch": "python"} if subdir == "noarch" else {}),
            }
            if len(out) >= count:
                break
    return out


def big_channel(work: Path, linux_records: int) -> Path:
    """The replica's conda-forge, each real record also in OLDER older versions, plus filler."""
    from tests.support.replica import build_replica

    replica = build_replica(work / "replica")["conda-forge"]
    out = work / "big" / "conda-forge"
    rng = random.Random(46)
    for subdir in (*PLATFORMS, "noarch"):
        source = replica / subdir / "repodata.json"
        empty: dict[str, Any] = {"info": {"subdir": subdir}, "packages": {}, "packages.conda": {}}
        data: dict[str, Any] = json.loads(source.read_text()) if source.is_file() else empty
        add_older_versions(data, OLDER)
        data["packages.conda"].update(filler(subdir, linux_records if subdir == "linux-64" else linux_records * 2 // 5, rng))
        target = out / subdir / "repodata.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(data))
        print(f"{subdir}: {len(data['packages']) + len(data['packages.conda']):,} records", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=500_000, help="records in linux-64 (each other subdir: 40%% of it)")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="build the channel in DIR, or reuse the one there")
    args = parser.parse_args()
    from envkit.recipe.compile import compile_recipe
    from envkit.recipe.loader import load_recipe

    with tempfile.TemporaryDirectory(prefix="envkit-scale-") as tmp:
        work = Path(tmp)
        kept = args.keep / "big" / "conda-forge" if args.keep else None
        channel = kept if kept is not None and kept.is_dir() else big_channel(args.keep or work, args.records)
        env = isolated_env(work)
        recipe = load_recipe(str(ROOT / "recipes" / "yolov8-cpu.yaml"))
        jobs = {p: [s.spec for s in compile_recipe(recipe, p).conda_specs] for p in PLATFORMS}
        ours = [PY, "-m", "envkit", "lock", "yolov8-cpu", f"--mirror=conda-forge={channel.as_uri()}", "-o", str(work / "y.lock")]
        raw = [PY, "-c", RAW_SOLVES, channel.as_uri(), json.dumps(jobs)]
        times: dict[str, list[float]] = {"ours": [], "raw": []}
        peaks: dict[str, list[int]] = {"ours": [], "raw": []}
        for n in range(args.rounds):
            for name, cmd in [("ours", ours), ("raw", raw)][:: 1 if n % 2 == 0 else -1]:
                start = time.perf_counter()
                done = subprocess.run([PY, "-c", PEAK, *cmd], env=env, cwd=work, capture_output=True, text=True, check=False)
                times[name].append(time.perf_counter() - start)
                if done.returncode != 0:
                    raise SystemExit(f"{name} failed: {done.stderr[-2000:]}")
                peaks[name].append(int(done.stdout.split()[-1]))
        locked = json.loads(
            subprocess.run(
                [PY, "-c", "import sys, yaml, json; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))", str(work / "y.lock")],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        print(f"lock platforms: {sorted(locked['environments']['default']['packages'])}")
        t = {k: statistics.median(v) for k, v in times.items()}
        m = {k: max(v) / 1024 for k, v in peaks.items()}
        print(
            f"lock of 4 platforms on the large channel: {t['ours']:.2f}s vs raw solves {t['raw']:.2f}s = {t['ours'] / t['raw']:.2f}x (target <= 1.2x)"
        )
        print(f"peak RSS: {m['ours']:.0f} MiB vs {m['raw']:.0f} MiB = {m['ours'] / m['raw']:.2f}x (target <= 1.3x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
