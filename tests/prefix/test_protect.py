"""envkit.prefix.protect on prefixes laid out on disk: the CEP 22 marker as conda reads it, and what makes a
prefix more than one env. Real conda's side of both is in tests/conda/test_frozen_and_installations.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envkit.core.errors import UsageError
from envkit.install.create import keep_verdict
from envkit.prefix.protect import frozen_env, more_than_an_env, must_not_be_frozen
from envkit.prefix.record import record_digest
from tests.conftest import run_envkit
from tests.support.records import record_json
from tests.support.tiny import tiny_channel, tiny_recipe


def env_at(path: Path) -> Path:
    (path / "conda-meta").mkdir(parents=True)
    (path / "conda-meta" / "history").write_text("")
    return path


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", ""),
        (b'{"message": "serves production:\\n  ask the ML platform team first"}', "serves production: ask the ML platform team first"),
        (b'{"message": 3}', ""),
        (b"not json", ""),
        (b"\xff\xfe", ""),
    ],
)
def test_a_marker_freezes_the_env_whatever_it_holds_and_its_message_is_one_line(tmp_path: Path, content: bytes, reason: str) -> None:
    prefix = env_at(tmp_path / "env")
    assert frozen_env(prefix) is None
    (prefix / "conda-meta" / "frozen").write_bytes(content)
    found = frozen_env(prefix)
    assert found is not None and found.reason == reason
    with pytest.raises(UsageError) as refused:
        must_not_be_frozen(prefix, "sync", override=False)
    assert refused.value.message == f"{prefix} is frozen (conda-meta/frozen){': ' + reason if reason else ''}; envkit does not sync it"
    assert "--override-frozen" in (refused.value.hint or "")
    must_not_be_frozen(prefix, "sync", override=True)


def test_a_folder_named_frozen_is_no_marker_as_for_conda(tmp_path: Path) -> None:
    prefix = env_at(tmp_path / "env")
    (prefix / "conda-meta" / "frozen").mkdir()
    assert frozen_env(prefix) is None


def test_what_makes_a_prefix_more_than_one_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = env_at(tmp_path / "plain")
    assert more_than_an_env(plain) is None
    # conda as a package (a conda-build env has it) is not an installation: no package cache
    build_env = env_at(tmp_path / "build-env")
    (build_env / "conda-meta" / "conda-26.7.0-py312h7900ff3_1.json").write_text("{}")
    (build_env / "conda-meta" / "conda-build-25.9.0-py312_0.json").write_text("{}")
    assert more_than_an_env(build_env) is None
    # an installer's base: conda in it, and its package cache
    (build_env / "pkgs").mkdir()
    assert more_than_an_env(build_env) == "it is a conda installation (conda is installed in it, with its package cache in pkgs)"
    # conda that pip installed (no conda record), with what only an installation keeps beside it
    pip_base = env_at(tmp_path / "pip-base")
    site = pip_base / "lib" / "python3.12" / "site-packages"
    (site / "conda-26.7.1.dist-info").mkdir(parents=True)
    (site / "conda_package_handling-2.6.0.dist-info").mkdir()
    assert more_than_an_env(pip_base) is None
    (pip_base / ".condarc").write_text("solver: classic\n")
    assert more_than_an_env(pip_base) == "it is a conda installation (conda is installed in it, with its own .condarc)"
    (pip_base / "envs").mkdir()
    assert more_than_an_env(pip_base) == "it is a conda installation (conda is installed in it, with its envs folder)"
    # a .condarc or an empty envs folder in an env without conda is no installation
    (site / "conda-26.7.1.dist-info").rmdir()
    assert more_than_an_env(pip_base) is None
    # envs inside it, however it was made
    holder = env_at(tmp_path / "holder")
    for name in ("a", "b", "c", "d", "e"):
        env_at(holder / "envs" / name)
    (holder / "envs" / "not-an-env").mkdir()
    assert more_than_an_env(holder) == "it holds other envs in its envs folder (a, b, c and 2 more)"
    # the conda in use, through a link to it
    monkeypatch.setenv("CONDA_EXE", str(plain / "bin" / "conda"))
    (plain / "bin").mkdir()
    (plain / "bin" / "conda").write_text("#!/bin/sh\n")
    os.symlink(plain, tmp_path / "link")
    assert more_than_an_env(tmp_path / "link") == "it is the base env of the conda in use"


def test_a_probe_keeps_no_verdict_in_a_frozen_env(tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "tiny"
    made = run_envkit("create", str(tiny_recipe(tmp_path, tiny_channel(tmp_path))), "-p", str(prefix), "--yes", "--no-probe")
    assert made.returncode == 0, made.stderr
    (prefix / "conda-meta" / "frozen").write_text("")
    before = (prefix / "etc" / "envkit" / "record.json").read_bytes()
    why = keep_verdict(prefix, {"checks": []}, True, record_digest(prefix))
    assert why == "the env is frozen (conda-meta/frozen): its record keeps no verdict from this probe"
    assert (prefix / "etc" / "envkit" / "record.json").read_bytes() == before
    record = record_json(prefix)
    assert record is not None and record["healthy"] is None
