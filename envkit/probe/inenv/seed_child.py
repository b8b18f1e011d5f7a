"""Child: the seed scenario's torch-first process. It imports torch first and then the MKL side (a
DDP worker's order) and reports what is loaded. Then, with a job to run, it becomes the
`torch.distributed.run` launcher in this same process (a launcher imports torch anyway, and each
`import torch` costs seconds of CPU) with the observations in a thread beside the job; without one
it runs the observations itself.

    python -m envkit_probe.seed_child ORDER_JSON JOB_ARGS_JSON TAGS_JSON
"""

from __future__ import annotations

import importlib
import json
import runpy
import sys
import threading

from .inventory import collect
from .observe import observe_all
from .report import report


def launch(job_args: list[str], tags: list[str]) -> int:
    sys.stdout.flush()
    observer = threading.Thread(target=observe_all, args=(tags,))
    observer.start()
    sys.argv = ["torch.distributed.run", *job_args]
    code = 0
    try:
        runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:
        sys.stderr.write(f"torch.distributed.run failed: {exc!r}\n")
        code = 1
    observer.join()
    sys.stdout.flush()
    return code


def main() -> int:
    order, job_args, tags = (json.loads(arg) for arg in sys.argv[1:4])
    imported = []
    for mod in order:
        importlib.import_module(mod)
        imported.append(mod)
    # This line is printed once the imports are done: then the seed scenario passed.
    report("JSON", collect(imported))
    if job_args:
        return launch(job_args, tags)
    observe_all(tags)
    return 0


if __name__ == "__main__":
    sys.exit(main())
