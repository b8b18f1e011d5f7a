"""The environment a user gets after `conda activate`, obtained by sourcing the env's activate.d
scripts in a real sh (as conda does), not re-derived in Python."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from envkit.core.errors import CommandNotExecutable, CommandNotFound, UsageError

# conda's own activation sets these before sourcing activate.d.
_DRIVER = r"""
set +e
for f in "$CONDA_PREFIX"/etc/conda/activate.d/*.sh; do
    [ -f "$f" ] && . "$f"
done
env -0
"""


def activated_environment(prefix: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """As `conda activate` leaves it: conda's env vars (packages' env_vars.d, `conda env config
    vars`) set first, then activate.d sourced over them."""
    from envkit.prefix.installed import conda_activation_vars

    env = dict(os.environ if base is None else base)
    for stale in [k for k in env if k.startswith("_ENVKIT_")]:
        del env[stale]
    env.update({name: value for name, (value, _) in conda_activation_vars(prefix).items()})
    env["CONDA_PREFIX"] = str(prefix)
    env["CONDA_DEFAULT_ENV"] = prefix.name
    env["CONDA_SHLVL"] = str(int(env.get("CONDA_SHLVL", "0") or 0) + 1)
    env["PATH"] = os.pathsep.join([str(prefix / "bin"), env.get("PATH", "")]).rstrip(os.pathsep)
    try:
        proc = subprocess.run(["/bin/sh", "-c", _DRIVER], env=env, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"could not source the activation scripts of {prefix}: {exc}") from None
    if proc.returncode != 0:
        raise UsageError(f"sourcing {prefix}/etc/conda/activate.d failed: {proc.stderr.decode(errors='replace').strip()[:200]}")
    out: dict[str, str] = {}
    for item in proc.stdout.split(b"\0"):
        if item:
            key, _, value = item.partition(b"=")
            # as os.environ decodes them, so that a child started with them gets these very bytes
            # (under a locale that is not UTF-8, a UTF-8 decode made values subprocess cannot encode)
            out[os.fsdecode(key)] = os.fsdecode(value)
    for noise in ("PWD", "OLDPWD", "SHLVL", "_"):
        if noise in out and noise not in env:
            del out[noise]
    return out


def run_in_env(prefix: Path, argv: list[str], *, capture: bool = False) -> tuple[int, str | None, str | None]:
    """`envkit run`: the command runs under the env's activation. Returns its exit code and, when
    captured (for --json), its output."""
    if not argv:
        raise UsageError("envkit run needs a command after --", hint="e.g. envkit run -n yolov8 -- python train.py")
    if not argv[0]:  # `envkit run -n ENV -- "$TOOL"` with TOOL unset: a shell says "command not found" too
        raise CommandNotFound("'': command not found: the command's name is empty (is the variable that held it set?)")
    env = activated_environment(prefix)
    pipe = subprocess.PIPE if capture else None
    try:
        child = subprocess.Popen(argv, env=env, stdout=pipe, stderr=pipe, text=capture or None)
    except FileNotFoundError:
        raise CommandNotFound(f"{argv[0]}: command not found (PATH of {prefix})") from None
    except PermissionError:
        raise CommandNotExecutable(f"{argv[0]}: permission denied (not executable)") from None
    while True:
        try:
            stdout, stderr = child.communicate()
            break
        except KeyboardInterrupt as exc:
            # The command decides how to end: pass the signal on and keep waiting for its exit code.
            # From a terminal, Ctrl-C already reached it (same process group); a job runner's
            # SIGTERM or SIGINT reached envkit alone.
            name = exc.args[0] if exc.args and isinstance(exc.args[0], str) else "SIGINT"
            if name != "SIGINT" or not sys.stdin.isatty():
                child.send_signal(getattr(signal, name, signal.SIGINT))
    return child.returncode, stdout if capture else None, stderr if capture else None
