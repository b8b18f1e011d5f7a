"""The threading policy of the shipped recipes, measured: how OMP_NUM_THREADS changes CPU
inference in one process and a 2-rank DDP training step (gloo), in the same run, alternating.

    python bench/threads.py [--prefix ENV] [--rounds 3]

Without --prefix it builds an env from the test suite's real-payload channel (torch 2.13.0 CPU,
MKL, numpy). Only ratios mean anything on a shared machine; README's "Threading policy" has the
figures and the decision they support.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODEL = """
import os, sys, time, torch
import torch.nn as nn

def model():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
        nn.Flatten(), nn.Linear(64 * 16, 10),
    )
"""

INFERENCE = (
    MODEL
    + """
torch.manual_seed(0)
net = model().eval()
x = torch.randn(8, 3, 128, 128)
with torch.no_grad():
    for _ in range(3):
        net(x)
    t = time.perf_counter()
    for _ in range(15):
        net(x)
print((time.perf_counter() - t) / 15, torch.get_num_threads())
"""
)

DDP = (
    MODEL
    + """
import torch.distributed as dist
dist.init_process_group("gloo")
torch.manual_seed(dist.get_rank())
net = nn.parallel.DistributedDataParallel(model())
opt = torch.optim.SGD(net.parameters(), lr=0.01)
x, y = torch.randn(8, 3, 128, 128), torch.randint(0, 10, (8,))
def step():
    opt.zero_grad()
    nn.functional.cross_entropy(net(x), y).backward()
    opt.step()
for _ in range(2):
    step()
dist.barrier()
t = time.perf_counter()
for _ in range(8):
    step()
dist.barrier()
if dist.get_rank() == 0:
    print((time.perf_counter() - t) / 8, torch.get_num_threads())
dist.destroy_process_group()
"""
)


def _env(omp: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env["MKL_THREADING_LAYER"] = "GNU"
    if omp is not None:
        env["OMP_NUM_THREADS"] = omp
    return env


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed:\n{proc.stderr[-2000:]}")
    seconds, threads = proc.stdout.split()[-2:]
    return float(seconds), int(threads)


def measure(python: Path, work: Path, rounds: int) -> list[str]:
    inference, ddp = work / "inference.py", work / "ddp.py"
    inference.write_text(INFERENCE)
    ddp.write_text(DDP)
    cores = os.cpu_count() or 1
    ranks = 2
    per_rank = max(1, cores // ranks)
    lines = [f"{cores} CPUs, {ranks} DDP ranks: physical cores / ranks = {per_rank}"]
    one: dict[str, list[float]] = {}
    for label, omp in (("OMP_NUM_THREADS=1", "1"), (f"OMP_NUM_THREADS={cores} (all cores)", str(cores)), ("unset (torch's default)", None)):
        one[label] = []
        for _ in range(rounds):
            seconds, threads = _run([str(python), str(inference)], _env(omp))
            one[label].append(seconds)
        one[label + f" -> {threads} threads"] = one.pop(label)
    base = statistics.median(next(iter(one.values())))
    lines.append("CPU inference, one process (batch 8, 3x128x128, small CNN), seconds per batch:")
    lines += [
        f"  {label}: {statistics.median(v):.4f}s ({statistics.median(v) / base:.2f}x of OMP_NUM_THREADS=1)" for label, v in one.items()
    ]
    launch = [str(python), "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks), str(ddp)]
    two: dict[str, list[float]] = {}
    for label, omp in (
        (f"OMP_NUM_THREADS={per_rank} (cores / ranks)", str(per_rank)),
        (f"OMP_NUM_THREADS={cores} per rank (all cores each)", str(cores)),
        ("unset (torchrun sets 1 per rank)", None),
    ):
        two[label] = []
        for _ in range(rounds):
            seconds, _threads = _run(launch, _env(omp))
            two[label].append(seconds)
    base = statistics.median(next(iter(two.values())))
    lines.append(f"DDP training step, {ranks} ranks on gloo (same CNN, batch 8 per rank), seconds per step:")
    lines += [f"  {label}: {statistics.median(v):.4f}s ({statistics.median(v) / base:.2f}x of cores / ranks)" for label, v in two.items()]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prefix", type=Path, help="an env with torch (default: build one from the test channel)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envkit-threads-") as tmp:
        work = Path(tmp)
        prefix = args.prefix
        if prefix is None:
            from tests.support.wheelchannel import build_wheel_channel

            channel = build_wheel_channel()
            recipe = work / "threads.yaml"
            recipe.write_text(
                f"envkit: 1\nname: threads\nchannels: [{channel.as_uri()}]\npython: '3.11'\npackages: [pytorch ==2.13.0, numpy, mkl-service]\n"
            )
            prefix = work / "env"
            env = {**os.environ, "ENVKIT_ENVS_DIR": str(work / "envs")}
            subprocess.run(
                [sys.executable, "-m", "envkit", "create", str(recipe), "-p", str(prefix), "--yes", "--no-probe"],
                check=True,
                env=env,
                capture_output=True,
            )
        for line in measure(prefix / "bin" / "python", work, args.rounds):
            print(line, flush=True)
        if args.prefix is None:
            shutil.rmtree(prefix, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
