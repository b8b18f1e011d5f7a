"""The real one-node Slurm cluster the cluster tests submit to: tools/test.sh starts it with
tools/slurm.sh and names it in SLURM_CONF. Without one these tests fail and say how to start it."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import payload_recipe, run_envkit

START = "start one with `bash tools/slurm.sh up DIR` and set SLURM_CONF=DIR/slurm.conf (tools/test.sh does both)"


@pytest.fixture(scope="session")
def slurm() -> str:
    """The node's name, once sinfo says it takes jobs."""
    conf = os.environ.get("SLURM_CONF")
    if not conf or not Path(conf).is_file() or shutil.which("sbatch") is None:
        pytest.fail(f"no Slurm cluster for the cluster tests (SLURM_CONF={conf!r}): {START}")
    node = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, timeout=30, check=False)
    fields = node.stdout.split()
    if node.returncode != 0 or len(fields) < 2 or fields[1] not in ("idle", "mix", "alloc"):
        pytest.fail(f"the Slurm cluster at {conf} takes no jobs ({node.stdout.strip() or node.stderr.strip()}): {START}")
    return fields[0]


def active_jobs() -> list[str]:
    """Job ids Slurm has not ended (queued, running, completing)."""
    done = subprocess.run(["squeue", "-h", "-o", "%i %T"], capture_output=True, text=True, timeout=30, check=True)
    return [line.split()[0] for line in done.stdout.splitlines() if line.split()[1] != "COMPLETED"]


def wait_for_state(job: str, wanted: str, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        state = subprocess.run(["squeue", "-h", "-j", job, "-t", "all", "-o", "%T"], capture_output=True, text=True, check=False)
        if state.stdout.strip() == wanted:
            return
        time.sleep(0.2)
    raise AssertionError(f"job {job} never reached {wanted}")


@pytest.fixture(scope="module")
def cluster_env(tmp_path_factory: pytest.TempPathFactory, wheel_channel: Path, session_pkgs: Path) -> Iterator[Path]:
    """An env of the seed scenario's packages made by envkit, the probe not run: this module's own,
    since its tests keep verdicts in its record."""
    base = tmp_path_factory.mktemp("cluster")
    recipe = payload_recipe(base / "recipes", wheel_channel, name="clusterenv")
    prefix = base / "env"
    made = run_envkit(
        "create", str(recipe), "-p", str(prefix), "--yes", "--no-probe", env={**os.environ, "ENVKIT_PKGS_DIR": str(session_pkgs)}
    )
    assert made.returncode == 0, made.stderr
    yield prefix
    shutil.rmtree(base, ignore_errors=True)
