"""Broken prefixes get one-line errors or findings, never a traceback: a python that cannot run,
package records that are not records, an envkit record damaged by hand, a file or folder in the
way of the activation scripts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_envkit
from tests.support.tiny import tiny_channel, tiny_recipe


def make_prefix(tmp_path: Path) -> Path:
    prefix = tmp_path / "broken"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "bin").mkdir()
    good = {
        "name": "zlib",
        "version": "1.3",
        "build": "h0_0",
        "build_number": 0,
        "depends": [],
        "files": [],
        "channel": "https://conda.anaconda.org/conda-forge/linux-64",
    }
    (prefix / "conda-meta" / "zlib-1.3-h0_0.json").write_text(json.dumps(good))
    return prefix


def no_traceback(proc: object) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kind", "needle"),
    [
        ("empty", "is an empty file"),
        ("not-executable", "is not executable"),
        ("directory", "is a directory"),
        ("garbage", "cannot be run: Exec format error"),
    ],
)
def test_a_python_that_cannot_run(tmp_path: Path, kind: str, needle: str) -> None:
    prefix = make_prefix(tmp_path)
    python = prefix / "bin" / "python"
    if kind == "directory":
        python.mkdir()
    else:
        python.write_bytes({"empty": b"", "not-executable": b"#!/bin/sh\n", "garbage": b"\x7fELF\x02\x01\x01" + os.urandom(64)}[kind])
        python.chmod(0o644 if kind == "not-executable" else 0o755)
    probe = run_envkit("probe", "-p", str(prefix))
    no_traceback(probe)
    assert probe.returncode == 1 and needle in probe.stderr and len(probe.stderr.strip().splitlines()) == 1
    audit = json.loads(run_envkit("audit", "-p", str(prefix), "--probe", "--json").stdout)
    finding = next(f for f in audit["data"]["audits"][0]["findings"] if f["rule_id"] == "PROBE:run")
    assert needle in finding["evidence"]


CORRUPT = {
    "nested": ("[" * 100_000).encode(),
    "invalid": b'{"name": "a", ',
    "binary": os.urandom(256) + b"\xff\xfe",
    "empty": b"",
    "wrong-types": json.dumps({"name": ["x"], "version": "1", "build": "0"}).encode(),
    "depends-not-a-list": json.dumps({"name": "x", "version": "1", "build": "0", "depends": "numpy"}).encode(),
    "a-list": b"[1, 2, 3]",
    "files-not-a-list": json.dumps({"name": "y", "version": "1", "build": "0", "files": 5}).encode(),  # `conda list` crashes on it
}


def test_unreadable_package_records_are_reported_by_name(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path)
    for name, data in CORRUPT.items():
        (prefix / "conda-meta" / f"{name}-1-0.json").write_bytes(data)
    proc = run_envkit("audit", "-p", str(prefix), "--json")
    no_traceback(proc)
    doc = json.loads(proc.stdout)
    audit = doc["data"]["audits"][0]
    assert proc.returncode == 1 and audit["packages"] == 1  # zlib, the one good record
    evidence = {f["evidence"].split(":")[0]: f["evidence"] for f in audit["findings"] if f["rule_id"] == "EK022"}
    assert set(evidence) == {f"conda-meta/{name}-1-0.json" for name in CORRUPT}
    assert "nested too deeply" in evidence["conda-meta/nested-1-0.json"] and "empty" in evidence["conda-meta/empty-1-0.json"]
    assert "'depends' is not a list" in evidence["conda-meta/depends-not-a-list-1-0.json"]
    assert "'files' is not a list" in evidence["conda-meta/files-not-a-list-1-0.json"]


@pytest.mark.parametrize(
    "damage",
    [
        "not json {",
        "[" * 100_000,
        json.dumps({"envkit_record_version": 2, "recipe": "x", "activation": {"ops": "MKL"}}),
        json.dumps({"envkit_record_version": 2, "recipe": {"name": "tiny"}, "activation": {"ops": [{"action": "set"}]}}),
        json.dumps({"envkit_record_version": 99}),
    ],
    ids=["not-json", "nested", "ops-not-a-list", "op-without-name", "future-version"],
)
def test_a_damaged_envkit_record(tmp_path: Path, damage: str) -> None:
    prefix = tmp_path / "envs" / "tiny"
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    assert run_envkit("create", str(recipe), "--yes", "--no-probe").returncode == 0
    (prefix / "etc" / "envkit" / "record.json").write_text(damage)
    for args in (["audit", "-p", str(prefix)], ["activation", "show", "-p", str(prefix)], ["audit", "--all"]):
        proc = run_envkit(*args)
        no_traceback(proc)
        assert proc.returncode in (1, 2), (args, proc.stdout, proc.stderr)
        assert "etc/envkit/record.json" in proc.stdout + proc.stderr
        if damage.endswith("99}"):  # only a newer envkit reads it; anything else, none does
            assert "newer than this envkit reads" in proc.stdout + proc.stderr and "upgrade envkit" in proc.stdout + proc.stderr
        elif args[0] == "activation" and "Expecting" in proc.stderr:
            assert "make the env again with 'envkit create RECIPE" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        ("activate.d is a file", "/etc/conda/activate.d is a file where envkit needs a folder"),
        ("etc/conda is a file", "/etc/conda is a file where envkit needs a folder (on the way to "),
        ("a script is a folder", "/etc/conda/activate.d/envkit-quiet.fish is a folder where envkit writes a file"),
    ],
)
def test_something_in_the_way_of_the_activation_scripts(tmp_path: Path, damage: str, needle: str) -> None:
    """A file where the scripts' folder goes, or a folder where a script goes, stopped `sync` and
    `audit --fix` with a traceback (exit 70) when they rewrote the scripts; reading them for the
    audit did too. The audit now finds the scripts missing, and the writers stop in one line
    (exit 2) that names the thing in the way, which stays where it is."""
    from tests.conftest import python_env

    recipe, prefix = python_env(tmp_path, "quiet", "{}")
    conda_etc = prefix / "etc" / "conda"
    fish = conda_etc / "activate.d" / "envkit-quiet.fish"
    if damage == "activate.d is a file":
        blocker = conda_etc / "activate.d"
        for script in blocker.iterdir():
            script.unlink()
        blocker.rmdir()
        blocker.write_text("mine\n")
    elif damage == "etc/conda is a file":
        blocker = conda_etc
        for script in blocker.glob("*/*"):
            script.unlink()
        for folder in blocker.iterdir():
            folder.rmdir()
        blocker.rmdir()
        blocker.write_text("mine\n")
    else:
        blocker = fish
        fish.unlink()
        fish.mkdir()
    audit = run_envkit("audit", "-p", str(prefix))
    no_traceback(audit)
    assert audit.returncode == 1 and "EK014" in audit.stdout
    for args in (["sync", "-p", str(prefix), "--yes", "--no-probe"], ["audit", "-p", str(prefix), "--fix", "--yes"]):
        proc = run_envkit(*args)
        no_traceback(proc)
        assert proc.returncode == 2, proc.stderr
        assert needle in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.rstrip().endswith("(move it aside, then run the command again)")
        assert blocker.is_dir() if damage == "a script is a folder" else blocker.read_text() == "mine\n"
    # a sync that changes a setting: its rollback, which writes the scripts back, is stopped by the
    # same thing, and was a traceback from within the handler; the journal stays for the next run
    record = (prefix / "etc" / "envkit" / "record.json").read_bytes()
    recipe.write_text(recipe.read_text().replace("threading: {}", "threading: {omp_num_threads: 2}"))
    proc = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe")
    no_traceback(proc)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert needle in proc.stderr
    assert f"; {prefix} is not rolled back all the way yet: envkit's next command on it finishes that (move it aside" in proc.stderr
    assert (prefix / "etc" / "envkit" / "sync-journal").is_dir()
    if damage == "a script is a folder":
        blocker.rmdir()
    else:
        blocker.unlink()
    looked = run_envkit("audit", "-p", str(prefix))
    assert "an interrupted sync is pending" in looked.stdout and (prefix / "etc" / "envkit" / "sync-journal").is_dir()
    audit = run_envkit("audit", "--fix", "--yes", "-p", str(prefix))
    assert audit.returncode == 0 and f"rolled {prefix} back to what it was before an interrupted sync" in audit.stdout + audit.stderr
    assert (prefix / "etc" / "envkit" / "record.json").read_bytes() == record
    assert not (prefix / "etc" / "envkit" / "sync-journal").exists() and fish.is_file()
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe")
    assert synced.returncode == 0, synced.stderr
    assert "OMP_NUM_THREADS='2'" in run_envkit("activation", "show", "-p", str(prefix)).stdout


@pytest.mark.parametrize("mode", [0o644, 0o755])
def test_a_file_on_the_way_to_a_new_prefix(tmp_path: Path, mode: int) -> None:
    """A file where a folder of the new prefix's path must be was told as a want of permission (an
    executable one, which this user may "write and enter", as something else again)."""
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    (tmp_path / "afile").write_text("mine\n")
    (tmp_path / "afile").chmod(mode)
    proc = run_envkit("create", str(recipe), "-p", str(tmp_path / "afile" / "envs" / "new"), "--yes", "--no-probe")
    no_traceback(proc)
    assert proc.returncode == 2
    assert (
        f"{tmp_path / 'afile'} is a file where envkit needs a folder (on the way to {tmp_path / 'afile' / 'envs' / 'new'})" in proc.stderr
    )
    assert "not writable" not in proc.stderr and (tmp_path / "afile").read_text() == "mine\n"
