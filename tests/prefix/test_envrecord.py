"""The record as typed data (envkit/prefix/envrecord.py): what is read back is what was written, an
old version still reads, and a damaged part is taken as absent instead of stopping every command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envkit.core.errors import UsageError
from envkit.prefix.envrecord import (
    RECORD_VERSION,
    ActivationSection,
    EnvRecord,
    InstalledWheel,
    LockRef,
    RecipeRef,
    RecordedChannel,
    RecordedSpec,
)
from envkit.prefix.record import read_record, record_path, write_record
from envkit.solve.packages import PlannedPackage


def _full() -> EnvRecord:
    return EnvRecord(
        envkit_version="0.9.0",
        created="2026-12-01T10:00:00+00:00",
        updated="2026-12-02T10:00:00+00:00",
        recipe=RecipeRef("demo", "file", "/r/demo.yaml", None, ("/r/base.yaml", "/r/demo.yaml"), "a" * 64, "b" * 64),
        platform="linux-64",
        channels=(RecordedChannel("conda-forge", "https://mirror.example/conda-forge"),),
        specs=(RecordedSpec("python 3.12.*", "recipe", "/r/demo.yaml"),),
        pip=("tqdm==4.66.0",),
        virtual_packages=("__glibc=2.36",),
        assumed=("__cuda=12.4",),
        packages=(
            PlannedPackage("python", "3.12.7", "h1_0", "conda-forge", "linux-64", "https://x/python.conda", "c" * 64, None, ("libzlib",)),
        ),
        activation=ActivationSection(
            ops=[{"name": "MKL_THREADING_LAYER", "action": "set", "value": "GNU", "entries": [], "separator": ":"}],
            tag="0123abcd",
            format=6,
            files=("etc/conda/activate.d/envkit-demo.sh",),
            sha256={"etc/conda/activate.d/envkit-demo.sh": "d" * 64},
        ),
        probe={"status": "pass", "checks": {"ddp": "pass"}, "at": "2026-12-02T10:00:00+00:00"},
        healthy=True,
        lock=LockRef("/r/demo.lock", "e" * 64, frozen=False, stale=True),
        pip_installed=(InstalledWheel("tqdm", "4.66.0", "https://files/tqdm.whl#sha256=" + "f" * 64),),
        conda_meta={"python-3.12.7-h1_0.json": (1234, 1_700_000_000_000_000_000)},
    )


def test_what_is_written_reads_back_the_same(tmp_path: Path) -> None:
    record = _full()
    write_record(tmp_path, record)
    assert read_record(tmp_path) == record
    assert json.loads(record_path(tmp_path).read_text())["envkit_record_version"] == RECORD_VERSION
    # the JSON round trip alone, with no file between
    assert EnvRecord.from_json(json.loads(json.dumps(record.to_json()))) == record


def test_a_version_1_record_reads_and_is_written_back_as_the_current_version(tmp_path: Path) -> None:
    """Version 1 kept no activation tag: it reads as absent (envkit.activation.writer then takes it
    from the env's own script), and the next write is of this envkit's version."""
    v1: dict[str, Any] = {
        "envkit_record_version": 1,
        "recipe": {"name": "old", "source": "file", "path": "/r/old.yaml", "commit": None},
        "packages": [
            {"name": "zlib", "version": "1.3", "build": "0", "channel": "c", "subdir": "linux-64", "url": "u", "sha256": None, "role": None}
        ],
        "activation": {"ops": [], "files": ["etc/conda/activate.d/envkit-old.sh"]},
        "probe": None,
        "healthy": None,
    }
    record_path(tmp_path).parent.mkdir(parents=True)
    record_path(tmp_path).write_text(json.dumps(v1))
    record = read_record(tmp_path)
    assert record is not None and record.version == 1
    assert record.activation is not None and record.activation.tag is None
    assert record.packages is not None and [p.name for p in record.packages] == ["zlib"] and record.packages[0].depends == ()
    write_record(tmp_path, record)
    again = json.loads(record_path(tmp_path).read_text())
    assert again["envkit_record_version"] == RECORD_VERSION and again["recipe"]["name"] == "old"


def test_a_damaged_part_is_taken_as_absent_and_the_rest_still_reads() -> None:
    data = _full().to_json()
    data["packages"] = "not a list"  # no package list: drift and the record rules say nothing of it
    data["lock"] = ["not", "a", "mapping"]
    data["recipe"] = {"name": 5, "path": "/r/demo.yaml"}  # a number for a name is no name
    data["pip_installed"] = [{"version": "1"}, "junk", {"name": "ok", "version": "2"}]
    data["conda_meta"] = {"a.json": [1, "x"]}
    record = EnvRecord.from_json(data)
    assert record.packages is None and record.lock is None and record.conda_meta is None
    assert record.recipe == RecipeRef(None, None, "/r/demo.yaml")
    assert record.pip_installed == (InstalledWheel("ok", "2", ""),)
    assert record.platform == "linux-64" and record.healthy is True  # the parts that were sound


def test_keys_a_later_envkit_added_are_written_back_as_they_were() -> None:
    data = _full().to_json()
    data["attestations"] = {"linux-64": [{"outcome": "pass"}]}
    assert EnvRecord.from_json(data).to_json()["attestations"] == {"linux-64": [{"outcome": "pass"}]}


def test_a_record_envkit_only_fixed_names_no_recipe() -> None:
    fixed = EnvRecord(recipe=RecipeRef("audit", "audit --fix"))
    assert fixed.only_fixed and fixed.recipe_name is None
    assert _full().recipe_name == "demo" and not _full().only_fixed


def test_a_record_of_a_newer_version_is_refused_in_one_line(tmp_path: Path) -> None:
    record_path(tmp_path).parent.mkdir(parents=True)
    record_path(tmp_path).write_text(json.dumps({"envkit_record_version": RECORD_VERSION + 1}))
    with pytest.raises(UsageError, match="newer than this envkit reads"):
        read_record(tmp_path)
