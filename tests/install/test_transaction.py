"""kill -9 (the OOM killer, a scheduler's timeout, a closed SSH session): a real `envkit create` is
killed at several points; afterwards there is no env or a complete one, the next create works
without --force, and the package cache is clean and usable. The swap's own interruption points are
laid out directly (a SIGKILL cannot be timed between two renames) and recovered by the next run."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envkit.install import pkgcache
from envkit.prefix.leftovers import leftovers, work_dir
from envkit.prefix.record import read_record, record_path
from tests.conftest import payload_recipe, run_envkit
from tests.support.tiny import tiny_channel, tiny_recipe


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def start_create(recipe: Path, prefix: Path, cache: Path, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, ENVKIT_PKGS_DIR=str(cache))
    cmd = [sys.executable, "-m", "envkit", "create", str(recipe), "-p", str(prefix), "--yes", "--no-probe", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def kill_when_staging(proc: subprocess.Popen[str], prefix: Path, delay: float) -> bool:
    """SIGKILL `delay` seconds after the staging env appeared; False if create finished first."""
    deadline = time.monotonic() + 120
    while not list(prefix.parent.glob(f".{prefix.name}.envkit-staging-*/conda-meta")):
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    time.sleep(delay)
    if proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    return True


@pytest.mark.parametrize("delay", [0.0, 1.5, 4.0])
def test_sigkill_during_a_cold_create(wheel_channel: Path, tmp_path: Path, delay: float) -> None:
    recipe = payload_recipe(tmp_path / "r", wheel_channel, name="killed")
    prefix = tmp_path / "envs" / "killed"
    cache = tmp_path / "cold-cache"
    proc = start_create(recipe, prefix, cache)
    killed = kill_when_staging(proc, prefix, delay)
    assert killed, "create finished before it could be killed"
    # no env, or a complete one: never a half-made prefix
    assert not prefix.exists() or read_record(prefix) is not None
    if delay:
        assert pkgcache.abandoned_extractions(cache) or list(cache.glob("*.lock")), "the kill left nothing to clean: kill earlier"
    again = run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe", env=dict(os.environ, ENVKIT_PKGS_DIR=str(cache)))
    assert again.returncode == 0, again.stderr
    assert "removed" in again.stdout and "left by an interrupted envkit" in again.stdout
    assert read_record(prefix) is not None and (prefix / "bin" / "python").exists()
    assert leftovers(prefix) == [] and pkgcache.abandoned_extractions(cache) == []
    ran = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import numpy, mkl; print(numpy.ones(2).sum())"], capture_output=True, text=True, check=False
    )
    assert ran.stdout.strip() == "2.0", ran.stderr


def test_sigkill_during_create_force_keeps_the_old_env(wheel_channel: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "replaced"
    first = tiny_recipe(tmp_path / "t", tiny_channel(tmp_path / "t"), name="replaced")
    assert run_envkit("create", str(first), "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    second = payload_recipe(tmp_path / "r", wheel_channel, name="replaced")
    proc = start_create(second, prefix, tmp_path / "cold-cache", "--force")
    assert kill_when_staging(proc, prefix, 1.0)
    # the swap had not happened: the old env is still the env, untouched
    assert (prefix / "share" / "tool" / "version.txt").read_text() == "v1\n"
    audit = run_envkit("audit", "-p", str(prefix), "--json")
    doc = json.loads(audit.stdout)
    assert doc["data"]["audits"][0]["envkit_managed"] is True
    assert any("left work files beside" in m for m in doc["messages"]) and leftovers(prefix) != []  # a read changes nothing
    fixed = json.loads(run_envkit("audit", "--fix", "--yes", "-p", str(prefix), "--json").stdout)
    assert any("left by an interrupted envkit" in m for m in fixed["messages"]) and leftovers(prefix) == []


def _complete_env(path: Path, marker: str) -> None:
    (path / "conda-meta").mkdir(parents=True)
    (path / "share").mkdir()
    (path / "share" / "which").write_text(marker)
    record_path(path).parent.mkdir(parents=True)
    record_path(path).write_text(json.dumps({"envkit_record_version": 2, "recipe": {"name": "x"}, "activation": {"ops": []}}))


@pytest.mark.parametrize("record", [None, b"", b'{"envkit_record_version": 2, "rec'], ids=["no record", "empty", "cut short"])
def test_interrupted_swap_restores_the_old_env(tmp_path: Path, record: bytes | None) -> None:
    """No record: the new env never finished. An empty or cut-short one: its write, which create
    does not flush (the staging env's rename is what makes it appear), was lost with the power."""
    prefix = tmp_path / "envs" / "swap"
    pid = dead_pid()
    _complete_env(work_dir(prefix, "old", pid), "old")
    half = work_dir(prefix, "staging", pid)
    (half / "conda-meta").mkdir(parents=True)
    if record is not None:
        record_path(half).parent.mkdir(parents=True)
        record_path(half).write_bytes(record)
    looked = run_envkit("audit", "-p", str(prefix), "--json")
    assert looked.returncode == 2 and "was moved aside by an interrupted replacement" in " ".join(json.loads(looked.stdout)["errors"])
    assert not prefix.exists() and len(leftovers(prefix)) == 2  # a read changes nothing
    proc = run_envkit("audit", "--fix", "--yes", "-p", str(prefix), "--json")
    assert (prefix / "share" / "which").read_text() == "old" and leftovers(prefix) == []
    messages = json.loads(proc.stdout)["messages"]
    assert any(m.startswith(f"restored {prefix}") for m in messages), messages


def test_interrupted_swap_is_finished_when_the_new_env_was_complete(tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "swap"
    pid = dead_pid()
    _complete_env(work_dir(prefix, "old", pid), "old")
    _complete_env(work_dir(prefix, "staging", pid), "new")
    looked = run_envkit("probe", "-p", str(prefix), "--json")
    assert looked.returncode == 2 and not prefix.exists() and len(leftovers(prefix)) == 2
    proc = run_envkit("sync", "-p", str(prefix), "--yes", "--json")
    assert (prefix / "share" / "which").read_text() == "new" and leftovers(prefix) == []
    assert (
        any(m.startswith(f"finished replacing {prefix}") for m in json.loads(proc.stdout)["messages"])
        or "finished replacing" in proc.stderr
    )


def test_old_copy_left_after_a_completed_swap_is_removed(tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "swap"
    _complete_env(prefix, "new")
    _complete_env(work_dir(prefix, "old", dead_pid()), "old")
    audits = json.loads(run_envkit("audit", "--all", "--json").stdout)["data"]["audits"]
    assert [a["prefix"] for a in audits] == [str(prefix)]  # the old copy is never listed as an env
    looked = run_envkit("audit", "-p", str(prefix), "--json")
    assert any("left work files beside" in m and "nothing was changed" in m for m in json.loads(looked.stdout)["messages"])
    assert len(leftovers(prefix)) == 1  # a read changes nothing
    run_envkit("audit", "--fix", "--yes", "-p", str(prefix))
    assert (prefix / "share" / "which").read_text() == "new" and leftovers(prefix) == []


def test_a_live_run_keeps_its_staging_dir(tmp_path: Path) -> None:
    """Only runs that are gone are cleaned: a staging dir under a held lock is someone's work."""
    from envkit.core.fsutil import exclusive_lock
    from envkit.install.transaction import lock_for, settle

    prefix = tmp_path / "envs" / "busy"
    staging = work_dir(prefix, "staging", os.getpid())
    (staging / "conda-meta").mkdir(parents=True)
    with exclusive_lock(lock_for(prefix), "test"):
        holder = subprocess.run(
            [
                sys.executable,
                "-c",
                f"from pathlib import Path; from envkit.install.transaction import settle; settle(Path({str(prefix)!r}))",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert holder.returncode == 0 and staging.exists()
    settle(prefix)
    assert not staging.exists()


def test_cache_sweep_spares_a_running_install(tmp_path: Path) -> None:
    cache = tmp_path / "pkgs"
    cache.mkdir()
    (cache / "numpy-2.4.6-py_0.lock").write_bytes(b"")
    abandoned = cache / ".numpy-2.4.6-py_0Ab12Cd"
    (abandoned / "info").mkdir(parents=True)
    (cache / ".not-a-package").mkdir()
    assert pkgcache.abandoned_extractions(cache) == [abandoned]
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import fcntl, os, time; fd = os.open({str(cache / '.cache.lock')!r}, os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert pkgcache.sweep(cache) == [] and abandoned.exists()
    finally:
        holder.kill()
        holder.wait()
    assert pkgcache.sweep(cache) == [abandoned] and not abandoned.exists() and (cache / ".not-a-package").exists()
    fd = os.open(cache / ".cache.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released again
    os.close(fd)
    shutil.rmtree(cache)


def test_the_lock_file_of_an_env_another_tool_removed_goes_only_when_nothing_is_there(tmp_path: Path) -> None:
    """What the conda plugin does after `conda env remove` and `conda rename` (tests/conda has the
    real commands): the lock file goes where the env is gone and no run holds or needs it."""
    from envkit.core.fsutil import exclusive_lock
    from envkit.install.transaction import discard_lock_of_gone_env, env_lock, lock_for

    prefix = tmp_path / "envs" / "gone"
    prefix.mkdir(parents=True)
    with env_lock(prefix):
        pass
    lock = lock_for(prefix)
    assert lock.is_file() and not discard_lock_of_gone_env(prefix)  # the env is there
    prefix.rmdir()
    with exclusive_lock(lock, "test"):  # an envkit at work on that path: its lock stays
        assert not discard_lock_of_gone_env(prefix)
    aside = work_dir(prefix, "staging", 999_999)
    aside.mkdir()  # what an interrupted create left: the next run that takes the lock settles it
    assert not discard_lock_of_gone_env(prefix) and lock.is_file()
    aside.rmdir()
    assert discard_lock_of_gone_env(prefix) and not lock.exists()
    assert list(prefix.parent.iterdir()) == []
    assert not discard_lock_of_gone_env(prefix)  # nothing left to take away
