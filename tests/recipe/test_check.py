"""`envkit recipes check` as a recipe repo's CI runs it: a real git checkout, locks committed beside
the recipes, a parent edited in a later commit, a channel that lost a package."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import run_envkit, write_recipe
from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_tar_bz2
from tests.team.test_lock import team_recipe, two_platform_channel


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_check_a_recipe_repo_through_its_history(tmp_path: Path) -> None:
    channel = two_platform_channel(tmp_path)
    repo = tmp_path / "recipes"
    team_recipe(repo, channel)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "ci@example.invalid")
    git(repo, "config", "user.name", "ci")
    for name in ("team-base", "team"):
        assert run_envkit("lock", str(repo / f"{name}.yaml")).returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "recipes and locks")

    # CI runs in the checkout with no argument; no env is created
    ok = run_envkit("recipes", "check", cwd=repo)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "ok team.yaml (lock team.lock, linux-64, osx-arm64)" in ok.stdout
    assert not (tmp_path / "envs").exists()

    # a later commit edits the parent: the child's lock is stale (its resolved recipe changed), and so is the parent's
    base = repo / "team-base.yaml"
    base.write_text(base.read_text().replace("omp_num_threads: 1", "omp_num_threads: 2"))
    (repo / "broken.yaml").write_text("envkit: 1\nname: broken\nchannels: [x]\npackages: [tool\n")
    git(repo, "commit", "-q", "-am", "threads")
    stale = run_envkit("recipes", "check", "--json", cwd=repo)
    assert stale.returncode == 1
    doc = json.loads(stale.stdout)
    problems = doc["errors"]
    assert any(p.startswith("team.lock: stale") and "envkit lock team.yaml" in p for p in problems)
    assert any(p.startswith("team-base.lock: stale") for p in problems)
    assert any(p.startswith("broken.yaml:") for p in problems)  # file:line from the loader
    assert all("\n" not in p for p in problems)

    # re-locked; then the channel loses the package the recipe needs: the lock is fresh but the recipe no longer solves
    for name in ("team-base", "team"):
        assert run_envkit("lock", str(repo / f"{name}.yaml")).returncode == 0
    (repo / "broken.yaml").unlink()
    assert run_envkit("recipes", "check", cwd=repo).returncode == 0
    for archive in channel.glob("osx-arm64/tool-*"):
        archive.unlink()
    index_channel(channel)
    gone = run_envkit("recipes", "check", str(repo / "team.yaml"))
    assert gone.returncode == 1
    lines = [line for line in gone.stdout.splitlines() + gone.stderr.splitlines() if "does not solve today" in line]
    assert len(lines) == 1 and "linux-64, osx-arm64" in lines[0]
    # the reason, not only the lead "cannot be solved for osx-arm64:" that ended the line before
    assert "cannot be solved for osx-arm64: Cannot solve the request because of: No candidates were found for tool" in lines[0], lines[0]
    assert "team.yaml:" in lines[0]  # the recipe line that asks for it


def test_check_reports_a_missing_lock_and_a_missing_platform(tmp_path: Path) -> None:
    channel = two_platform_channel(tmp_path)
    recipe = team_recipe(tmp_path / "r", channel)
    none = run_envkit("recipes", "check", str(recipe))
    assert none.returncode == 1 and "no lock (team.lock)" in none.stdout + none.stderr
    assert run_envkit("lock", str(recipe), "--platform", "linux-64").returncode == 0
    partial = run_envkit("recipes", "check", str(recipe))
    assert partial.returncode == 1 and "lacks osx-arm64, which the recipe declares" in partial.stdout + partial.stderr


def test_a_parent_the_repo_extends_needs_no_lock_of_its_own(tmp_path: Path) -> None:
    """team-base is only there to be extended: team's lock holds it. Checked without team, it is a
    recipe like any other, and needs its lock."""
    channel = two_platform_channel(tmp_path)
    repo = tmp_path / "recipes"
    team_recipe(repo, channel)
    assert run_envkit("lock", str(repo / "team.yaml")).returncode == 0
    ok = run_envkit("recipes", "check", cwd=repo)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "ok team-base.yaml (no lock of its own: extended by team, whose locks hold it)" in ok.stdout
    doc = json.loads(run_envkit("recipes", "check", "--json", cwd=repo).stdout)
    base = next(r for r in doc["data"] if r["path"] == "team-base.yaml")
    assert base["lock"] is None and base["extended_by"] == ["team"] and base["problems"] == []
    alone = run_envkit("recipes", "check", str(repo / "team-base.yaml"))
    assert alone.returncode == 1 and "no lock (team-base.lock)" in alone.stdout + alone.stderr
    # editing the parent still makes the child's lock stale
    base_file = repo / "team-base.yaml"
    base_file.write_text(base_file.read_text().replace("omp_num_threads: 1", "omp_num_threads: 2"))
    stale = run_envkit("recipes", "check", cwd=repo)
    assert stale.returncode == 1 and "team.lock: stale" in stale.stdout + stale.stderr


def test_check_that_finds_no_recipe_fails_instead_of_passing(tmp_path: Path) -> None:
    """CI running `envkit recipes check` where the recipes are not (a repo keeping them in recipes/)
    must not pass having checked nothing; the error names the folder that holds them."""
    channel = two_platform_channel(tmp_path)
    repo = tmp_path / "repo"
    team_recipe(repo / "recipes", channel)
    (repo / ".pre-commit-config.yaml").write_text("repos: []\n")  # a dot-file: neither a recipe nor a problem
    none = run_envkit("recipes", "check", cwd=repo)
    assert none.returncode == 2, none.stdout + none.stderr
    lines = none.stderr.strip().splitlines()
    assert len(lines) == 1 and "no recipe file (*.yaml, *.yml) in the current folder: nothing was checked" in lines[0]
    assert "envkit recipes check recipes" in lines[0]
    for name in ("team-base", "team"):
        assert run_envkit("lock", str(repo / "recipes" / f"{name}.yaml")).returncode == 0
    named = run_envkit("recipes", "check", "recipes", cwd=repo)
    assert named.returncode == 0, named.stdout + named.stderr
    assert "ok recipes/team.yaml" in named.stdout
    (repo / "recipes" / ".pre-commit-config.yaml").write_text("repos: []\n")
    assert run_envkit("recipes", "check", "recipes", cwd=repo).returncode == 0


def test_check_names_a_locked_build_its_channel_took_back(tmp_path: Path) -> None:
    """conda-forge moves a broken build off its main label: the recipe still solves (to another
    build), but the lock pins one that a machine without it in its cache can no longer download."""
    channel = tmp_path / "team"
    for version in ("0.9", "1.0"):
        write_tar_bz2(channel, PkgMeta("tool", version, "0"), [PkgFile("share/tool.txt", version.encode())])
    index_channel(channel)
    repo = tmp_path / "recipes"
    recipe = write_recipe(
        repo, "pinned", f"envkit: 1\nname: pinned\nchannels: [{channel.as_uri()}]\nplatforms: [linux-64]\npackages: [tool]\n"
    )
    assert run_envkit("lock", str(recipe)).returncode == 0
    assert run_envkit("recipes", "check", str(repo)).returncode == 0
    repodata_path = channel / "linux-64" / "repodata.json"
    repodata = json.loads(repodata_path.read_text())
    del repodata["packages"]["tool-1.0-0.tar.bz2"]
    repodata["removed"] = ["tool-1.0-0.tar.bz2"]
    repodata_path.write_text(json.dumps(repodata))
    taken_back = run_envkit("recipes", "check", str(repo), "--json")
    assert taken_back.returncode == 1
    assert json.loads(taken_back.stdout)["errors"] == [
        f"{repo / 'pinned.lock'}: linux-64: tool 1.0 0 is no longer offered by its channel (removed, or marked broken);"
        f" move it with 'envkit lock {recipe} --update tool' and commit the lock"
    ]
    # a locked create where the file is gone too says the same
    (channel / "linux-64" / "tool-1.0-0.tar.bz2").unlink()
    failed = run_envkit("create", str(recipe), "--locked", "--yes", "--no-probe")
    assert failed.returncode == 4 and failed.stderr.count("\n") == 1, failed.stderr
    assert (
        f"the lock pins a file its channel no longer has (removed, or marked broken): move it with 'envkit lock {recipe} --update tool'"
        in (failed.stderr)
    )
    # the fix it names
    assert run_envkit("lock", str(recipe), "--update", "tool").returncode == 0
    assert run_envkit("create", str(recipe), "--locked", "--yes", "--no-probe").returncode == 0
    assert run_envkit("recipes", "check", str(repo)).returncode == 0
