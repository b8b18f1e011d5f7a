"""Where envs and packages go, in the documented order of precedence."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envkit.prefix import envs
from tests.conftest import run_envkit
from tests.support.tiny import tiny_channel, tiny_recipe


def test_envs_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated: Path) -> None:
    """conda's order (tests/conda/test_condarc_agreement.py checks it against conda itself)."""
    monkeypatch.delenv("ENVKIT_ENVS_DIR")
    assert envs.envs_dir() == isolated / ".conda" / "envs"
    conda_root = tmp_path / "miniforge"
    (conda_root / "conda-meta").mkdir(parents=True)
    (conda_root / "bin").mkdir()
    (conda_root / "bin" / "conda").write_text("")
    monkeypatch.setenv("CONDA_EXE", str(conda_root / "bin" / "conda"))
    assert envs.envs_dir() == conda_root / "envs"  # a writable root keeps its envs first
    (isolated / ".condarc").write_text(f"envs_dirs: [{tmp_path / 'rc'}]\n")
    assert envs.envs_dir() == tmp_path / "rc"
    monkeypatch.setenv("CONDA_ENVS_DIRS", f"{tmp_path / 'dirs1'}{os.pathsep}{tmp_path / 'dirs2'}")
    assert envs.envs_dir() == tmp_path / "dirs1"  # the variable beats the file
    assert envs.envs_dirs()[:3] == (tmp_path / "dirs1", tmp_path / "dirs2", tmp_path / "rc")
    monkeypatch.setenv("ENVKIT_ENVS_DIR", str(tmp_path / "mine"))
    assert envs.envs_dir() == tmp_path / "mine"


def test_pkgs_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated: Path) -> None:
    monkeypatch.delenv("ENVKIT_PKGS_DIR")
    assert envs.pkgs_dir() == isolated / ".cache" / "rattler" / "cache" / "pkgs"
    (isolated / ".condarc").write_text(f"pkgs_dirs: [{tmp_path / 'rc-pkgs'}]\n")
    assert envs.pkgs_dir() == tmp_path / "rc-pkgs"
    monkeypatch.setenv("CONDA_PKGS_DIRS", f"{tmp_path / 'conda-pkgs'},{tmp_path / 'second'}")
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


def test_registry_lines_that_are_not_utf8_or_comments_are_kept_as_they_are(tmp_path: Path, isolated: Path) -> None:
    """conda's registry is a list of paths, and a path is bytes: a folder named on a Latin-1 system
    is no reason to fail `envkit list`, nor to lose the line when envkit adds or removes its own."""
    registry = isolated / ".conda" / "environments.txt"
    registry.parent.mkdir()
    before = b"/data/caf\xe9/env\n# kept by hand\n"
    registry.write_bytes(before)
    assert envs.registered_envs() == [Path(os.fsdecode(b"/data/caf\xe9/env"))]
    env = tmp_path / "mine"
    envs.register(env)
    assert registry.read_bytes() == before + f"{env}\n".encode()
    envs.unregister(env)
    assert registry.read_bytes() == before
    (env / "conda-meta").mkdir(parents=True)
    envs.register(env)
    listed = run_envkit("list", "--json", env=dict(os.environ))
    assert listed.returncode == 0, listed.stderr
    assert [e["prefix"] for e in json.loads(listed.stdout)["data"]] == [str(env)]


def test_envkits_own_folders_given_relative_are_taken_from_where_it_runs(tmp_path: Path, isolated: Path) -> None:
    """ENVKIT_ENVS_DIR=envs: the env was registered as "envs/NAME", which conda env list and envkit
    list run anywhere else did not find (conda makes its own folders absolute the same way)."""
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    env = {**os.environ, "ENVKIT_ENVS_DIR": "my-envs", "ENVKIT_PKGS_DIR": "my-pkgs"}
    made = run_envkit("create", str(recipe), "--yes", "--no-probe", env=env, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    prefix = tmp_path / "my-envs" / "tiny"
    assert (isolated / ".conda" / "environments.txt").read_text().splitlines() == [str(prefix)]
    record = json.loads((prefix / "conda-meta" / "tool-1.0-0.json").read_text())
    assert Path(record["extracted_package_dir"]).is_relative_to(tmp_path / "my-pkgs"), record["extracted_package_dir"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listed = run_envkit("list", "--json", cwd=elsewhere)
    assert [e["prefix"] for e in json.loads(listed.stdout)["data"]] == [str(prefix)]


def test_a_package_cache_variable_that_names_a_file_is_one_line(tmp_path: Path) -> None:
    """It failed inside rattler's cache lock ("File exists", exit 4, said as an install failure)."""
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    cache = tmp_path / "pkgs"
    cache.write_text("mine\n")
    made = run_envkit(
        "create", str(recipe), "-p", str(tmp_path / "env"), "--yes", "--no-probe", env={**os.environ, "ENVKIT_PKGS_DIR": str(cache)}
    )
    assert made.returncode == 2 and made.stderr.count("\n") == 1, made.stderr
    assert f"ENVKIT_PKGS_DIR={cache} is a file, not a folder (name a folder (envkit makes it), or unset it)" in made.stderr
    assert cache.read_text() == "mine\n" and not (tmp_path / "env").exists()
