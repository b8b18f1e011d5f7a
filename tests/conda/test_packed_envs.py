"""envkit's envs moved with conda-pack, as teams move an env from a login node to GPU nodes that
have no conda: packed, unpacked elsewhere, `conda-unpack`, then activated with the activate script
conda-pack ships (which sources the env's activate.d scripts) or used through conda."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

from tests.conftest import run_envkit
from tests.support.conda import Conda, tool_exe
from tests.team.test_export import exported_env

# the prior values envkit's scripts must put back: GONE is one envkit's activation unsets
PRIOR = {"GONE": "was here", "EXTRA_PATHS": "/usr/old"}
SEEN = 'echo "${MKL_THREADING_LAYER-unset}|${GONE-unset}|${EXTRA_PATHS-unset}"'
SOURCED = f'. "$ENV/bin/activate" || exit 97; {SEEN}; . "$ENV/bin/deactivate" || exit 98; {SEEN}'


def packed_and_unpacked(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    prefix, env = exported_env(tmp_path)
    archive = tmp_path / "env.tar.gz"
    packed = subprocess.run(
        [str(tool_exe("conda-pack")), "-p", str(prefix), "-o", str(archive), "-q"], capture_output=True, text=True, timeout=600, check=False
    )
    assert packed.returncode == 0, packed.stdout + packed.stderr
    moved = tmp_path / "gpu-node" / "envs" / "exp"
    moved.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(moved, filter="tar")
    unpacked = subprocess.run(
        [str(moved / "bin" / "python"), str(moved / "bin" / "conda-unpack")], capture_output=True, text=True, check=False
    )
    assert unpacked.returncode == 0, unpacked.stderr
    return moved, env


def test_a_packed_env_keeps_its_settings_where_it_is_unpacked(conda: Conda, tmp_path: Path) -> None:
    moved, env = packed_and_unpacked(tmp_path)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CONDA", "_ENVKIT_", "MKL_", "GONE", "EXTRA_PATHS"))}
    for shell in ("bash", "zsh", "dash"):
        proc = subprocess.run(
            [shell, "-c", SOURCED], capture_output=True, text=True, env={**clean, **PRIOR, "ENV": str(moved)}, check=False
        )
        assert proc.returncode == 0, (shell, proc.stderr)
        lines = [line for line in proc.stdout.splitlines() if "|" in line]  # zsh's `local` in conda-pack's deactivate echoes a line
        assert lines == ["GNU|unset|/opt/x:/opt/y:/usr/old", "unset|was here|/usr/old"], (shell, proc.stdout)
    # fish: conda-pack's activate.fish sources the env's fish scripts; its deactivate runs no deactivate.d script
    fish = subprocess.run(
        ["fish", "-c", f'source "{moved}/bin/activate.fish"; echo $MKL_THREADING_LAYER'],
        capture_output=True,
        text=True,
        env=clean,
        check=False,
    )
    assert fish.returncode == 0 and fish.stdout.strip() == "GNU", fish.stderr
    shown = conda.ok("run", "-p", str(moved), "python", "-c", "import os, sys; print(sys.prefix, os.environ['MKL_THREADING_LAYER'])")
    assert shown.split() == [str(moved), "GNU"]
    # a job on the node runs the unpacked python itself, with no activation: the startup files travelled too
    direct = subprocess.run(
        [str(moved / "bin" / "python"), "-c", "import os, sys; print(sys.prefix, os.environ.get('MKL_THREADING_LAYER'))"],
        capture_output=True,
        text=True,
        env=clean,
        check=False,
    )
    assert direct.stdout.split() == [str(moved), "GNU"], direct.stderr
    audit = run_envkit("audit", "-p", str(moved), "--min-severity", "warning", env=env)
    assert audit.returncode == 0, audit.stdout
    probe = run_envkit("probe", "-p", str(moved), env=env)
    assert probe.returncode == 0, probe.stdout + probe.stderr
    assert run_envkit("sync", "-p", str(moved), "--dry-run", env=env).returncode == 0
