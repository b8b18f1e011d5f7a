"""kill -9 at random points of a sync, then files of the user's own in the env: commands that only
read change nothing and say a rollback is pending; the command that settles the env leaves it as it
was before the sync or as the sync made it, and every file of the user's is still there."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from envkit.prefix.record import sync_journal_path
from tests.conftest import run_envkit
from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_tar_bz2

ROUNDS = 20
USER_FILES = ("mynotes.txt", "bin/myscript", "share/mine/data", "share/bulk/mine.txt", "lib/mine.py")
LEFT_OUT = ("etc/envkit/record.json", "conda-meta/")  # times and requests: not what 'as it was' means


def _channel(root: Path) -> Path:
    channel = root / "bulkch"
    write_tar_bz2(channel, PkgMeta("tool", "1.0", "0"), [PkgFile("share/tool/version.txt", b"v1\n")])
    files = [PkgFile(f"share/bulk/f{i:04d}.txt", f"{i}\n".encode() * 64) for i in range(1500)]
    files += [PkgFile("bin/bulk-tool", b"#!/bin/sh\necho bulk\n", 0o755), PkgFile("lib/bulk.py", b"x = 1\n")]
    write_tar_bz2(channel, PkgMeta("bulk", "1.0", "0"), files)
    index_channel(channel)
    return channel


def _state(prefix: Path) -> dict[str, bytes]:
    """The env's files as the packages and activation left them: the user's and the journal left out."""
    out: dict[str, bytes] = {}
    journal = str(sync_journal_path(prefix).relative_to(prefix))
    for path in sorted(prefix.rglob("*")):
        rel = str(path.relative_to(prefix))
        if rel in USER_FILES or rel.startswith(journal) or rel.startswith(LEFT_OUT) or not (path.is_file() or path.is_symlink()):
            continue
        out[rel] = b"-> " + os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
    out["packages"] = json.dumps(sorted(p.name for p in (prefix / "conda-meta").glob("*.json"))).encode()
    return out


def _everything(prefix: Path) -> dict[str, bytes]:
    return {str(p.relative_to(prefix)): p.read_bytes() if p.is_file() and not p.is_symlink() else b"" for p in sorted(prefix.rglob("*"))}


def _recipe(path: Path, channel: Path, packages: str) -> None:
    path.write_text(f"envkit: 1\nname: bulky\nchannels: [{channel.as_uri()}]\npackages: [{packages}]\nthreading: {{omp_num_threads: 2}}\n")


def test_user_files_survive_a_rollback_after_kill_minus_9_at_random_points(tmp_path: Path) -> None:
    channel = _channel(tmp_path)
    recipe = tmp_path / "recipes" / "bulky.yaml"
    recipe.parent.mkdir()
    prefix = tmp_path / "envs" / "bulky"
    _recipe(recipe, channel, "tool")
    assert run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    before = _state(prefix)
    _recipe(recipe, channel, "tool, bulk")
    started = time.monotonic()
    assert run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    took = time.monotonic() - started
    after = _state(prefix)
    assert after != before
    rng = random.Random(54)
    outcomes = {"before": 0, "after": 0}
    for round_ in range(ROUNDS):
        _recipe(recipe, channel, "tool")
        assert run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe").returncode == 0
        assert _state(prefix) == before
        _recipe(recipe, channel, "tool, bulk")
        cache = tmp_path / f"cache-{round_ % 2}-{round_ if round_ % 2 else 0}"  # odd rounds: a cold cache (every path listed)
        env = dict(os.environ, ENVKIT_PKGS_DIR=str(cache))
        cmd = [sys.executable, "-m", "envkit", "sync", "-p", str(prefix), "--yes", "--no-probe"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        time.sleep(rng.uniform(0.0, took * 1.1))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        for rel in USER_FILES:
            (prefix / rel).parent.mkdir(parents=True, exist_ok=True)
            (prefix / rel).write_text(f"mine {round_}\n")
        pending = sync_journal_path(prefix).is_dir()
        looked_at = _everything(prefix)
        reads = [("audit", "-p", str(prefix)), ("sync", "-p", str(prefix), "--dry-run"), ("list",)]
        if round_ < 3:
            reads += [("run", "-p", str(prefix), "--", "true"), ("export", "-p", str(prefix)), ("activation", "show", "-p", str(prefix))]
        for args in reads:
            read = run_envkit(*args, env=env)
            assert "Traceback" not in read.stderr, read.stderr
            if pending and args[0] in ("audit", "sync"):
                assert "an interrupted sync is pending" in read.stdout + read.stderr, (args, read.stdout, read.stderr)
        assert _everything(prefix) == looked_at, "a command that only reads changed the env"
        settled = run_envkit("audit", "--fix", "--yes", "-p", str(prefix), env=env)
        assert "Traceback" not in settled.stderr, settled.stderr
        assert not sync_journal_path(prefix).exists()
        if pending:
            assert "rolled" in settled.stdout and "kept" in settled.stdout, settled.stdout
        for rel in USER_FILES:
            assert (prefix / rel).read_text() == f"mine {round_}\n", f"round {round_}: the rollback took the user's {rel}"
            (prefix / rel).unlink()
        state = _state(prefix)
        assert state in (before, after), f"round {round_}: the env is neither as before nor as after the sync"
        outcomes["before" if state == before else "after"] += 1
    assert outcomes["before"] >= 3, outcomes  # the kills landed inside the sync, not only after it
