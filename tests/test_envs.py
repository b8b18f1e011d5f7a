"""Where envs and packages go, in the documented order of precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit import envs


def test_envs_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated: Path) -> None:
    monkeypatch.delenv("ENVKIT_ENVS_DIR")
    assert envs.envs_dir() == isolated / ".conda" / "envs"
    conda_root = tmp_path / "miniforge"
    (conda_root / "envs").mkdir(parents=True)
    (conda_root / "bin").mkdir()
    (conda_root / "bin" / "conda").write_text("")
    monkeypatch.setenv("CONDA_EXE", str(conda_root / "bin" / "conda"))
    assert envs.envs_dir() == conda_root / "envs"
    monkeypatch.setenv("CONDA_ENVS_DIRS", f"{tmp_path / 'dirs1'},{tmp_path / 'dirs2'}")
    assert envs.envs_dir() == tmp_path / "dirs1"
    monkeypatch.setenv("CONDA_ENVS_PATH", str(tmp_path / "path1"))
    assert envs.envs_dir() == tmp_path / "path1"
    monkeypatch.setenv("ENVKIT_ENVS_DIR", str(tmp_path / "mine"))
    assert envs.envs_dir() == tmp_path / "mine"


def test_pkgs_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated: Path) -> None:
    monkeypatch.delenv("ENVKIT_PKGS_DIR")
    assert envs.pkgs_dir() == isolated / ".cache" / "rattler" / "cache" / "pkgs"
    monkeypatch.setenv("CONDA_PKGS_DIRS", str(tmp_path / "conda-pkgs"))
    assert envs.pkgs_dir() == tmp_path / "conda-pkgs"
    monkeypatch.setenv("ENVKIT_PKGS_DIR", str(tmp_path / "mine"))
    assert envs.pkgs_dir() == tmp_path / "mine"


def test_registry_is_deduplicated_and_atomic(tmp_path: Path, isolated: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    envs.register(a)
    envs.register(b)
    envs.register(a)
    assert (isolated / ".conda" / "environments.txt").read_text() == f"{a}\n{b}\n"
    envs.unregister(a)
    assert envs.registered_envs() == [b]
    assert not list((isolated / ".conda").glob(".environments.txt.*.tmp"))
