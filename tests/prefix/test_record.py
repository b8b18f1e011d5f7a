"""etc/envkit/record.json: where the record lives (conda must not read it, conda rename must carry
it), the move from envkit 0.1's conda-meta/envkit.json, and envs that are moved or copied."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from envkit.prefix.envrecord import EnvRecord, RecipeRef
from envkit.prefix.record import legacy_record_path, read_record, record_path, write_record
from tests.conftest import run_envkit
from tests.support.records import record_json
from tests.support.tiny import tiny_channel, tiny_recipe


def make_tiny(tmp_path: Path, name: str = "tiny") -> Path:
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path), name=name)
    prefix = tmp_path / "envs" / name
    proc = run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe")
    assert proc.returncode == 0, proc.stderr
    return prefix


def as_legacy(prefix: Path) -> None:
    """Turn an env into what envkit 0.1 left: a version-1 record at conda-meta/envkit.json."""
    record = json.loads(record_path(prefix).read_text())
    record["envkit_record_version"] = 1
    record["activation"].pop("tag")
    legacy_record_path(prefix).write_text(json.dumps(record))
    record_path(prefix).unlink()


def finding_ids(prefix: Path) -> dict[str, list[str]]:
    doc = json.loads(run_envkit("audit", "-p", str(prefix), "--json").stdout)
    out: dict[str, list[str]] = {}
    for f in doc["data"]["audits"][0]["findings"]:
        out.setdefault(f["rule_id"], []).append(f["evidence"])
    return out


def test_record_is_no_conda_package_record(tmp_path: Path) -> None:
    prefix = make_tiny(tmp_path)
    assert record_path(prefix) == prefix / "etc" / "envkit" / "record.json" and record_path(prefix).is_file()
    assert not any(p.name.startswith("envkit") for p in (prefix / "conda-meta").glob("*.json"))
    record = record_json(prefix)
    assert record["envkit_record_version"] == 2 and len(record["activation"]["tag"]) == 8


def test_old_location_is_read_and_moved_by_the_next_write(tmp_path: Path) -> None:
    prefix = make_tiny(tmp_path)
    as_legacy(prefix)
    record = read_record(prefix)
    assert record is not None and record.recipe is not None and record.recipe.name == "tiny"
    write_record(prefix, record)
    assert record_path(prefix).is_file() and not legacy_record_path(prefix).exists()


def test_audit_finds_the_old_record_and_fix_moves_it(tmp_path: Path) -> None:
    prefix = make_tiny(tmp_path)
    as_legacy(prefix)
    found = finding_ids(prefix)
    assert "EK021" in found and "EK014" not in found, found
    proc = run_envkit("audit", "-p", str(prefix), "--fix", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rename conda-meta/envkit.json -> etc/envkit/record.json" in proc.stdout
    assert not legacy_record_path(prefix).exists() and read_record(prefix) is not None
    assert finding_ids(prefix) == {}


def test_moved_and_copied_envs_keep_matching_scripts(tmp_path: Path) -> None:
    prefix = make_tiny(tmp_path)
    moved = tmp_path / "elsewhere" / "renamed"
    moved.parent.mkdir()
    shutil.move(str(prefix), moved)
    assert finding_ids(moved) == {}
    copied = tmp_path / "copy"
    shutil.copytree(moved, copied, symlinks=True)
    assert finding_ids(copied) == {}
    # a version-1 record has no tag: it is read back from the env's own script, so a moved
    # envkit 0.1 env is not reported as edited either
    as_legacy(copied)
    assert set(finding_ids(copied)) == {"EK021"}


def test_edited_script_is_still_drift(tmp_path: Path) -> None:
    prefix = make_tiny(tmp_path)
    script = prefix / "etc" / "conda" / "activate.d" / "envkit-tiny.sh"
    script.write_text(script.read_text().replace("OMP_NUM_THREADS='2'", "OMP_NUM_THREADS='8'"))
    assert finding_ids(prefix)["EK014"] == [
        "etc/conda/activate.d/envkit-tiny.sh differs from what the env's record (etc/envkit/record.json) asks for"
    ]


def test_a_write_opens_a_record_an_older_envkit_kept_private(tmp_path: Path) -> None:
    """A record written 0600 (envkit's writes used mkstemp's mode once) gets the bits open() gives
    at the next write, a sync's or a fix's; one its owner opened wider stays as it is."""
    prefix = tmp_path / "env"
    old = os.umask(0o022)
    try:
        write_record(prefix, EnvRecord(recipe=RecipeRef("x")))
        assert record_path(prefix).stat().st_mode & 0o777 == 0o644
        record_path(prefix).chmod(0o600)
        write_record(prefix, EnvRecord(recipe=RecipeRef("x")))
        assert record_path(prefix).stat().st_mode & 0o777 == 0o644
        record_path(prefix).chmod(0o664)
        write_record(prefix, EnvRecord(recipe=RecipeRef("y")))
        assert record_path(prefix).stat().st_mode & 0o777 == 0o664
    finally:
        os.umask(old)


def test_a_record_edited_to_write_elsewhere_or_to_inject_shell_text_is_refused(tmp_path: Path) -> None:
    """The record names the scripts (envkit-RECIPE.sh) and the variables they set. A recipe name
    edited by hand to hold `/` and `..` was taken as a path: `audit --fix`, run by whoever fixes a
    shared env, made folders in the env from it and stopped with an internal error (exit 70); a
    variable name holding shell text would go into every script as code."""
    prefix = make_tiny(tmp_path)
    original = record_path(prefix).read_text()
    escaping, injecting, carrying = json.loads(original), json.loads(original), json.loads(original)
    escaping["recipe"]["name"] = "x/../../../../../escaped"
    injecting["activation"]["ops"].append({"name": "A=1; touch /tmp/x #", "action": "set", "value": "v"})
    # the values the startup files carry from conda's activation (EK037) are threading ones, as text
    carrying["activation"]["carried"] = {"LD_PRELOAD": "/tmp/evil.so"}
    for record, needle in (
        (escaping, "the recipe name 'x/../../../../../escaped' in etc/envkit/record.json"),
        (injecting, "activation operation"),
        (carrying, "the carried activation values {'LD_PRELOAD': '/tmp/evil.so'}"),
    ):
        record_path(prefix).write_text(json.dumps(record))
        (prefix / "etc" / "conda" / "activate.d" / "envkit-tiny.sh").unlink(missing_ok=True)  # something for the fix to do
        fixed = run_envkit("audit", "-p", str(prefix), "--fix", "--yes")
        # the audit names the env it could not read, as for any damaged record, and fixes nothing
        assert fixed.returncode == 1, fixed.stdout + fixed.stderr
        assert needle in fixed.stdout and "is not one envkit writes" in fixed.stdout and "Traceback" not in fixed.stderr
        assert not list(tmp_path.glob("escaped*")) and not (prefix / "etc" / "conda" / "activate.d" / "envkit-x").exists()


def test_a_staging_envs_record_is_the_same_file_written_straight(tmp_path: Path, flushed: list[int]) -> None:
    """create writes the record of its staging env with `staged`: the bytes and mode an atomic
    write gives, without its temporary file and fsync (the rename of the staging env into place is
    what makes it appear whole)."""
    record: dict[str, Any] = {"recipe": {"name": "demo"}, "packages": [], "probe": None}
    written = {}
    for staged in (False, True):
        prefix = tmp_path / str(staged)
        write_record(prefix, EnvRecord.from_json(record), staged=staged)
        path = record_path(prefix)
        written[staged] = (path.read_bytes(), path.stat().st_mode & 0o777, sorted(p.name for p in path.parent.iterdir()))
    assert written[True] == written[False] and read_record(tmp_path / "True") == read_record(tmp_path / "False")
    assert len(flushed) == 1  # the write in place only
