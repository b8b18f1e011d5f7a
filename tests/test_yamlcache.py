"""YAML parses kept by the text's hash (envkit.yamlcache): a kept parse must be the parse, a
changed text must be parsed again, and a cache that is broken or cannot be written must never
change what a command says."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from envkit import yamlcache
from envkit.condaconfig import read_mapping
from envkit.errors import RecipeError, UsageError
from envkit.recipe.loader import load_recipe
from envkit.recipe.yamlsource import load_yaml

RECIPE = textwrap.dedent(
    """\
    envkit: 1
    name: kept
    description: a recipe   # a comment
    channels: [conda-forge]
    python: '3.11'
    packages:
      - numpy >=1.26
      - mkl-service
    threading:
      mkl_threading_layer: GNU
      omp_num_threads: 4
    """
)


def entries() -> list[Path]:
    folder = Path(os.environ["XDG_CACHE_HOME"]) / "envkit" / "yaml"
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def test_a_kept_parse_is_the_parse_with_this_files_name() -> None:
    parsed = load_yaml(RECIPE, "/recipes/kept.yaml")
    assert len(entries()) == 1
    kept = load_yaml(RECIPE, "/elsewhere/same-text.yaml")
    assert kept.data == parsed.data
    assert {path: (where.line, where.col) for path, where in kept.positions.items()} == {
        path: (where.line, where.col) for path, where in parsed.positions.items()
    }
    assert {where.file for where in kept.positions.values()} == {"/elsewhere/same-text.yaml"}
    assert kept.where(("packages", 1)).line == 8


def load_in_child(recipe: Path, *, validate: bool = False) -> subprocess.CompletedProcess[str]:
    """A fresh process, as every command is: prints the recipe (or the error) and whether PyYAML was imported."""
    code = textwrap.dedent(
        f"""
        import sys
        from envkit.errors import RecipeError
        from envkit.recipe.loader import load_recipe
        try:
            r = load_recipe({str(recipe)!r})
            print(r.name, r.packages[0].text, r.threading.mkl_threading_layer, r.located("threading.omp_num_threads"))
        except RecipeError as exc:
            print(*exc.lines(), sep="\\n")
        print("yaml imported:", "yaml" in sys.modules)
        """
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)


def test_the_second_command_does_not_import_pyyaml_and_says_the_same(tmp_path: Path) -> None:
    recipe = tmp_path / "kept.yaml"
    recipe.write_text(RECIPE)
    first, second = load_in_child(recipe), load_in_child(recipe)
    assert first.stdout.splitlines()[-1] == "yaml imported: True"
    assert second.stdout.splitlines()[-1] == "yaml imported: False"
    assert first.stdout.splitlines()[:-1] == second.stdout.splitlines()[:-1]
    assert f"{recipe}:11:" in first.stdout  # the position came through the cache too


def test_a_recipe_error_points_at_the_same_line_from_a_kept_parse(tmp_path: Path) -> None:
    """Valid YAML, invalid recipe: the parse is kept, and the error still names file:line:col."""
    recipe = tmp_path / "bad.yaml"
    recipe.write_text(RECIPE.replace("name: kept", "name: bad").replace("omp_num_threads: 4", "omp_num_threads: lots"))
    first, second = load_in_child(recipe), load_in_child(recipe)
    assert f"{recipe}:11:" in first.stdout and "omp_num_threads" in first.stdout
    assert second.stdout.replace("yaml imported: False", "yaml imported: True") == first.stdout


def test_an_edited_recipe_is_parsed_again(tmp_path: Path) -> None:
    recipe = tmp_path / "kept.yaml"
    recipe.write_text(RECIPE)
    assert load_recipe(str(recipe)).threading.omp_num_threads == 4
    recipe.write_text(RECIPE.replace("omp_num_threads: 4", "omp_num_threads: 8"))
    assert load_recipe(str(recipe)).threading.omp_num_threads == 8
    assert len(entries()) == 2


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"{not json",
        b"[]",
        b'{"format": 1}',
        b'{"format": 999, "value": {}}',
        b'{"format": 1, "value": {"data": {}, "positions": [[["x"], "1", 2]]}}',
    ],
    ids=["empty", "torn", "not-a-mapping", "no-value", "other-format", "bad-position"],
)
def test_a_broken_entry_is_a_miss(garbage: bytes) -> None:
    parsed = load_yaml(RECIPE, "kept.yaml")
    (entry,) = entries()
    entry.write_bytes(garbage)
    again = load_yaml(RECIPE, "kept.yaml")
    assert again.data == parsed.data and again.positions == parsed.positions


def test_what_json_cannot_say_exactly_is_never_kept() -> None:
    dated = load_yaml("envkit: 1\nname: dated\ndescription: 2024-01-02\n", "dated.yaml")
    assert dated.data["description"] == datetime.date(2024, 1, 2)
    assert entries() == []
    for value in (datetime.date(2024, 1, 2), b"x", {1: "a"}, ("a",), {"a": {"b": {"c"}}}):
        assert not yamlcache.is_plain(value)
    assert yamlcache.is_plain({"a": [1, 2.5, None, True, "s", {"b": []}]})


def test_a_cache_that_cannot_be_written_is_only_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache directory would be\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    recipe = tmp_path / "kept.yaml"
    recipe.write_text(RECIPE)
    assert load_recipe(str(recipe)).name == "kept"
    assert load_recipe(str(recipe)).threading.omp_num_threads == 4
    with pytest.raises(RecipeError, match=r"bad\.yaml:2:\d+: invalid YAML"):
        load_yaml("a: [1\nb: 2\n", str(tmp_path / "bad.yaml"))


def test_the_cache_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yamlcache, "KEEP_AT_MOST", 8)
    for n in range(12):
        load_yaml(f"envkit: 1\nname: r{n}\n", f"r{n}.yaml")
    assert 4 <= len(entries()) <= 8


def test_condarc_is_read_through_the_cache_too(tmp_path: Path) -> None:
    condarc = tmp_path / ".condarc"
    condarc.write_text("channels: [conda-forge]\nenvs_dirs: [~/envs]\n")
    assert read_mapping(condarc) == {"channels": ["conda-forge"], "envs_dirs": ["~/envs"]}
    (entry,) = entries()
    assert json.loads(entry.read_text())["value"] == {"channels": ["conda-forge"], "envs_dirs": ["~/envs"]}
    assert read_mapping(condarc) == {"channels": ["conda-forge"], "envs_dirs": ["~/envs"]}
    empty = tmp_path / "empty.condarc"
    empty.write_text("")
    assert read_mapping(empty) == {} and len(entries()) == 2  # an empty file is kept too (as null)
    assert yamlcache.recall("config", "") == (None,)


def test_a_condarc_that_is_not_utf8_is_one_line() -> None:
    """It used to escape as a UnicodeDecodeError traceback."""
    condarc = Path(os.environ["HOME"]) / ".condarc"
    condarc.write_bytes(b"channels: [\xff\xfe]\n")
    with pytest.raises(UsageError, match=r"cannot read .*\.condarc: 'utf-8' codec can't decode"):
        read_mapping(condarc)
    proc = subprocess.run([sys.executable, "-m", "envkit", "list"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("envkit: error: cannot read ") and "Traceback" not in proc.stderr
