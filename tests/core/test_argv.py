"""Every place a value from a recipe, lock or sources file reaches another program's argument list
(docs/security.md lists them) is fed a value that begins with '-': it is refused, or the program
takes it as data, and no code runs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from envkit.core import argv
from envkit.core.errors import EnvkitError, SourceError
from envkit.pip.install import by_hash, constraints_text, pip_file, pip_newest, pip_put_back
from envkit.pip.repair import PipRepair
from envkit.recipe.gitsource import add_source, missing_commit
from tests.conftest import python_env, run_envkit
from tests.support.tiny import tiny_channel, tiny_recipe

CANARY = ".PWNED"
UPLOAD_PACK = f"--upload-pack=cd;touch$IFS{CANARY};git-upload-pack"


def _repo(root: Path) -> tuple[Path, str]:
    repo = root / "repo"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "--quiet", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", "a"], check=True)
    return repo, subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def _no_canary(*folders: Path) -> None:
    for folder in folders:
        assert not list(folder.rglob(CANARY)), f"code ran: {CANARY} in {folder}"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`cd` with no argument goes to HOME: where the injected command would touch its file."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    return home


def test_a_lock_commit_that_is_an_option_runs_nothing(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, commit = _repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    said = missing_commit(f"file://{repo}", UPLOAD_PACK)
    assert said is not None and "is not a git commit or ref name" in said
    assert missing_commit(f"file://{repo}", commit) is None  # a real commit is still asked for
    _no_canary(home, tmp_path)


def test_recipes_check_of_a_lock_whose_pip_url_carries_an_option_fails_and_runs_nothing(tmp_path: Path, home: Path) -> None:
    repo, _ = _repo(tmp_path)
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    env = dict(os.environ, HOME=str(home))
    assert run_envkit("lock", str(recipe), "--platform", "linux-64", env=env).returncode == 0
    lock = recipe.with_suffix(".lock")
    text = lock.read_text()
    hostile = {"linux-64": [{"name": "proj", "version": "0.1", "url": f"git+file://{repo}@{UPLOAD_PACK}"}]}
    lock.write_text(text.replace('"pip": {}', f'"pip": {json.dumps(hostile)}'))
    checked = run_envkit("recipes", "check", str(recipe), env=env, cwd=tmp_path)
    assert checked.returncode != 0, checked.stdout
    assert "not a value envkit locks: git revision" in checked.stdout + checked.stderr
    assert "Traceback" not in checked.stderr
    _no_canary(home, tmp_path)


def test_a_ref_or_url_given_to_add_source_is_never_an_option(tmp_path: Path, home: Path) -> None:
    repo, _ = _repo(tmp_path)
    with pytest.raises(SourceError, match="is not a branch, tag or commit name"):
        add_source(f"file://{repo}", name="team", ref=UPLOAD_PACK)
    with pytest.raises(SourceError):  # after `--`: git takes it for a repository, and there is none
        add_source(UPLOAD_PACK, name="team2")
    _no_canary(home, tmp_path)


def test_add_source_takes_pips_git_plus_form(tmp_path: Path, home: Path) -> None:
    repo, _ = _repo(tmp_path)
    (repo / "r.yaml").write_text("envkit: 1\nname: r\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "r.yaml"], check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", "r"], check=True)
    added = add_source(f"git+file://{repo}", name="team")
    assert added.url == f"file://{repo}" and added.recipes == ("r",)


def test_a_sources_file_with_a_ref_that_is_an_option_is_refused(tmp_path: Path, home: Path) -> None:
    from envkit.recipe.sources import read_git_sources, sources_file

    sources_file().parent.mkdir(parents=True, exist_ok=True)
    entry = {"name": "team", "url": "file:///x", "ref": "--output=/tmp/x", "commit": "a" * 40}
    sources_file().write_text(json.dumps({"version": 1, "sources": [entry]}))
    with pytest.raises(SourceError, match="has a ref, commit or name git would not take"):
        read_git_sources()


def test_requirement_lines_never_carry_an_option() -> None:
    assert constraints_text((("--index-url=http://x", "1.0"), ("idna", "3.4"))) == "idna==3.4\n"
    assert by_hash("idna", "https://h/idna-3.4-py3-none-any.whl#sha256=" + "0" * 64) is not None
    assert by_hash("idna", "https://h/idna-3.4-py3-none-any.whl#sha256=00 --index-url http://x") is None
    assert by_hash("--index-url=http://x", "https://h/idna-3.4-py3-none-any.whl#sha256=" + "0" * 64) is None


@pytest.fixture
def pip_prefix(tmp_path: Path) -> Path:
    _, prefix = python_env(tmp_path, "argv", "{omp_num_threads: 2}")
    return prefix


def test_pip_takes_a_name_that_begins_with_a_dash_as_a_requirement(pip_prefix: Path, tmp_path: Path) -> None:
    """Without `--`, `--version` would make pip print its version and succeed."""
    with pytest.raises(EnvkitError, match="--version"):
        pip_newest(pip_prefix, ("--version",))
    assert pip_file(pip_prefix, "--version", "1.0") == ""
    with pytest.raises(EnvkitError, match="could not uninstall"):
        pip_put_back(pip_prefix, PipRepair(extra=(("--version", "1.0"),)))


def test_the_validators() -> None:
    assert argv.is_commit("a" * 40) and argv.is_commit("b" * 64) and not argv.is_commit("-" + "a" * 39)
    for good in ("main", "release/1.2", "v1.0", "abc1234"):
        assert argv.is_ref_name(good), good
    for bad in ("-x", "--upload-pack=x", "a..b", "a b", "a~1", "x.lock", "/a", "a/", "@", "a\x1bb", ""):
        assert not argv.is_ref_name(bad), bad
    assert argv.is_dist_name("zope.interface") and not argv.is_dist_name("-r") and not argv.is_dist_name("a b")
