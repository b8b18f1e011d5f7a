"""EK024 with the real clients: conda install/remove and pip install change an envkit env behind
its back; audit names each difference, list shows it, and sync puts the env back."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import run_envkit, write_recipe
from tests.support.conda import Conda
from tests.support.condapkg import PkgMeta
from tests.support.pipchannel import offline_pip_env, pip_channel
from tests.support.tiny import tiny_channel


def audit(prefix: Path) -> list[dict[str, object]]:
    proc = run_envkit("audit", "-p", str(prefix), "--json")
    return [f for f in json.loads(proc.stdout)["data"]["audits"][0]["findings"] if f["rule_id"] == "EK024"]


def test_conda_changes_are_drift_and_sync_undoes_them(conda: Conda, tmp_path: Path) -> None:
    channel = tiny_channel(tmp_path)
    recipe = write_recipe(tmp_path / "r", "drifty", f"envkit: 1\nname: drifty\nchannels: [{channel.as_uri()}]\npackages: [tool]\n")
    assert run_envkit("create", str(recipe), "--yes", "--no-probe").returncode == 0
    prefix = tmp_path / "envs" / "drifty"
    assert audit(prefix) == []

    more = tiny_channel(tmp_path / "more", extra=(PkgMeta("extra", "1.0", "0"),))
    conda.ok("install", "-y", "-q", "-p", str(prefix), "--override-channels", "-c", more.as_uri(), "extra")
    conda.ok("remove", "-y", "-q", "-p", str(prefix), "--force", "tool")
    found = audit(prefix)  # one finding per difference
    assert {str(f["evidence"]) for f in found} == {"- tool 1.0 0 (removed since)", "+ extra 1.0 0 (added since envkit installed the env)"}
    assert all(f["severity"] == "warning" and "envkit sync" in str(f["fix"]) for f in found)
    # drift is a warning: the exit code counts errors unless CI asks to fail on warnings
    assert run_envkit("audit", "-p", str(prefix)).returncode == 0
    gated = run_envkit("audit", "-p", str(prefix), "--fail-on", "warning", "--json")
    assert gated.returncode == 1 and json.loads(gated.stdout)["exit_code"] == 1
    hidden = run_envkit("audit", "-p", str(prefix), "--fail-on", "warning", "--min-severity", "error")
    assert hidden.returncode == 2 and hidden.stderr.count("\n") == 1 and "does not show" in hidden.stderr
    listed = {e["prefix"]: e for e in json.loads(run_envkit("list", "--json").stdout)["data"]}
    assert "- tool 1.0 0 (removed since)" in listed[str(prefix)]["drift"]

    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe")
    assert synced.returncode == 0, synced.stderr
    assert "+ tool 1.0 0" in synced.stdout and "- extra 1.0 0" in synced.stdout
    assert audit(prefix) == []
    assert run_envkit("audit", "-p", str(prefix), "--fail-on", "warning").returncode == 0
    assert "tool" in conda.ok("list", "-p", str(prefix))


def test_pip_install_is_drift(tmp_path: Path) -> None:
    channel, links = pip_channel(tmp_path)
    recipe = write_recipe(
        tmp_path / "r", "pipenv", f'envkit: 1\nname: pipenv\nchannels: [{channel.as_uri()}]\npython: "3.11"\npackages: [pip]\n'
    )
    env = offline_pip_env(dict(os.environ), links)
    assert run_envkit("create", str(recipe), "--yes", "--no-probe", env=env).returncode == 0
    prefix = tmp_path / "envs" / "pipenv"
    subprocess.run([str(prefix / "bin" / "python"), "-m", "pip", "install", "-q", "mpmath"], check=True, env=env, capture_output=True)
    found = audit(prefix)
    assert [f["evidence"] for f in found] == ["+ pip mpmath 1.3.0 (pip-installed since)"]
