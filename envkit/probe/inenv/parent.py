"""Child: the seed scenario's parent. It imports the MKL side first (as the Ultralytics trainer
imports numpy and cv2 before torch), then starts one child with subprocess and the inherited
environment, the way the trainer starts torch.distributed.run, and reports that child's outcome.

    python -m envkit_probe.parent FIRST_IMPORTS_JSON CHILD_CMD_JSON TIMEOUT
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from .proc import finish
from .proctree import kill_tree
from .report import report


def main() -> None:
    first, cmd, timeout = json.loads(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3])
    for mod in first:
        __import__(mod)
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = child.communicate(timeout=timeout)
        result: dict[str, Any] = {"returncode": child.returncode, "stdout": out[-400000:], "stderr": err[-4000:]}
    except subprocess.TimeoutExpired:
        kill_tree(child.pid)
        out, err = finish(child)
        result = {"returncode": None, "timeout": True, "stdout": out[-400000:], "stderr": err[-4000:]}
    report("JSON", result)


if __name__ == "__main__":
    main()
