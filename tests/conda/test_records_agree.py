"""What conda refuses, envkit does not call healthy: package records conda's PrefixRecord model
rejects, prefixes conda does not take for an env; and what conda knows of an env it made (its
creation time) envkit lists too. Each case is run through the real conda first."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_envkit
from tests.support.conda import Conda
from tests.support.tiny import tiny_channel, tiny_recipe


def _env(tmp_path: Path) -> Path:
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    prefix = tmp_path / "envs" / "tiny"
    assert run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    return prefix


def _edit(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    def apply(record: dict[str, Any]) -> None:
        if value is None:
            record.pop(key, None)
        else:
            record[key] = value

    return apply


BROKEN = {
    "no build_number": (_edit("build_number", None), "'build_number' is missing"),
    "build_number as text": (_edit("build_number", "0"), "'build_number' is str, not an integer"),
    "size as text": (_edit("size", "x"), "'size' is str, not an integer"),
    "timestamp as text": (_edit("timestamp", "x"), "'timestamp' is str, not a number"),
    "constrains as text": (_edit("constrains", "x"), "'constrains' is not a list of strings"),
    "unknown noarch": (_edit("noarch", "bogus"), "'noarch' is 'bogus'"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_record_conda_cannot_load_is_an_error_finding(conda: Conda, tmp_path: Path, case: str) -> None:
    prefix = _env(tmp_path)
    path = next((prefix / "conda-meta").glob("tool-*.json"))
    record = json.loads(path.read_text())
    edit, said = BROKEN[case]
    edit(record)
    path.write_text(json.dumps(record))
    assert conda.run("list", "-p", str(prefix)).returncode != 0  # conda refuses it
    audit = run_envkit("audit", "-p", str(prefix), "--json")
    assert audit.returncode == 1, audit.stdout
    evidence = [f["evidence"] for f in json.loads(audit.stdout)["data"]["audits"][0]["findings"] if f["rule_id"] == "EK022"]
    assert evidence and f"conda-meta/{path.name}: {said}" in evidence[0], evidence


def test_a_record_under_another_name_is_an_error_finding(conda: Conda, tmp_path: Path) -> None:
    prefix = _env(tmp_path)
    path = next((prefix / "conda-meta").glob("tool-*.json"))
    (prefix / "conda-meta" / "zz-copy.json").write_text(path.read_text())
    assert conda.run("list", "-p", str(prefix)).returncode != 0
    audit = run_envkit("audit", "-p", str(prefix), "--json")
    evidence = [f["evidence"] for f in json.loads(audit.stdout)["data"]["audits"][0]["findings"] if f["rule_id"] == "EK022"]
    assert audit.returncode == 1 and evidence == [f"conda-meta/zz-copy.json: named zz-copy.json, not {path.name} as conda requires"]


def test_a_record_without_depends_or_files_is_named(tmp_path: Path) -> None:
    prefix = _env(tmp_path)
    path = next((prefix / "conda-meta").glob("tool-*.json"))
    record = json.loads(path.read_text())
    record.pop("depends")
    path.write_text(json.dumps(record))
    audit = json.loads(run_envkit("audit", "-p", str(prefix), "--json").stdout)
    assert any("'depends' is missing" in f["evidence"] for f in audit["data"]["audits"][0]["findings"])


@pytest.mark.parametrize("damage", ["no history", "empty conda-meta"])
def test_a_prefix_conda_does_not_take_for_an_env_is_said_to_be_none(conda: Conda, tmp_path: Path, damage: str) -> None:
    prefix = _env(tmp_path)
    if damage == "no history":
        (prefix / "conda-meta" / "history").unlink()
        assert "not a conda environment" in (conda.run("list", "-p", str(prefix)).stderr.lower())
    else:
        for path in (prefix / "conda-meta").iterdir():
            if path.name != "history":
                path.unlink()
    audit = run_envkit("audit", "-p", str(prefix), "--json")
    assert audit.returncode == 1
    assert [f["rule_id"] for f in json.loads(audit.stdout)["data"]["audits"][0]["findings"] if f["rule_id"] == "EK042"] == ["EK042"]
    if damage == "no history":
        synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe")
        assert synced.returncode == 2 and "is not a conda env as conda sees it" in synced.stderr, synced.stderr
        listed = {e["prefix"]: e for e in json.loads(run_envkit("list", "--json").stdout)["data"]}
        assert str(listed[str(prefix)]["error"]).startswith("not a conda env: conda-meta/history is missing")


def test_list_gives_the_creation_time_of_an_env_conda_made(conda: Conda, tmp_path: Path) -> None:
    prefix = conda.create(tmp_path / "envs" / "bycondas", [tiny_channel(tmp_path)], ["tool"])
    listed = {e["prefix"]: e for e in json.loads(run_envkit("list", "--json").stdout)["data"]}
    created = listed[str(prefix)]["created"]
    assert isinstance(created, str) and created[:4].isdigit() and "T" in created, listed[str(prefix)]
