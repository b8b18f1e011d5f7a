"""Run generated scripts in real shells the way conda does, and read back the exact environment.

conda activate: PATH gains $PREFIX/bin, then activate.d/*.<suffix> are sourced in sorted order.
conda deactivate: deactivate.d/*.<suffix> are sourced (sorted, reversed) before PATH is restored.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SHELLS = ("bash", "dash", "zsh", "fish", "tcsh")
SUFFIX = {"bash": "sh", "dash": "sh", "zsh": "sh", "fish": "fish", "tcsh": "csh"}


def _q(path: Path, shell: str) -> str:
    text = str(path)
    assert "'" not in text
    return f"'{text}'"


def _source(shell: str, path: Path) -> str:
    """Source `path`, and stop the run (exit 97) when it leaves a failing status: conda's activate
    returns what its last hook left, so `conda activate ENV && train` would not train."""
    failed = f"sourcing {path.name} left status"
    if shell == "fish":
        return f"source {_q(path, shell)}; or begin; echo '{failed}' $status >&2; exit 97; end"
    if shell == "tcsh":
        return f"source {_q(path, shell)}\nif ($status != 0) then\n  echo '{failed}' $status\n  exit 97\nendif"
    command = "source" if shell in ("zsh", "bash") else "."
    return f"{command} {_q(path, shell)} || {{ echo '{failed}' $? >&2; exit 97; }}"


def script_for(shell: str, prefixes: list[Path], steps: list[str], dump: Path) -> str:
    """steps: 'a:<i>' activate prefixes[i], 'd:<i>' deactivate it, 'dump:<n>' write env to dump.n."""
    suffix = SUFFIX[shell]
    # CI scripts run `set -euo pipefail` before `conda activate`: the scripts must hold under it
    lines = ["set -eu"] if SUFFIX[shell] == "sh" else []
    for step in steps:
        kind, _, arg = step.partition(":")
        if kind == "dump":
            lines.append(f"env -0 > {_q(dump.with_suffix('.' + arg), shell)}")
            continue
        prefix = prefixes[int(arg)]
        folder = prefix / "etc" / "conda" / ("activate.d" if kind == "a" else "deactivate.d")
        files = sorted(folder.glob(f"*.{suffix}"))
        if kind == "d":
            files = list(reversed(files))
        lines.extend(_source(shell, f) for f in files)
    return "\n".join(lines) + "\n"


def run_shell(shell: str, script: str, env: dict[str, str], workdir: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which(shell)
    assert exe, f"{shell} is not installed: .ci/run installs it"
    path = workdir / f"driver.{shell}"
    path.write_text(script, encoding="utf-8")
    args = {
        "fish": [exe, "--no-config", str(path)],
        "tcsh": [exe, "-f", str(path)],
        "zsh": [exe, "-f", str(path)],
        "bash": [exe, "--noprofile", "--norc", str(path)],
        "dash": [exe, str(path)],
    }[shell]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, check=False)


def read_dump(path: Path) -> dict[str, str]:
    raw = path.read_bytes()
    out = {}
    for item in raw.split(b"\0"):
        if not item:
            continue
        key, _, value = item.partition(b"=")
        out[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
    return out


def base_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TERM")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.setdefault("LANG", "C.UTF-8")
    return env
