"""Run the in-env probe package the way envkit's runner does: staged into a directory as
envkit_probe, under an env's python and activation."""

from __future__ import annotations

import subprocess
from pathlib import Path

from envkit.activation.runenv import activated_environment
from envkit.probe.runner import stage_probe


def run_with_probe_package(
    python: Path, args: list[str], scratch: Path, prefix: Path | None = None, **kw: object
) -> subprocess.CompletedProcess[str]:
    """`python ARGS` from a directory holding only envkit_probe (as the runner stages it)."""
    lib = scratch / "lib"
    if not lib.exists():
        stage_probe(scratch)
    env = kw.pop("env", None) or (activated_environment(prefix) if prefix is not None else None)
    return subprocess.run([str(python), *args], cwd=lib, env=env, capture_output=True, text=True, timeout=300, check=False, **kw)  # type: ignore[call-overload, no-any-return]
