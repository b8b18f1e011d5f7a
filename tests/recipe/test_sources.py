"""Recipe sources: precedence, provenance, and names that can never escape their directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envkit.core.errors import SourceError
from envkit.recipe.loader import load_recipe
from envkit.recipe.sources import all_sources, find_recipe
from tests.conftest import run_envkit, write_recipe


def rec(name: str, desc: str, extra: str = "") -> str:
    return f"envkit: 1\nname: {name}\ndescription: {desc}\nchannels: [conda-forge]\n{extra}"


def test_precedence_path_then_user_then_builtin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated: Path) -> None:
    user = isolated / ".config" / "envkit" / "recipes"
    write_recipe(user, "yolov8", rec("yolov8", "user copy"))
    assert load_recipe("yolov8").description == "user copy"
    assert load_recipe("yolov8").origin.source == "user"
    p1, p2 = tmp_path / "p1", tmp_path / "p2"
    write_recipe(p2, "yolov8", rec("yolov8", "second path"))
    write_recipe(p1, "other", rec("other", "first path"))
    monkeypatch.setenv("ENVKIT_RECIPE_PATH", os.pathsep.join([str(p1), str(p2)]))
    assert load_recipe("yolov8").description == "second path"
    assert [s.kind for s in all_sources()] == ["path", "path", "user", "builtin"]
    assert load_recipe("pytorch-base").origin.source == "builtin"


def test_extends_crosses_sources_and_prefers_own_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    team = tmp_path / "team"
    write_recipe(team, "pytorch-base", rec("pytorch-base", "team base", "python: '3.10'\n"))
    write_recipe(team, "trainer", rec("trainer", "team trainer", "extends: [pytorch-base, conda-forge-base]\n"))
    monkeypatch.setenv("ENVKIT_RECIPE_PATH", str(team))
    r = load_recipe("trainer")
    # pytorch-base from the team dir; conda-forge-base from the built-ins; the later parent wins on python
    assert r.python == "3.12" and any("conda-forge-base" in c for c in r.chain)
    assert any(str(team / "pytorch-base.yaml") == c for c in r.chain)


@pytest.mark.parametrize("name", ["../etc/passwd", "a/b", "UPPER", "", ".hidden", "x" * 80])
def test_names_cannot_escape(name: str) -> None:
    with pytest.raises(SourceError, match="invalid recipe name"):
        find_recipe(name)


def test_symlink_out_of_source_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = write_recipe(tmp_path / "outside", "evil", rec("evil", "x"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "evil.yaml").symlink_to(outside)
    monkeypatch.setenv("ENVKIT_RECIPE_PATH", str(src))
    with pytest.raises(SourceError, match="links outside its source directory"):
        find_recipe("evil")


def test_unknown_name_suggests() -> None:
    with pytest.raises(SourceError) as info:
        find_recipe("yolov9")
    assert info.value.hint == "did you mean 'yolov8'?"


def test_a_recipe_path_entry_that_holds_no_recipes_is_named(tmp_path: Path) -> None:
    """ENVKIT_RECIPE_PATH=~/team/train.yaml (the file, not its folder) found nothing and said nothing."""
    recipe = write_recipe(tmp_path / "team", "train", rec("train", "t"))
    env = {**os.environ, "ENVKIT_RECIPE_PATH": os.pathsep.join([str(recipe), str(tmp_path / "typo")])}
    missing = run_envkit("create", "train", "--dry-run", env=env)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr
    assert f"ENVKIT_RECIPE_PATH entry {recipe} is a file, not a folder of recipes" in missing.stderr
    assert f"ENVKIT_RECIPE_PATH entry {tmp_path / 'typo'} does not exist" in missing.stderr
    listed = run_envkit("recipes", "list", "--json", env=env)
    assert json.loads(listed.stdout)["messages"] == [
        f"ENVKIT_RECIPE_PATH entry {recipe} is a file, not a folder of recipes",
        f"ENVKIT_RECIPE_PATH entry {tmp_path / 'typo'} does not exist",
    ]
    env["ENVKIT_RECIPE_PATH"] = str(recipe.parent)
    assert run_envkit("recipes", "list", "--json", env=env).returncode == 0
    assert json.loads(run_envkit("recipes", "list", "--json", env=env).stdout)["messages"] == []
