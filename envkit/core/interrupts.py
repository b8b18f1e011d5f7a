"""SIGTERM and SIGHUP end envkit the way Ctrl-C does: job runners and schedulers send SIGTERM to
envkit's PID alone, a closed SSH session sends SIGHUP, and both must roll back what is half-made
and stop the probe's children, exactly as a KeyboardInterrupt does."""

from __future__ import annotations

import signal
import threading
from types import FrameType


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def terminate_as_interrupt() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _raise_interrupt)
