"""The probe runner under interruption: Ctrl-C, a job runner's SIGTERM or SIGINT sent to envkit's
PID alone, and SIGKILL. Real signals to a real `envkit probe` in the seed env; afterwards no process
of the probe's tree may be alive and no scratch dir may be left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from envkit.probe.inenv.proctree import descendants, kill_tree
from envkit.probe.runner import SCRATCH_PREFIX


def marked(mark: str) -> list[int]:
    """Live processes whose environment carries the marker (the probe and everything below it)."""
    found = []
    needle = f"ENVKIT_TEST_MARK={mark}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ.split(b"\0") and state != "Z":
            found.append(int(entry))
    return found


def wait_for(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return bool(predicate())  # type: ignore[operator]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_signal_to_envkit_alone_stops_the_whole_probe(seed_env: Path, tmp_path: Path, sig: signal.Signals) -> None:
    mark = uuid.uuid4().hex
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    env = dict(os.environ, ENVKIT_TEST_MARK=mark, TMPDIR=str(scratch_root))
    proc = subprocess.Popen(
        [sys.executable, "-m", "envkit", "probe", "-p", str(seed_env)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        # the DDP job is running: the probe, its parent child and the launcher, at least
        assert wait_for(lambda: len(marked(mark)) >= 4 and list(scratch_root.glob(f"{SCRATCH_PREFIX}*")), 120), "the probe never started"
        time.sleep(1.0)
        proc.send_signal(sig)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = proc.stderr.read() if proc.stderr else ""
    assert code == (-9 if sig == signal.SIGKILL else 130), stderr
    assert "Traceback" not in stderr
    # envkit stops the tree itself; after SIGKILL the probe learns of it by its parent-death signal
    assert wait_for(lambda: not marked(mark), 30), f"left running: {marked(mark)}"
    assert wait_for(lambda: not list(scratch_root.glob(f"{SCRATCH_PREFIX}*")), 10), list(scratch_root.iterdir())


def test_kill_tree_reaches_grandchildren_in_their_own_sessions(tmp_path: Path) -> None:
    """As torchrun's ranks are: started with start_new_session, so not in the parent's group."""
    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True)\n"
        "print('ready', flush=True); time.sleep(300)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
    below = descendants(parent.pid)
    assert len(below) == 1
    kill_tree(parent.pid)
    parent.wait(timeout=10)
    assert wait_for(lambda: not Path(f"/proc/{below[0]}").exists() or "Z" in Path(f"/proc/{below[0]}/stat").read_text().split()[2], 10)
