"""ddp-seed and ddp-gloo. A parent imports the MKL side first (as the Ultralytics trainer does) and
starts a child that imports torch first and then the MKL side (the seed scenario), reports what is
loaded, and then runs `torch.distributed.run` with a gloo all_reduce in the same process, as the
job's launcher. When that child fails at its imports, the job is run again as a plain
`python -m torch.distributed.run` from the same kind of parent, so the ranks' own evidence is
reported."""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from typing import Any

from .imports import importable, mkl_side
from .proc import PY, module_cmd, run_module
from .report import Check, check, excerpt, parse_sections

SEED_TITLE = "MKL parent, torch-first children"
GLOO_TITLE = "torch.distributed.run --nproc_per_node %d gloo all_reduce"
SRUN_TITLE = "srun --ntasks %d gloo all_reduce (the Slurm job's ranks)"
SEED_REMEDY = "set MKL_THREADING_LAYER=GNU for this env (envkit writes it into etc/conda/activate.d; envkit audit --fix repairs it)"


def child_order(cfg: dict[str, Any]) -> list[str]:
    """What the torch-first child imports: a DDP worker's order, then the recipe's BLAS users."""
    order = [m for m in ("torch", "numpy", "mkl") if importable(m)]
    order += [m for m in cfg.get("imports", []) if m not in order and m in ("scipy", "sklearn")]
    return order


def observation_tags() -> list[str]:
    return [tag for tag, module in (("NUMERIC", "numpy"), ("GPU", "torch")) if importable(module)]


def ddp_checks(cfg: dict[str, Any], timeout: float) -> tuple[Check, Check, dict[str, Any] | None]:
    """(seed check, gloo check, the seed child's runtime observations or None)."""
    side = mkl_side()
    if not importable("torch"):
        skip = "torch is not installed"
        return check("ddp-seed", SEED_TITLE, "skip", skip), check("ddp-gloo", GLOO_TITLE % 0, "skip", skip), None
    ddp = bool(cfg.get("ddp", True))
    workdir = tempfile.mkdtemp(prefix="ddp-", dir=cfg.get("workdir") or None) if ddp else None
    try:
        return _ddp_checks(cfg, timeout, side, workdir)
    finally:
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def _ddp_fail(cid: str, title: str, child: dict[str, Any], info: dict[str, Any], seconds: Any) -> Check:
    ev = excerpt(child.get("stderr"))
    if child.get("timeout"):
        ev = "timed out; killed with everything it started" + ("\n" + ev if ev else "")
    ev = ev or "the child failed with no output"
    return check(cid, title, "fail", ev, SEED_REMEDY if "MKL_THREADING_LAYER" in ev else "see the evidence", info, seconds)


def _ddp_checks(cfg: dict[str, Any], timeout: float, side: list[str], workdir: str | None) -> tuple[Check, Check, dict[str, Any] | None]:
    job, job_cmd, title, nproc = the_job(cfg, side, workdir)
    order = child_order(cfg)
    seed_cmd = module_cmd("seed_child", json.dumps(order), json.dumps(job), json.dumps(observation_tags()))
    r = from_mkl_parent(side, seed_cmd, timeout)
    seed_child = r["child"]
    sections = parse_sections(seed_child.get("stdout"))
    parent_ran = r["parent_ran"]
    seed_info = {"parent_imports": side, "child_imports": order, "parent_ran": parent_ran}
    launcher = "srun" if "command" in job else "torchrun"
    gloo_info: dict[str, Any] = {"parent_imports": side, "nproc": nproc, "launcher": launcher, "parent_ran": parent_ran}
    observed = None
    # The inventory line is printed once the child's imports are done: then the seed scenario passed.
    if not parent_ran or "JSON" not in sections or (not job and seed_child.get("returncode") != 0):
        seed = _ddp_fail("ddp-seed", SEED_TITLE, seed_child, seed_info, r["seconds"])
    else:
        how = "a child of a parent that imported {} imported {}".format(", ".join(side) or "nothing", ", ".join(order))
        seed = check("ddp-seed", SEED_TITLE, "pass", how, "", seed_info, r["seconds"])
        observed = {
            "returncode": 0,
            "stdout": "",
            "stderr": seed_child.get("stderr", ""),
            "data": sections.get("JSON"),
            "sections": sections,
            "seconds": r["seconds"],
        }
    if not job:
        return seed, check("ddp-gloo", title, "skip", "disabled by the recipe (probe.ddp)"), observed
    ran = seed_child
    if observed is None and parent_ran:
        ran = from_mkl_parent(side, job_cmd, timeout)["child"]
    ranks = sorted(line.strip() for line in (ran.get("stdout") or "").splitlines() if line.startswith("rank "))
    if ran.get("returncode") != 0 or len(ranks) != nproc:
        gloo = _ddp_fail("ddp-gloo", title, ran, gloo_info, r["seconds"])
    else:
        gloo_info["rank_threads"] = [field(line, "threads") for line in ranks]
        gloo_info["rank_omp_num_threads"] = [field(line, "OMP_NUM_THREADS") for line in ranks]
        gloo = check("ddp-gloo", title, "pass", "\n".join(ranks), "", gloo_info, r["seconds"])
    return seed, gloo, observed


def the_job(cfg: dict[str, Any], side: list[str], workdir: str | None) -> tuple[dict[str, Any], list[str], str, int]:
    """(what the seed child launches, the same job as a command of its own, the check's title, its
    ranks). Inside a Slurm batch job of two or more tasks the ranks are the job's, as `srun` starts
    them with the launcher's environment (--export=ALL: under `sbatch --export=NONE` srun would
    otherwise start them with none); elsewhere torchrun's local processes."""
    nproc = int(cfg.get("nproc", 2))
    if workdir is None:  # the recipe turned the job off
        return {}, [], GLOO_TITLE % nproc, nproc
    worker = module_cmd("ddp_worker", *side)
    tasks = int(cfg.get("slurm_tasks") or 0)
    srun = shutil.which("srun") if tasks >= 2 else None
    if srun is not None:
        rendezvous = f"ALL,MASTER_ADDR={socket.gethostname()},MASTER_PORT={free_port()}"
        cmd = [srun, f"--export={rendezvous}", "--kill-on-bad-exit=1", "--ntasks", str(tasks), *worker]
        return {"command": cmd}, cmd, SRUN_TITLE % tasks, tasks
    # torchrun makes a log directory per run and leaves it behind: keep it inside ours
    logs = os.path.join(workdir, "logs")
    args = ["--standalone", "--nnodes", "1", "--nproc_per_node", str(nproc), "--log_dir", logs, *worker[1:]]
    return {"torchrun": args}, [PY, "-m", "torch.distributed.run", *args], GLOO_TITLE % nproc, nproc


def free_port() -> int:
    """A TCP port free on this host now, for rank 0's rendezvous (torchrun's --standalone picks its own)."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def field(line: str, name: str) -> Any:
    """A `name=value` field of a rank's report line (an int when it is one)."""
    for part in line.split():
        key, _, value = part.partition("=")
        if key == name:
            return int(value) if value.isdigit() else value
    return None


def from_mkl_parent(side: list[str], cmd: list[str], timeout: float) -> dict[str, Any]:
    """Run a child from a parent that first imports the MKL side; the child's output comes back
    (the parent's stderr stands in when the parent itself failed)."""
    r = run_module("parent", json.dumps(side), json.dumps(cmd), str(timeout), timeout=timeout + 15, background=False)
    child = r.get("data")
    parent_ran = r["returncode"] == 0 and bool(child)
    return {"child": child if parent_ran else {"stderr": r["stderr"]}, "parent_ran": parent_ran, "seconds": r["seconds"]}


def parent_ran(seed: Check, gloo: Check) -> bool:
    """Whether the DDP parent imported its modules (then each of them imports)."""
    return bool(seed.get("data", {}).get("parent_ran") or gloo.get("data", {}).get("parent_ran"))
