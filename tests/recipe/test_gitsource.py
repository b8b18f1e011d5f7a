"""Team recipe repos through real git with file:// remotes: add, pin, update that changes a recipe."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from envkit.commands.recipes import envs_from
from envkit.core.errors import SourceError
from envkit.recipe.gitsource import add_source, update_sources
from envkit.recipe.loader import load_recipe
from envkit.recipe.sources import git_checkout_dir, sources_file
from tests.conftest import run_envkit
from tests.support.tiny import tiny_channel


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def team_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "team-recipes"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.invalid")
    git(repo, "config", "user.name", "t")
    (repo / "trainer.yaml").write_text(
        "envkit: 1\nname: trainer\ndescription: v1\nextends: [pytorch-base]\nthreading: {omp_num_threads: 2}\n"
    )
    (repo / "old.yaml").write_text("envkit: 1\nname: old\nchannels: [conda-forge]\n")
    (repo / "README.md").write_text("not a recipe\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "v1")
    return repo


def test_lifecycle(team_repo: Path) -> None:
    first = git(team_repo, "rev-parse", "HEAD")
    entry = add_source(team_repo.as_uri())
    assert (entry.name, entry.ref, entry.commit) == ("team-recipes", "main", first)
    recipe = load_recipe("trainer")
    assert recipe.origin.source == "team-recipes" and recipe.origin.commit == first
    assert recipe.threading.omp_num_threads == 2 and recipe.toolchain.blas == "mkl"  # extends a built-in

    (team_repo / "trainer.yaml").write_text(
        "envkit: 1\nname: trainer\ndescription: v2\nextends: [pytorch-base]\nthreading: {omp_num_threads: 4}\n"
    )
    (team_repo / "old.yaml").unlink()
    (team_repo / "fresh.yaml").write_text("envkit: 1\nname: fresh\nchannels: [conda-forge]\n")
    git(team_repo, "add", "-A")
    git(team_repo, "commit", "-q", "-m", "v2")
    second = git(team_repo, "rev-parse", "HEAD")

    checked = update_sources(envs_from=envs_from, apply=False)
    assert [(c.name, c.change) for c in checked[0].changes] == [("fresh", "added"), ("old", "removed"), ("trainer", "changed")]
    assert (checked[0].old_commit, checked[0].new_commit, checked[0].applied) == (first, second, False)
    assert load_recipe("trainer").threading.omp_num_threads == 2  # pin not moved by a check

    applied = update_sources("team-recipes", envs_from=envs_from)
    assert applied[0].applied
    assert load_recipe("trainer").threading.omp_num_threads == 4
    assert load_recipe("trainer").origin.commit == second
    assert json.loads(sources_file().read_text())["sources"][0]["commit"] == second
    assert update_sources(envs_from=envs_from)[0].changes == ()


def test_pinned_ref_and_errors(team_repo: Path) -> None:
    first = git(team_repo, "rev-parse", "HEAD")
    git(team_repo, "tag", "v1")
    entry = add_source(str(team_repo), name="pinned", ref="v1")
    assert entry.commit == first
    with pytest.raises(SourceError, match="already exists"):
        add_source(str(team_repo), name="pinned")
    with pytest.raises(SourceError, match="ref 'nope' not found in the repository; its branches: main"):
        add_source(str(team_repo), name="bad", ref="nope")
    with pytest.raises(SourceError, match="git clone failed"):
        add_source((team_repo.parent / "missing").as_uri(), name="gone")
    with pytest.raises(SourceError, match="no recipe source named 'zzz'"):
        update_sources("zzz", envs_from=envs_from)


def test_a_bare_remote_whose_head_names_a_branch_never_pushed(team_repo: Path, tmp_path: Path) -> None:
    """`git init --bare` names master; the team pushed main. Without --ref the error says so and
    names the branch there is."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "master", str(remote)], check=True)
    # before anything is pushed: no --ref can help (the hint said to pass one)
    empty = run_envkit("recipes", "add-source", remote.as_uri(), "--name", "team")
    assert empty.returncode == 2 and empty.stderr.splitlines() == [
        "envkit: error: the repository's HEAD names branch 'master', which it does not have; it has no branches: "
        "nothing was pushed to it yet (push the recipes to it first, then add it)"
    ]
    git(team_repo, "push", "-q", str(remote), "HEAD:main")
    proc = run_envkit("recipes", "add-source", remote.as_uri(), "--name", "team")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "envkit: error: the repository's HEAD names branch 'master', which it does not have; its branches: main "
        "(pass an existing branch, tag or commit with --ref, e.g. --ref main)"
    ]
    assert not sources_file().exists() and not git_checkout_dir("team").exists()
    assert run_envkit("recipes", "add-source", remote.as_uri(), "--name", "team", "--ref", "main").returncode == 0


def test_a_source_qualified_name_is_answered_with_the_name_to_use(team_repo: Path) -> None:
    """Sources do not qualify names (conda's channel::pkg habit): 'team/old' and 'team:old' say how it is named."""
    add_source(team_repo.as_uri(), name="team")
    for given in ("team/old", "team:old", "team/old.yaml"):
        proc = run_envkit("create", given, "--dry-run")
        assert proc.returncode == 2, proc.stderr
        assert "(a recipe from source 'team' goes by its own name: 'old')" in proc.stderr, proc.stderr
    assert "goes by its own name" not in run_envkit("create", "team/missing", "--dry-run").stderr


def test_cli_lists_provenance(team_repo: Path) -> None:
    proc = run_envkit("recipes", "add-source", str(team_repo), "--json")
    assert proc.returncode == 0, proc.stderr
    listing = json.loads(run_envkit("recipes", "list", "--json").stdout)
    rows = {(r["name"], r["source"]): r for r in listing["data"]}
    assert rows[("trainer", "team-recipes")]["commit"] == git(team_repo, "rev-parse", "HEAD")
    assert rows[("yolov8", "builtin")]["shadowed_by"] is None


def test_remove_source_forgets_it_and_names_the_envs_made_from_it(tmp_path: Path) -> None:
    channel = tiny_channel(tmp_path)
    repo = tmp_path / "team"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "tinyteam.yaml").write_text(f"envkit: 1\nname: tinyteam\nchannels: [{channel.as_uri()}]\npackages: [tool]\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-q", "-m", "v1")
    assert run_envkit("recipes", "add-source", repo.as_uri(), "--name", "team").returncode == 0
    assert run_envkit("create", "tinyteam", "--yes", "--no-probe").returncode == 0
    prefix = tmp_path / "envs" / "tinyteam"
    # an update that removes the env's recipe says so, before and as it moves the pin
    git(repo, "rm", "-q", "tinyteam.yaml")
    git(repo, "-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-q", "-m", "v2")
    for flags in (["--check"], []):
        update = run_envkit("recipes", "update", *flags, "--json")
        assert update.returncode == 0, update.stderr
        assert json.loads(update.stdout)["data"][0]["orphaned"] == [str(prefix)]
    git(repo, "-c", "user.email=t@example.invalid", "-c", "user.name=t", "revert", "--no-edit", "HEAD")
    assert json.loads(run_envkit("recipes", "update", "--json").stdout)["data"][0]["orphaned"] == []

    removed = run_envkit("recipes", "remove-source", "team", "--json")
    assert removed.returncode == 0, removed.stderr
    data = json.loads(removed.stdout)["data"]
    assert (data["name"], data["commit"], data["orphaned"]) == ("team", git(repo, "rev-parse", "HEAD"), [str(prefix)])
    assert json.loads(sources_file().read_text())["sources"] == [] and not git_checkout_dir("team").exists()
    listed = json.loads(run_envkit("recipes", "list", "--json").stdout)["data"]
    assert all(r["source"] != "team" for r in listed)
    human = run_envkit("recipes", "remove-source", "team")
    assert (
        human.returncode == 2
        and human.stderr == "envkit: error: no recipe source named 'team' (sources: none) (see 'envkit recipes list' for sources)\n"
    )
    gone = run_envkit("sync", "-n", "tinyteam", "--yes", "--no-probe")
    assert gone.returncode == 2 and gone.stderr.count("\n") == 1, gone.stderr
    assert "of the 'team' recipe repo, which was removed from envkit's sources" in gone.stderr
    assert "envkit recipes add-source URL --name team" in gone.stderr
    # the name is free again
    assert run_envkit("recipes", "add-source", repo.as_uri(), "--name", "team").returncode == 0
    assert "nothing to do" in run_envkit("sync", "-n", "tinyteam").stdout


def test_a_repo_with_no_recipe_at_its_top_level_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    """Recipes kept in recipes/ would be added as a source offering nothing: every teammate's
    `create NAME` would fail later with 'no recipe named'. The add is refused, saying where the
    YAML files are; nothing is saved or left in the cache."""
    repo = tmp_path / "nested"
    (repo / "recipes").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.invalid")
    git(repo, "config", "user.name", "t")
    (repo / "recipes" / "trainer.yaml").write_text("envkit: 1\nname: trainer\nchannels: [conda-forge]\n")
    (repo / ".pre-commit-config.yaml").write_text("repos: []\n")  # a tool's dot-file is no recipe
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "nested")

    proc = run_envkit("recipes", "add-source", repo.as_uri(), "--name", "team")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no recipe (NAME.yaml) at its top level" in lines[0] and "in recipes/" in lines[0]
    assert "move the recipes and their locks there" in lines[0]
    assert not sources_file().exists() or json.loads(sources_file().read_text())["sources"] == []
    assert not git_checkout_dir("team").exists() and not git_checkout_dir("team").with_name("team.partial").exists()

    # moved up, it is added and says what it offers; the dot-file is not listed as an unusable recipe
    git(repo, "mv", "recipes/trainer.yaml", "trainer.yaml")
    git(repo, "commit", "-q", "-m", "top level")
    added = run_envkit("recipes", "add-source", repo.as_uri(), "--name", "team")
    assert added.returncode == 0, added.stderr
    assert "1 recipe: trainer" in added.stdout
    listing = json.loads(run_envkit("recipes", "list", "--json").stdout)["data"]
    assert [r["name"] for r in listing if r["source"] == "team"] == ["trainer"]


def test_a_plain_folder_is_told_it_is_no_repo_and_how_to_use_it(tmp_path: Path) -> None:
    """A folder of recipes that is no git repo: git's "repository does not exist" (given a path) or
    "does not appear to be a git repository" said what is wrong only by half. It is refused by name,
    with the two ways on: make it a repo, or put it on ENVKIT_RECIPE_PATH, which then works."""
    folder = tmp_path / "team recipes"
    folder.mkdir()
    (folder / "trainer.yaml").write_text("envkit: 1\nname: trainer\nchannels: [conda-forge]\n")
    for given in (str(folder), folder.as_uri()):
        proc = run_envkit("recipes", "add-source", given, "--name", "team")
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert f"{folder} is a folder, not a git repository" in proc.stderr and f"ENVKIT_RECIPE_PATH={folder}" in proc.stderr
    assert not sources_file().exists() or json.loads(sources_file().read_text())["sources"] == []
    shown = run_envkit("recipes", "show", "trainer", env={**os.environ, "ENVKIT_RECIPE_PATH": str(folder)})
    assert shown.returncode == 0 and "trainer" in shown.stdout
    git(folder, "init", "-q", "-b", "main")
    git(folder, "-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "x")
    git(folder, "add", "-A")
    git(folder, "-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-q", "-m", "recipes")
    assert run_envkit("recipes", "add-source", str(folder), "--name", "team").returncode == 0


def test_an_unreachable_source_stops_the_update_before_any_pin_moves(team_repo: Path, tmp_path: Path) -> None:
    """Two sources; the first has a new commit, the second's remote is gone. Nothing moves (the
    checkouts are what recipes are read from, the pins what envs record: they must agree), and
    the error names the source and git's reason, not git's closing advice."""
    other = tmp_path / "other-recipes"
    shutil.copytree(team_repo, other)
    first = git(team_repo, "rev-parse", "HEAD")
    add_source(team_repo.as_uri(), name="alpha")
    add_source(other.as_uri(), name="beta")
    (team_repo / "fresh.yaml").write_text("envkit: 1\nname: fresh\nchannels: [conda-forge]\n")
    git(team_repo, "add", "-A")
    git(team_repo, "commit", "-q", "-m", "v2")
    second = git(team_repo, "rev-parse", "HEAD")
    shutil.move(other, tmp_path / "moved")

    with pytest.raises(SourceError) as failed:
        update_sources(envs_from=envs_from)
    message = failed.value.message
    assert message.startswith(f"recipe source 'beta' ({other.as_uri()}): git fetch failed: ") and "no source was updated" in message
    assert "does not appear to be a git repository" in message and "Please make sure" not in message
    pins = {e["name"]: e["commit"] for e in json.loads(sources_file().read_text())["sources"]}
    assert pins == {"alpha": first, "beta": first}
    assert git(git_checkout_dir("alpha"), "rev-parse", "HEAD") == first

    shutil.move(tmp_path / "moved", other)
    moved = {u.name: u for u in update_sources(envs_from=envs_from)}
    assert moved["alpha"].applied and not moved["beta"].applied
    pins = {e["name"]: e["commit"] for e in json.loads(sources_file().read_text())["sources"]}
    assert pins == {"alpha": second, "beta": first} and git(git_checkout_dir("alpha"), "rev-parse", "HEAD") == second


def test_a_followed_branch_renamed_on_the_remote_stops_the_update(team_repo: Path) -> None:
    """The team renames master to main (or deletes the branch a source follows). The branch `git
    clone` made in envkit's checkout still named the old commit, so update said "unchanged" for
    ever after; it must say the branch is gone, keep the pin, and the fix it gives must work."""
    git(team_repo, "branch", "-m", "main", "master")
    first = git(team_repo, "rev-parse", "HEAD")
    assert add_source(team_repo.as_uri()).ref == "master"
    git(team_repo, "branch", "-m", "master", "main")  # the rename, and a commit on the new name
    (team_repo / "trainer.yaml").write_text("envkit: 1\nname: trainer\nextends: [pytorch-base]\nthreading: {omp_num_threads: 8}\n")
    git(team_repo, "commit", "-qam", "after the rename")
    update = run_envkit("recipes", "update")
    assert update.returncode == 2 and update.stderr.count("\n") == 1, update.stdout + update.stderr
    assert "it no longer has ref 'master' (its branches: main)" in update.stderr and f"stays at {first[:10]}" in update.stderr
    assert json.loads(sources_file().read_text())["sources"][0]["commit"] == first
    fix = update.stderr.split("follow another branch: ")[1].rstrip(")\n")
    for command in fix.split(", then "):
        assert run_envkit(*command.split()[1:]).returncode == 0, command
    assert load_recipe("trainer").threading.omp_num_threads == 8


def test_a_pinned_tag_moved_or_deleted_on_the_remote(team_repo: Path) -> None:
    """git fetch keeps a tag it has even when the remote moved it: the team's release never came."""
    git(team_repo, "tag", "stable")
    assert add_source(team_repo.as_uri(), ref="stable").ref == "stable"
    (team_repo / "trainer.yaml").write_text("envkit: 1\nname: trainer\nextends: [pytorch-base]\nthreading: {omp_num_threads: 8}\n")
    git(team_repo, "commit", "-qam", "next release")
    git(team_repo, "tag", "-f", "stable")
    moved = update_sources(envs_from=envs_from)
    assert moved[0].new_commit == git(team_repo, "rev-parse", "HEAD") and moved[0].applied
    assert load_recipe("trainer").threading.omp_num_threads == 8
    git(team_repo, "tag", "-d", "stable")
    with pytest.raises(SourceError, match="it no longer has ref 'stable'"):
        update_sources(envs_from=envs_from)


def test_an_edit_in_envkits_checkout_stops_the_update_before_any_source_moves(team_repo: Path) -> None:
    """Recipes are read from the checkout's files: an edit there (someone "fixing" a recipe in the
    cache) made git's checkout fail halfway through the update, as "git -c failed"."""
    first = git(team_repo, "rev-parse", "HEAD")
    add_source(team_repo.as_uri())
    checkout = git_checkout_dir("team-recipes")
    (checkout / "trainer.yaml").write_text((checkout / "trainer.yaml").read_text() + "# tried a change here\n")
    (team_repo / "trainer.yaml").write_text("envkit: 1\nname: trainer\nextends: [pytorch-base]\nthreading: {omp_num_threads: 8}\n")
    git(team_repo, "commit", "-qam", "upstream change")
    update = run_envkit("recipes", "update")
    assert update.returncode == 2 and update.stderr.count("\n") == 1, update.stderr
    assert "has files that differ from its pinned commit (trainer.yaml); no source was updated" in update.stderr
    assert json.loads(sources_file().read_text())["sources"][0]["commit"] == first
    git(checkout, "checkout", "--", ".")  # what the error says to do
    assert run_envkit("recipes", "update").returncode == 0
    assert load_recipe("trainer").threading.omp_num_threads == 8


def test_a_file_the_pinned_commit_lacks_stops_the_update_too(team_repo: Path) -> None:
    """An untracked file in the checkout (a lock an older envkit wrote there) is read as if the
    team had pinned it, and git's checkout over it failed once the team committed that file."""
    first = git(team_repo, "rev-parse", "HEAD")
    add_source(team_repo.as_uri())
    checkout = git_checkout_dir("team-recipes")
    (checkout / "trainer.lock").write_text("written here by hand\n")
    (team_repo / "trainer.lock").write_text("the team's\n")
    git(team_repo, "add", "trainer.lock")
    git(team_repo, "commit", "-qm", "the team's lock")
    update = run_envkit("recipes", "update")
    assert update.returncode == 2 and update.stderr.count("\n") == 1, update.stderr
    assert "has files that differ from its pinned commit (trainer.lock); no source was updated" in update.stderr
    assert json.loads(sources_file().read_text())["sources"][0]["commit"] == first
    drop = update.stderr[update.stderr.index("'git -C") + 1 : update.stderr.index("', then")]
    subprocess.run(drop, shell=True, check=True)  # what the error says to do
    assert run_envkit("recipes", "update").returncode == 0
    assert (checkout / "trainer.lock").read_text() == "the team's\n"
