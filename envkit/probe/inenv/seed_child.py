"""Child: the seed scenario's torch-first process. It imports torch first and then the MKL side (a
DDP worker's order) and reports what is loaded. Then, with a job to run, it launches the job with
the observations in a thread beside it; without one it runs the observations itself. The job is
`torch.distributed.run`, run in this same process (a launcher imports torch anyway, and each
`import torch` costs seconds of CPU), or inside a Slurm job its ranks as `srun` starts them, with
this process's environment (the MKL parent's, as the ranks of a real job inherit it).

    python -m envkit_probe.seed_child ORDER_JSON JOB_JSON TAGS_JSON

JOB_JSON: {} (no job), {"torchrun": ARGS} or {"command": ARGV} (srun's).
"""

from __future__ import annotations

import importlib
import json
import runpy
import subprocess
import sys
import threading
from typing import Any

from .inventory import collect
from .observe import observe_all
from .report import report


def launch(job: dict[str, Any], tags: list[str]) -> int:
    sys.stdout.flush()
    observer = threading.Thread(target=observe_all, args=(tags,))
    observer.start()
    code = run_command(job["command"]) if "command" in job else run_torchrun(job["torchrun"])
    observer.join()
    sys.stdout.flush()
    return code


def run_torchrun(args: list[str]) -> int:
    sys.argv = ["torch.distributed.run", *args]
    try:
        runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:
        sys.stderr.write(f"torch.distributed.run failed: {exc!r}\n")
        return 1
    return 0


def run_command(argv: list[str]) -> int:
    """The ranks share this process's output, as torchrun's workers do."""
    try:
        return subprocess.call(argv)
    except OSError as exc:
        sys.stderr.write(f"{argv[0]} cannot be run: {exc.strerror}\n")
        return 1


def main() -> int:
    order, job, tags = (json.loads(arg) for arg in sys.argv[1:4])
    imported = []
    for mod in order:
        importlib.import_module(mod)
        imported.append(mod)
    # This line is printed once the imports are done: then the seed scenario passed.
    report("JSON", collect(imported))
    if job:
        return launch(job, tags)
    observe_all(tags)
    return 0


if __name__ == "__main__":
    sys.exit(main())
