"""threads: the recipe's variables in effect in the activated env, and threads per DDP rank against
the usable CPUs (torchrun sets OMP_NUM_THREADS=1 for its workers when it is unset)."""

from __future__ import annotations

import os
from typing import Any

from .report import Check, check


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


THREADS_TITLE = "thread settings in effect"


# radon cc 25: one comparison per threading variable and pool the probe sees; a table would hide which is judged how
def check_threads(cfg: dict[str, Any], runtimes: dict[str, Any], gloo: dict[str, Any] | None = None) -> Check:
    """The recipe's variables in the activated env, then threads per DDP rank against the CPUs. The
    ranks' own thread counts are used when the gloo job ran (torchrun sets OMP_NUM_THREADS=1 for
    its workers when it is unset); otherwise the seed child's, as ranks started another way get."""
    data = runtimes.get("data") or {}
    env = data.get("env") or {}
    expected = cfg.get("threading", {})
    problems: list[str] = []
    for var, want in sorted(expected.items()):
        have = os.environ.get(var)
        if have != want:
            problems.append(f"{var} is {have!r}, the recipe sets {want!r}")
    job = (gloo or {}).get("data") or {}
    launcher = job.get("launcher", "torchrun")
    nproc = int(job.get("nproc") or cfg.get("nproc", 2)) if cfg.get("ddp", True) else 1  # a Slurm job's ranks are its tasks
    cpus = cfg["usable_cpus"] if isinstance(cfg.get("usable_cpus"), int) else usable_cpus()
    ranks = [n for n in job.get("rank_threads", []) if isinstance(n, int)]
    measured = bool(ranks) or data.get("torch_threads") is not None  # no torch: no threads per rank to weigh
    per_rank = max(ranks) if ranks else (data.get("torch_threads") or 1)
    where = f"in each of {nproc} {launcher} ranks" if ranks else f"in a process (x {nproc} ranks)"
    omp, mkl = env.get("OMP_NUM_THREADS"), env.get("MKL_NUM_THREADS")
    torch_part = f"torch threads {per_rank} {where}" if measured else "no torch to count threads in"
    evidence = f"OMP_NUM_THREADS={omp} MKL_NUM_THREADS={mkl}; {torch_part}; {cpus} usable CPUs"
    info = {"expected": expected, "torch_threads": data.get("torch_threads"), "rank_threads": ranks, "cpus": cpus, "nproc": nproc}
    if problems:
        return check(
            "threads",
            THREADS_TITLE,
            "fail",
            "; ".join(problems),
            "activate the env (conda activate / envkit run) or run envkit audit --fix",
            info,
        )
    share = max(1, cpus // max(nproc, 1))
    if measured and nproc > 1 and per_rank * nproc > cpus:
        return check(
            "threads",
            THREADS_TITLE,
            "warn",
            evidence + f": {nproc} x {per_rank} threads oversubscribe the CPUs",
            _advice(share, nproc, launcher),
            info,
        )
    if ranks and env.get("OMP_NUM_THREADS") is None and nproc > 1 and per_rank < share:
        return check(
            "threads",
            THREADS_TITLE,
            "warn",
            evidence + f": OMP_NUM_THREADS is unset, so torch.distributed.run gave each rank {per_rank} thread(s)",
            _advice(share, nproc, launcher),
            info,
        )
    return check("threads", THREADS_TITLE, "pass", evidence, "", info)


def _advice(share: int, nproc: int, launcher: str = "torchrun") -> str:
    """Threads per rank, said as the audit says it: one thread env-wide slows every single-process
    run (EK029), so a share of one is set per launch, not in the recipe. A Slurm job's ranks get
    their share from the job's own figure."""
    if launcher == "srun":
        return f"in the job script, export OMP_NUM_THREADS=${{SLURM_CPUS_PER_TASK:-1}} before srun ({share} per rank for {nproc} ranks here), not env-wide (EK029)"
    if share <= 1:
        return f"set OMP_NUM_THREADS=1 per launch (OMP_NUM_THREADS=1 torchrun --nproc-per-node {nproc} ...), not env-wide (EK029)"
    return f"set threading.omp_num_threads to about physical cores / ranks ({share} here)"
