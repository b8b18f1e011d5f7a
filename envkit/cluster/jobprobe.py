"""The job side of `envkit probe --slurm` (envkit.cluster.slurm): run the probe on the node, under
the job's environment, and leave its report in the job's folder for the envkit that submitted it.

    python -m envkit.cluster.jobprobe FOLDER PREFIX

The report is written whole or not at all. A probe that cannot run leaves `error: MESSAGE`
instead, which the login side says as the probe's error; the verdict is kept there, not here.
"""

from __future__ import annotations

import sys
from pathlib import Path

from envkit.cluster.slurm import REPORT
from envkit.core.errors import EnvkitError
from envkit.core.fsutil import atomic_write_text


def main(argv: list[str]) -> int:
    folder, prefix = Path(argv[0]), Path(argv[1])
    from envkit.probe.runner import run_probe

    try:
        text = run_probe(prefix).dumps()
    except EnvkitError as exc:
        text = "error: " + " ".join(exc.lines())
    atomic_write_text(folder / REPORT, text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
