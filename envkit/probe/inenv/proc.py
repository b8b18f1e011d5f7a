"""Run the env's python: every child is `python -m <this package>.<module>`, with a timeout, killed
with everything it started when it overruns; background checks run at a lower CPU priority."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from typing import Any

from .proctree import kill_tree
from .report import parse_sections

PY = sys.executable
# envkit_probe inside an env; envkit.probe.inenv where the tests import it.
PACKAGE = __name__.rpartition(".")[0]
BACKGROUND: set[int] = set()


def module_cmd(module: str, *args: str) -> list[str]:
    return [PY, "-m", f"{PACKAGE}.{module}", *args]


def deprioritize(pid: int) -> None:
    """Let a background check run only on CPU the DDP job leaves idle (SCHED_IDLE on Linux);
    promote_all() hands it normal priority again once the DDP job is over."""
    BACKGROUND.add(pid)
    try:
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        with contextlib.suppress(AttributeError, OSError):
            os.setpriority(os.PRIO_PROCESS, pid, 10)


def promote_all() -> None:
    for pid in list(BACKGROUND):
        with contextlib.suppress(AttributeError, OSError):
            os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))  # type: ignore[attr-defined,unused-ignore]


def finish(popen: subprocess.Popen[str], grace: float = 5.0) -> tuple[str, str]:
    """Output of a killed child; a pipe still held by something that escaped is abandoned, not awaited."""
    try:
        out, err = popen.communicate(timeout=grace)
        return out or "", err or ""
    except Exception:
        for pipe in (popen.stdout, popen.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except Exception:
                pass
        popen.wait()
        return "", ""


def run(cmd: list[str], timeout: float, env: dict[str, str] | None = None, background: bool = True) -> dict[str, Any]:
    """Run a command of the env's python; the result carries its tagged report sections."""
    start = time.monotonic()
    popen = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if background:
        deprioritize(popen.pid)
    try:
        out, err = popen.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(popen.pid)
        _, err = finish(popen)
        return {
            "returncode": None,
            "timeout": True,
            "stdout": "",
            "stderr": err[-4000:],
            "data": None,
            "sections": {},
            "seconds": _since(start),
        }
    sections = parse_sections(out)
    return {
        "returncode": popen.returncode,
        "stdout": out[-4000:],
        "stderr": err[-4000:],
        "data": sections.get("JSON"),
        "sections": sections,
        "seconds": _since(start),
    }


def run_module(module: str, *args: str, timeout: float, background: bool = True) -> dict[str, Any]:
    return run(module_cmd(module, *args), timeout, background=background)


def _since(start: float) -> float:
    return round(time.monotonic() - start, 2)
