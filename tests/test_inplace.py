"""The installer child a sync starts before it has solved: it must never outlive envkit, however
envkit ends. Its jobs, failed ones included, are tested through sync (tests/test_sync.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from envkit.inplace import Installer
from tests.support.procs import alive, gone_within


def test_an_unused_installer_is_gone_once_closed() -> None:
    """A sync that ends before its change (nothing to do, refused, declined, failed solve)."""
    with Installer() as installer:
        pid = installer._child.pid
        assert alive(pid)
    assert not alive(pid)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's prctl")
def test_the_waiting_installer_dies_with_a_killed_envkit(tmp_path: Path) -> None:
    """kill -9 while envkit solves or asks: the child started ahead goes too (its stdin ends, and
    the parent-death signal fires), and no installer is left behind for the next run to race."""
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import sys, time
                from envkit.inplace import Installer
                installer = Installer()
                print(installer._child.pid, flush=True)
                time.sleep(600)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert alive(child)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=30)
    assert gone_within(lambda: [child] if alive(child) else []), "the installer child outlived the killed envkit"
