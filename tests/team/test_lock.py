"""`envkit lock` and locked creates as a team uses them: real solves over local channels, the lock
read back by rattler, installs that never solve, pip locked to files with hashes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import rattler

from envkit.recipe.digest import resolved_digest
from envkit.recipe.loader import load_recipe
from envkit.recipe.sources import git_checkout_dir
from envkit.team.lock import read_lock
from tests.conftest import run_envkit, write_recipe
from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_tar_bz2
from tests.support.httpchannel import Tally
from tests.support.pipchannel import (
    HOST_ONLY,
    editable_project,
    git_project,
    homemade_wheel,
    index_pip_env,
    module_rev,
    offline_pip_env,
    pip_channel,
    simple_index,
    two_pythons_pip_channel,
)
from tests.support.procs import MARK, marked, new_mark, none_left
from tests.support.replica import build_replica
from tests.support.tiny import python_builds_channel


def two_platform_channel(root: Path) -> Path:
    """tool -> helper on linux-64 and osx-arm64; a second tool build only on linux-64."""
    ch = root / "team"
    for subdir in ("linux-64", "osx-arm64"):
        write_tar_bz2(ch, PkgMeta("tool", "1.0", "0", depends=["helper"], subdir=subdir), [PkgFile("share/tool/version.txt", b"1.0\n")])
        write_tar_bz2(ch, PkgMeta("helper", "1.0", "0", subdir=subdir), [PkgFile("share/helper/data.txt", b"helper\n")])
    write_tar_bz2(ch, PkgMeta("osxonly", "1.0", "0", depends=["__osx >=11.0"], subdir="osx-arm64"), [PkgFile("share/o.txt", b"o\n")])
    index_channel(ch)
    return ch


def add_tool_2(ch: Path) -> None:
    write_tar_bz2(ch, PkgMeta("tool", "2.0", "0", depends=["helper"]), [PkgFile("share/tool/version.txt", b"2.0\n")])
    index_channel(ch)


def team_recipe(folder: Path, channel: Path, platforms: str = "[linux-64, osx-arm64]") -> Path:
    write_recipe(folder, "team-base", f"envkit: 1\nname: team-base\nchannels: [{channel.as_uri()}]\nthreading: {{omp_num_threads: 1}}\n")
    return write_recipe(folder, "team", f"envkit: 1\nname: team\nextends: [team-base]\nplatforms: {platforms}\npackages: [tool]\n")


def test_lock_is_byte_identical_and_rattler_reads_it(tmp_path: Path) -> None:
    recipe = team_recipe(tmp_path / "recipes", two_platform_channel(tmp_path))
    first = run_envkit("lock", str(recipe))
    assert first.returncode == 0, first.stderr
    lock_path = recipe.parent / "team.lock"
    one = lock_path.read_bytes()
    second = run_envkit("lock", str(recipe), "--json")
    assert second.returncode == 0, second.stderr
    assert lock_path.read_bytes() == one
    doc = json.loads(second.stdout)["data"]
    assert doc["path"] == str(lock_path) and [p["platform"] for p in doc["platforms"]] == ["linux-64", "osx-arm64"]

    lockfile = rattler.LockFile.from_path(lock_path)
    assert sorted(p.name for p in lockfile.platforms()) == ["linux-64", "osx-arm64"]
    env = lockfile.default_environment()
    assert env is not None
    names = {str(p): sorted(r.name.normalized for r in recs) for p, recs in env.conda_repodata_records().items()}
    assert names == {"linux-64": ["helper", "tool"], "osx-arm64": ["helper", "tool"]}

    lock = read_lock(lock_path)
    assert lock.recipe == "team" and lock.recipe_digest == resolved_digest(load_recipe(str(recipe)))
    osx = lock.for_platform("osx-arm64")
    assert osx is not None and "__osx=11.0" in osx.virtual_packages  # the platform's floor, not this machine
    linux = lock.for_platform("linux-64")
    assert linux is not None and [(op["name"], op["value"]) for op in linux.activation] == [("OMP_NUM_THREADS", "1")]


def test_a_lock_leaves_no_draft(tmp_path: Path) -> None:
    """rattler writes a lock only to a path: its draft goes beside the lock (envkit.core.fsutil's
    scratch_file), and nothing of it is left; to stdout (`-o -`) the draft goes to the system's
    temporary folder."""
    recipe = team_recipe(tmp_path / "recipes", two_platform_channel(tmp_path))
    for kind in ("a first lock", "a re-lock"):
        done = run_envkit("lock", str(recipe))
        assert done.returncode == 0, f"{kind}: {done.stderr[-2000:]}"
        assert sorted(os.listdir(recipe.parent)) == ["team-base.yaml", "team.lock", "team.yaml"], kind
    printed = run_envkit("lock", str(recipe), "-o", "-")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == (recipe.parent / "team.lock").read_text()


def test_each_platform_is_solved_with_its_own_virtual_packages(tmp_path: Path) -> None:
    ch = two_platform_channel(tmp_path)
    recipe = write_recipe(
        tmp_path / "r", "osx", f"envkit: 1\nname: osx\nchannels: [{ch.as_uri()}]\nplatforms: [osx-arm64]\npackages: [osxonly]\n"
    )
    proc = run_envkit("lock", str(recipe))
    assert proc.returncode == 0, proc.stderr
    both = write_recipe(
        tmp_path / "r", "both", f"envkit: 1\nname: both\nchannels: [{ch.as_uri()}]\nplatforms: [linux-64, osx-arm64]\npackages: [osxonly]\n"
    )
    failed = run_envkit("lock", str(both))
    assert failed.returncode == 3 and "Traceback" not in failed.stderr
    assert "the recipe 'both' cannot be solved for linux-64:" in failed.stderr.splitlines()[0]  # the one that failed, not both
    assert not (both.parent / "both.lock").exists()
    # one platform, not this machine's: named too (the lock is for another machine)
    one = run_envkit("lock", str(recipe), "--platform", "linux-64", "-o", str(tmp_path / "one.lock"))
    assert one.returncode == 3 and "the recipe 'osx' cannot be solved for linux-64:" in one.stderr.splitlines()[0], one.stderr
    # a platform given twice is locked once
    twice = run_envkit("lock", str(recipe), "--platform", "osx-arm64", "--platform", "osx-arm64", "--json")
    assert [p["platform"] for p in json.loads(twice.stdout)["data"]["platforms"]] == ["osx-arm64"], twice.stdout


def test_locked_create_installs_the_lock_without_solving(tmp_path: Path) -> None:
    ch = two_platform_channel(tmp_path)
    recipe = team_recipe(tmp_path / "recipes", ch)
    assert run_envkit("lock", str(recipe)).returncode == 0
    add_tool_2(ch)  # the channel moved on since the lock
    fresh = run_envkit("create", str(recipe), "-n", "fresh", "--yes", "--no-probe")
    assert fresh.returncode == 0, fresh.stderr
    assert (tmp_path / "envs" / "fresh" / "share" / "tool" / "version.txt").read_text() == "2.0\n"
    locked = run_envkit("create", str(recipe), "-n", "locked", "--locked", "--yes", "--no-probe")
    assert locked.returncode == 0, locked.stderr
    prefix = tmp_path / "envs" / "locked"
    assert (prefix / "share" / "tool" / "version.txt").read_text() == "1.0\n"
    record = json.loads((prefix / "etc" / "envkit" / "record.json").read_text())
    assert record["lock"]["path"] == str(recipe.parent / "team.lock") and record["lock"]["frozen"] is False
    assert "OMP_NUM_THREADS" in (prefix / "etc" / "conda" / "activate.d" / "envkit-team.sh").read_text()
    # no repodata at all: a locked create reads nothing but the lock and the package files
    for repodata in ch.glob("*/repodata*.json*"):
        repodata.unlink()
    again = run_envkit("create", str(recipe), "-n", "again", "--locked", "--yes", "--no-probe")
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "envs" / "again" / "share" / "tool" / "version.txt").read_text() == "1.0\n"


def test_lock_without_this_platform_is_refused(tmp_path: Path) -> None:
    recipe = team_recipe(tmp_path / "recipes", two_platform_channel(tmp_path))
    assert run_envkit("lock", str(recipe), "--platform", "osx-arm64").returncode == 0
    proc = run_envkit("create", str(recipe), "--locked", "--yes", "--no-probe")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "has no linux-64 packages (it locks osx-arm64)" in proc.stderr
    # the recipe names linux-64: locking it for its platforms adds linux-64 and keeps osx-arm64
    assert f"(lock it again for the recipe's platforms: 'envkit lock {recipe}')" in proc.stderr
    assert not (tmp_path / "envs" / "team").exists()
    # a recipe that does not name this platform says where to add it
    write_recipe(recipe.parent, "team", "envkit: 1\nname: team\nextends: [team-base]\nplatforms: [osx-arm64]\npackages: [tool]\n")
    assert run_envkit("lock", str(recipe)).returncode == 0
    unnamed = run_envkit("create", str(recipe), "--locked", "--yes", "--no-probe")
    assert unnamed.returncode == 2 and f"add linux-64 to the recipe's platforms ({recipe}:4:" in unnamed.stderr, unnamed.stderr
    # one that names none: the re-lock keeps the lock's platforms and adds this one
    write_recipe(recipe.parent, "team", "envkit: 1\nname: team\nextends: [team-base]\npackages: [tool]\n")
    assert run_envkit("lock", str(recipe), "--platform", "osx-arm64").returncode == 0
    bare = run_envkit("create", str(recipe), "--locked", "--yes", "--no-probe")
    assert bare.returncode == 2 and f"envkit lock {recipe} --platform osx-arm64 --platform linux-64'" in bare.stderr, bare.stderr


def test_editing_a_parent_makes_the_lock_stale_and_frozen_installs_it_anyway(tmp_path: Path) -> None:
    recipe = team_recipe(tmp_path / "recipes", two_platform_channel(tmp_path))
    assert run_envkit("lock", str(recipe)).returncode == 0
    parent = recipe.parent / "team-base.yaml"
    parent.write_text(parent.read_text().replace("omp_num_threads: 1", "omp_num_threads: 2"))
    stale = run_envkit("create", str(recipe), "--locked", "--yes", "--no-probe")
    assert stale.returncode == 2 and "is stale" in stale.stderr and "--frozen" in stale.stderr
    assert not (tmp_path / "envs" / "team").exists()
    frozen = run_envkit("create", str(recipe), "--locked", "--frozen", "--yes", "--no-probe")
    assert frozen.returncode == 0, frozen.stderr
    prefix = tmp_path / "envs" / "team"
    # the lock as it is: its activation settings, not the edited recipe's
    assert "OMP_NUM_THREADS='1'" in (prefix / "etc" / "conda" / "activate.d" / "envkit-team.sh").read_text()
    assert json.loads((prefix / "etc" / "envkit" / "record.json").read_text())["lock"]["frozen"] is True
    # the recipe's files are as they were at create, but the env is not what they ask for: list says so
    listed = run_envkit("list")
    lock = recipe.parent / "team.lock"
    assert "team (from a stale lock)" in listed.stdout and f"team holds {lock} as it was (--frozen)" in listed.stdout, listed.stdout
    [row] = [r for r in json.loads(run_envkit("list", "--json").stdout)["data"] if r["name"] == "team"]
    assert row["stale_lock"] == str(lock) and row["recipe_files"] == "unchanged"
    # a lock made again from the edited recipe and installed clears it
    assert run_envkit("lock", str(recipe)).returncode == 0
    assert run_envkit("sync", "-n", "team", "--locked", "--yes", "--no-probe").returncode == 0
    assert "stale lock" not in run_envkit("list").stdout


def test_lock_for_another_recipe_and_missing_or_damaged_locks(tmp_path: Path) -> None:
    ch = two_platform_channel(tmp_path)
    recipe = team_recipe(tmp_path / "recipes", ch)
    missing = run_envkit("create", str(recipe), "--locked", "--yes")
    assert missing.returncode == 2 and "no lock file at" in missing.stderr and f"envkit lock {recipe}" in missing.stderr
    garbage = tmp_path / "garbage.lock"
    garbage.write_text("version: 7\nenvkit: {not json\n")
    bad = run_envkit("create", str(recipe), "--lock", str(garbage), "--yes")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1
    other = write_recipe(tmp_path / "other", "other", f"envkit: 1\nname: other\nchannels: [{ch.as_uri()}]\npackages: [tool]\n")
    assert run_envkit("lock", str(other)).returncode == 0
    theirs = (other.parent / "other.lock").read_bytes()
    slip = run_envkit("lock", str(recipe), "-o", str(other.parent / "other.lock"))  # a slip of -o: not over another recipe's lock
    assert slip.returncode == 2 and "locks recipe 'other', not 'team': it was left as it is" in slip.stderr
    assert (other.parent / "other.lock").read_bytes() == theirs
    for frozen in ((), ("--frozen",)):  # another recipe's lock is not a stale one: said so, with or without --frozen
        wrong = run_envkit("create", str(recipe), "--lock", str(other.parent / "other.lock"), *frozen, "--yes")
        assert wrong.returncode == 2 and "locks recipe 'other', not 'team'" in wrong.stderr and "stale" not in wrong.stderr
    binary = tmp_path / "binary.lock"
    binary.write_bytes(b"version: 7\n\xf9\xff\x00garbage\n")
    undecodable = run_envkit("create", str(recipe), "--lock", str(binary), "--yes")
    assert (
        undecodable.returncode == 2
        and undecodable.stderr == f"envkit: error: {binary} is not a lock file: it is not UTF-8 text (re-lock with 'envkit lock RECIPE')\n"
    )
    folder = tmp_path / "folder.lock"
    folder.mkdir()
    assert "is a directory, not a lock file" in run_envkit("create", str(recipe), "--lock", str(folder), "--yes").stderr


def test_a_lock_git_merged_line_by_line_is_refused_at_its_conflict(tmp_path: Path) -> None:
    """Two people change the recipe and lock on their branches; the merge conflicts in the lock.
    Whatever YAML is left, a lock that is half one solve and half another is no lock."""
    ch = two_platform_channel(tmp_path)
    repo = tmp_path / "repo"

    def git(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=check, capture_output=True, text=True
        )

    recipe = team_recipe(repo, ch, platforms="[linux-64]")
    git("init", "-q", "-b", "main")
    assert run_envkit("lock", str(recipe)).returncode == 0
    git("add", "-A")
    git("commit", "-qm", "team")
    git("checkout", "-qb", "omp2")
    write_recipe(repo, "team-base", f"envkit: 1\nname: team-base\nchannels: [{ch.as_uri()}]\nthreading: {{omp_num_threads: 2}}\n")
    assert run_envkit("lock", str(recipe)).returncode == 0
    git("commit", "-qam", "two threads")
    git("checkout", "-q", "main")
    write_recipe(repo, "team-base", f"envkit: 1\nname: team-base\nchannels: [{ch.as_uri()}]\nthreading: {{omp_num_threads: 4}}\n")
    assert run_envkit("lock", str(recipe)).returncode == 0
    git("commit", "-qam", "four threads")
    assert git("merge", "omp2", check=False).returncode != 0  # conflicts in team-base.yaml and team.lock
    git("checkout", "--theirs", "team-base.yaml")
    lock = repo / "team.lock"
    marker = next(n for n, line in enumerate(lock.read_text().splitlines(), 1) if line.startswith("<<<<<<<"))
    refused = run_envkit("create", str(recipe), "--locked", "--frozen", "--yes", "--no-probe")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert f"{lock}:{marker}: an unresolved merge conflict" in refused.stderr and f"git checkout --theirs {lock}" in refused.stderr
    check = run_envkit("recipes", "check", str(recipe))
    assert check.returncode == 1 and f"{lock}:{marker}: an unresolved merge conflict" in check.stdout
    git("checkout", "--theirs", "team.lock")  # the fix the error gives
    assert run_envkit("lock", str(recipe)).returncode == 0
    assert run_envkit("recipes", "check", str(recipe)).returncode == 0
    made = run_envkit("create", str(recipe), "--locked", "-p", str(tmp_path / "env"), "--yes", "--no-probe")
    assert made.returncode == 0, made.stderr
    assert "export OMP_NUM_THREADS='2'" in (tmp_path / "env" / "etc" / "conda" / "activate.d" / "envkit-team.sh").read_text()


def test_where_locks_go(tmp_path: Path) -> None:
    ch = two_platform_channel(tmp_path)
    on_path = tmp_path / "recipe-path"
    write_recipe(on_path, "pathrecipe", f"envkit: 1\nname: pathrecipe\nchannels: [{ch.as_uri()}]\npackages: [tool]\n")
    env = {**os.environ, "ENVKIT_RECIPE_PATH": str(on_path)}
    assert run_envkit("lock", "pathrecipe", env=env, cwd=tmp_path).returncode == 0
    assert (on_path / "pathrecipe.lock").is_file()
    out = tmp_path / "elsewhere" / "x.lock"
    assert run_envkit("lock", "pathrecipe", "-o", str(out), env=env).returncode == 0
    assert out.is_file()
    folder = run_envkit("lock", "pathrecipe", "-o", str(out.parent), env=env)
    assert folder.returncode == 2 and f"e.g. {out.parent / 'pathrecipe.lock'}" in folder.stderr, folder.stderr
    bad = run_envkit("lock", "pathrecipe", "--platform", "amiga-68k", env=env)
    assert bad.returncode == 2 and "not a platform envkit builds for" in bad.stderr


def test_builtin_recipe_locks_into_the_working_dir(tmp_path: Path) -> None:
    replica = build_replica(tmp_path / "replica")
    mirrors = [f"--mirror={n}={p.as_uri()}" for n, p in replica.items()]
    work = tmp_path / "work"
    work.mkdir()
    proc = run_envkit("lock", "pytorch-cpu-openblas", *mirrors, cwd=work)
    assert proc.returncode == 0, proc.stderr
    lock = read_lock(work / "pytorch-cpu-openblas.lock")
    linux = lock.for_platform("linux-64")
    assert linux is not None and {"pytorch", "libopenblas", "libblas"} <= {r.name.normalized for r in linux.records}
    # the recipe's conda-forge, by the URL it has where no mirror stands in for it
    assert lock.channels == ("https://conda.anaconda.org/conda-forge",)
    assert all(r.url.startswith("https://conda.anaconda.org/conda-forge/") for r in linux.records)


def test_pip_is_locked_to_files_with_hashes_and_installed_exactly(tmp_path: Path) -> None:
    channel, links = pip_channel(tmp_path)
    recipe = write_recipe(
        tmp_path / "r",
        "withpip",
        f'envkit: 1\nname: withpip\nchannels: [{channel.as_uri()}]\npython: "3.11"\npackages: [pip]\npip: [threadpoolctl, mpmath]\n',
    )
    env = offline_pip_env(dict(os.environ), links)
    proc = run_envkit("lock", str(recipe), env=env)
    assert proc.returncode == 0, proc.stderr
    lock = read_lock(recipe.parent / "withpip.lock")
    linux = lock.for_platform("linux-64")
    assert linux is not None
    assert [(p.name, p.version) for p in linux.pip] == [("mpmath", "1.3.0"), ("threadpoolctl", "3.8.0")]
    assert all(p.url.startswith(links.as_uri()) and p.sha256 and len(p.sha256) == 64 for p in linux.pip)
    pypi = rattler.LockFile.from_path(recipe.parent / "withpip.lock").default_environment()
    assert pypi is not None
    assert {str(k): sorted(p.name for p in v) for k, v in pypi.pypi_packages().items()} == {"linux-64": ["mpmath", "threadpoolctl"]}
    # the format's own hash field too: rattler_lock's readers (pixi) take a wheel's hash from it alone
    read_hashes = {p.name: p.hashes.sha256.hex() for v in pypi.pypi_packages().values() for p in v if p.hashes and p.hashes.sha256}
    assert read_hashes == {p.name: p.sha256 for p in linux.pip}

    # pip is pointed at an empty wheelhouse: it installs the locked files by URL, no index, no resolving
    (tmp_path / "empty").mkdir()
    created = run_envkit(
        "create", str(recipe), "--locked", "--yes", "--no-probe", env=offline_pip_env(dict(os.environ), tmp_path / "empty")
    )
    assert created.returncode == 0, created.stderr
    site = tmp_path / "envs" / "withpip" / "lib" / "python3.11" / "site-packages"
    assert (site / "threadpoolctl-3.8.0.dist-info").is_dir() and (site / "mpmath-1.3.0.dist-info").is_dir()
    record = json.loads((tmp_path / "envs" / "withpip" / "etc" / "envkit" / "record.json").read_text())
    assert [p["name"] for p in record["pip_installed"]] == ["mpmath", "threadpoolctl"]

    # a wheel whose bytes changed since the lock is refused by its hash, and nothing is left
    wheel = links / "mpmath-1.3.0-py3-none-any.whl"
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    tampered = run_envkit("create", str(recipe), "-n", "tampered", "--locked", "--yes", "--no-probe", env=env)
    assert tampered.returncode == 4 and "Traceback" not in tampered.stderr
    # pip's own last line is "Got <hex>": the one line names the file and both digests
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert f"pip install failed: mpmath @ {wheel.as_uri()}: its sha256 is {digest}, not the " in tampered.stderr, tampered.stderr
    assert not (tmp_path / "envs" / "tampered").exists()


def test_a_lock_judges_no_machine_the_one_that_wrote_it_included(tmp_path: Path) -> None:
    """A lock is for every machine the team installs it on: this one's CPUs and driver (here: no
    NVIDIA driver, and fewer than 4096 CPUs) must not show in it or refuse it; a locked create
    here is judged here."""
    ch = tmp_path / "cuda"
    write_tar_bz2(ch, PkgMeta("cuda-version", "12.4", "0"), [PkgFile("share/cuda-version.txt", b"12.4\n")])
    index_channel(ch)
    recipe = write_recipe(
        tmp_path / "r",
        "gpu",
        f"envkit: 1\nname: gpu\nchannels: [{ch.as_uri()}]\nplatforms: [linux-64]\npackages: [cuda-version 12.4]\n"
        "threading: {omp_num_threads: 4096}\n",
    )
    env = {k: v for k, v in os.environ.items() if k != "CONDA_OVERRIDE_CUDA"}
    locked = run_envkit("lock", str(recipe), "--json", env=env)
    assert locked.returncode == 0, locked.stderr
    [linux] = json.loads(locked.stdout)["data"]["platforms"]
    assert linux["findings"] == [], linux["findings"]
    created = run_envkit("create", str(recipe), "-p", str(tmp_path / "env"), "--locked", "--yes", "--no-probe", "--json", env=env)
    assert created.returncode == 0, created.stderr
    # no driver here, and fewer CPUs than that: said where it installs
    assert {"EK015", "EK023"} <= {f["rule_id"] for f in json.loads(created.stdout)["data"]["findings"]}


def test_a_team_recipe_is_locked_in_a_clone_never_in_envkits_checkout(tmp_path: Path) -> None:
    """`envkit lock NAME` of a team repo's recipe wrote NAME.lock into envkit's checkout: every
    locked create took it for the team's, and when the team committed theirs, 'recipes update'
    died in git's checkout ("untracked working tree files would be overwritten")."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()

    channel = two_platform_channel(tmp_path)
    repo = tmp_path / "team-repo"
    repo.mkdir()
    git("init", "-q", "-b", "main")
    git("config", "user.email", "t@example.invalid")
    git("config", "user.name", "t")
    (repo / "train.yaml").write_text(f"envkit: 1\nname: train\nchannels: [{channel.as_uri()}]\nplatforms: [linux-64]\npackages: [tool]\n")
    git("add", "-A")
    git("commit", "-q", "-m", "v1")
    assert run_envkit("recipes", "add-source", repo.as_uri(), "--name", "team").returncode == 0

    refused = run_envkit("lock", "train")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "is in envkit's checkout of recipe source 'team'" in refused.stderr
    assert "'envkit lock train.yaml' in a clone of the 'team' repo, commit it, then 'envkit recipes update'" in refused.stderr
    assert [p.name for p in git_checkout_dir("team").iterdir()] == [".git", "train.yaml"]
    no_lock = run_envkit("create", "train", "--locked", "--yes", "--no-probe", "-p", str(tmp_path / "env"))
    assert no_lock.returncode == 2 and "in a clone of the 'team' repo" in no_lock.stderr, no_lock.stderr

    # for oneself: elsewhere, by -o; the team's: in the clone, committed, brought by 'recipes update'
    mine = tmp_path / "mine.lock"
    assert run_envkit("lock", "train", "-o", str(mine)).returncode == 0
    assert run_envkit("create", "train", "--lock", str(mine), "--yes", "--no-probe", "-p", str(tmp_path / "mine")).returncode == 0
    assert run_envkit("lock", str(repo / "train.yaml")).returncode == 0
    git("add", "train.lock")
    git("commit", "-q", "-m", "lock")
    assert run_envkit("recipes", "update").returncode == 0
    created = run_envkit("create", "train", "--locked", "--yes", "--no-probe", "-p", str(tmp_path / "env"))
    assert created.returncode == 0, created.stderr


def test_a_lock_keeps_channel_names_urls_and_each_machine_reaches_them_through_its_mirror(tmp_path: Path) -> None:
    """Locked behind one mirror, a lock held that mirror's URLs: a teammate behind another (or
    none) could not install it, and its own --mirror was not used. The lock now keeps the URL a
    channel's name has everywhere; each install, sync and export maps it through that machine's."""
    channel = two_platform_channel(tmp_path)
    office, cloud = tmp_path / "office-mirror", tmp_path / "cloud-mirror"
    shutil.copytree(channel, office)
    shutil.copytree(channel, cloud)
    recipe = write_recipe(
        tmp_path / "r", "named", "envkit: 1\nname: named\nchannels: [team-chan]\nplatforms: [linux-64]\npackages: [tool]\n"
    )
    assert run_envkit("lock", str(recipe), "--mirror", f"team-chan={office.as_uri()}").returncode == 0
    text = (recipe.parent / "named.lock").read_text()
    assert str(office) not in text and "- conda: https://conda.anaconda.org/team-chan/linux-64/tool-1.0-0.tar.bz2" in text
    shutil.rmtree(office)  # another machine: not this mirror, and nothing in its package cache
    env = {**os.environ, "ENVKIT_PKGS_DIR": str(tmp_path / "cold")}
    flag = run_envkit(
        "create", str(recipe), "--locked", "-n", "a", "--yes", "--no-probe", "--mirror", f"team-chan={cloud.as_uri()}", env=env
    )
    assert flag.returncode == 0, flag.stderr
    meta = tmp_path / "envs" / "a" / "conda-meta" / "tool-1.0-0.json"
    assert json.loads(meta.read_text())["url"] == f"{cloud.as_uri()}/linux-64/tool-1.0-0.tar.bz2"
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "envkit" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"mirrors:\n  team-chan: {cloud.as_uri()}\n")  # the machine's own setting, no flag
    assert run_envkit("create", str(recipe), "--locked", "-n", "b", "--yes", "--no-probe", env=env).returncode == 0
    config.unlink()
    # a locked sync reaches the channel the way the env was made: through the mirror its create used
    meta.unlink()
    env["ENVKIT_PKGS_DIR"] = str(tmp_path / "colder")
    synced = run_envkit("sync", "-n", "a", "--locked", "--yes", "--no-probe", env=env)
    assert synced.returncode == 0 and json.loads(meta.read_text())["url"].startswith(cloud.as_uri()), synced.stdout + synced.stderr
    exported = run_envkit("export", "-n", "a", "--format", "lock")
    assert exported.returncode == 0 and str(cloud) not in exported.stdout and "https://conda.anaconda.org/team-chan/" in exported.stdout


def pins(lock_path: Path, platform: str = "linux-64") -> dict[str, str]:
    locked = read_lock(lock_path).for_platform(platform)
    assert locked is not None
    return {r.name.normalized: str(r.version) for r in locked.records} | {f"pip:{p.name}": p.version for p in locked.pip}


def test_locking_again_keeps_the_pins_the_recipe_still_allows(tmp_path: Path) -> None:
    """A teammate adds one package and locks again: nothing else moves to the channel's newest
    (as with pixi and conda-lock); --update NAME moves that one, --update-all every one, and each
    re-lock says what changed against the lock it replaces."""
    ch = tmp_path / "team"
    write_tar_bz2(ch, PkgMeta("tool", "1.0", "0", depends=["helper"]), [PkgFile("share/tool.txt", b"1\n")])
    write_tar_bz2(ch, PkgMeta("helper", "1.0", "0"), [PkgFile("share/helper.txt", b"1\n")])
    write_tar_bz2(ch, PkgMeta("extra", "1.0", "0"), [PkgFile("share/extra.txt", b"1\n")])
    index_channel(ch)
    body = f"envkit: 1\nname: steady\nchannels: [{ch.as_uri()}]\nplatforms: [linux-64]\n"
    recipe = write_recipe(tmp_path / "r", "steady", body + "packages: [tool]\n")
    lock_path = recipe.parent / "steady.lock"
    first = run_envkit("lock", str(recipe))
    assert first.returncode == 0, first.stderr
    assert "kept the pins" not in first.stdout  # nothing to keep yet
    assert pins(lock_path) == {"tool": "1.0", "helper": "1.0"}

    # the channel moves on; the recipe gains a package
    write_tar_bz2(ch, PkgMeta("tool", "2.0", "0", depends=["helper >=2"]), [PkgFile("share/tool.txt", b"2\n")])
    write_tar_bz2(ch, PkgMeta("helper", "2.0", "0"), [PkgFile("share/helper.txt", b"2\n")])
    index_channel(ch)
    write_recipe(tmp_path / "r", "steady", body + "packages: [tool, extra]\n")
    again = run_envkit("lock", str(recipe))
    assert again.returncode == 0, again.stderr
    assert pins(lock_path) == {"tool": "1.0", "helper": "1.0", "extra": "1.0"}
    assert "kept the pins of the lock it replaces" in again.stdout
    assert [line.strip() for line in again.stdout.splitlines() if line.startswith("    ")] == ["+ extra 1.0 0"]
    unchanged = lock_path.read_bytes()
    assert run_envkit("lock", str(recipe)).returncode == 0 and lock_path.read_bytes() == unchanged  # still byte-identical

    # a typo is refused before anything is solved, and the lock is left as it was
    typo = run_envkit("lock", str(recipe), "--update", "tol")
    assert typo.returncode == 2 and typo.stderr.count("\n") == 1 and "--update tol: the lock at" in typo.stderr
    assert lock_path.read_bytes() == unchanged

    # --update tool: tool moves, and takes what it needs with it
    updated = run_envkit("lock", str(recipe), "--update", "tool", "--json")
    assert updated.returncode == 0, updated.stderr
    data = json.loads(updated.stdout)["data"]
    assert (data["previous"], data["kept"], data["updated"]) == (str(lock_path), True, ["tool"])
    assert data["platforms"][0]["changes"] == ["~ helper 1.0 0 -> 2.0 0", "~ tool 1.0 0 -> 2.0 0"]
    assert pins(lock_path) == {"tool": "2.0", "helper": "2.0", "extra": "1.0"}

    # --update-all solves afresh
    write_tar_bz2(ch, PkgMeta("extra", "1.1", "0"), [PkgFile("share/extra.txt", b"1.1\n")])
    index_channel(ch)
    assert run_envkit("lock", str(recipe)).returncode == 0 and pins(lock_path)["extra"] == "1.0"
    # what is there to move? a dry run says, and writes nothing
    kept = lock_path.read_bytes()
    preview = run_envkit("lock", str(recipe), "--update-all", "--dry-run", "--json")
    assert preview.returncode == 0, preview.stderr
    doc = json.loads(preview.stdout)
    assert doc["data"]["dry_run"] is True and doc["messages"] == ["dry run: the lock was not written"]
    assert doc["data"]["platforms"][0]["changes"] == ["~ extra 1.0 0 -> 1.1 0"]
    assert lock_path.read_bytes() == kept
    assert "would write " in run_envkit("lock", str(recipe), "--update-all", "--dry-run").stdout
    everything = run_envkit("lock", str(recipe), "--update-all")
    assert everything.returncode == 0, everything.stderr
    assert "solved afresh (--update-all)" in everything.stdout and "~ extra 1.0 0 -> 1.1 0" in everything.stdout
    assert pins(lock_path)["extra"] == "1.1"


def test_a_re_lock_keeps_no_pin_its_channel_took_back_and_reads_pins_as_the_channel_now_does(tmp_path: Path) -> None:
    """rattler takes a preferred record as a candidate even where the channel no longer has it,
    and with the depends it was locked with: a package since removed (conda-forge moves broken
    builds off its main label) would stay locked, and a repodata patch would be lost."""
    ch = tmp_path / "team"
    write_tar_bz2(ch, PkgMeta("tool", "1.0", "0"), [PkgFile("share/tool.txt", b"1\n")])
    write_tar_bz2(ch, PkgMeta("helper", "1.0", "0"), [PkgFile("share/helper.txt", b"1\n")])
    index_channel(ch)
    recipe = write_recipe(
        tmp_path / "r", "patched", f"envkit: 1\nname: patched\nchannels: [{ch.as_uri()}]\nplatforms: [linux-64]\npackages: [tool]\n"
    )
    lock_path = recipe.parent / "patched.lock"
    assert run_envkit("lock", str(recipe)).returncode == 0
    write_tar_bz2(ch, PkgMeta("tool", "0.9", "0"), [PkgFile("share/tool.txt", b"0.9\n")])
    index_channel(ch)
    # the channel's maintainers patch tool 1.0's metadata: it needs helper after all
    repodata_path = ch / "linux-64" / "repodata.json"
    repodata = json.loads(repodata_path.read_text())
    repodata["packages"]["tool-1.0-0.tar.bz2"]["depends"] = ["helper"]
    repodata_path.write_text(json.dumps(repodata))
    patched = run_envkit("lock", str(recipe))
    assert patched.returncode == 0, patched.stderr
    assert pins(lock_path) == {"tool": "1.0", "helper": "1.0"}, patched.stdout
    assert "+ helper 1.0 0" in patched.stdout
    # then they take tool 1.0 back (a broken build): the lock falls back to what is offered
    del repodata["packages"]["tool-1.0-0.tar.bz2"]
    repodata["removed"] = ["tool-1.0-0.tar.bz2"]
    repodata_path.write_text(json.dumps(repodata))
    taken_back = run_envkit("lock", str(recipe))
    assert taken_back.returncode == 0, taken_back.stderr
    assert pins(lock_path) == {"tool": "0.9"}, taken_back.stdout
    assert "~ tool 1.0 0 -> 0.9 0" in taken_back.stdout and "- helper 1.0 0" in taken_back.stdout


def test_a_re_lock_keeps_pins_through_a_mirror_and_pip_pins_too(tmp_path: Path) -> None:
    """The lock keeps canonical URLs; the machine that locks again reaches the channel through a
    mirror and still keeps the pins. pip's pins are kept too, released by --update like conda's."""
    channel, links = pip_channel(tmp_path)
    mirror = tmp_path / "mirror" / "pipchannel"
    recipe = write_recipe(
        tmp_path / "r",
        "steadypip",
        'envkit: 1\nname: steadypip\nchannels: [pipchannel]\npython: "3.11"\nplatforms: [linux-64]\npackages: [pip]\npip: [mpmath]\n',
    )
    lock_path = recipe.parent / "steadypip.lock"
    env = offline_pip_env(dict(os.environ), links)
    first = run_envkit("lock", str(recipe), "--mirror", f"pipchannel={channel.as_uri()}", env=env)
    assert first.returncode == 0, first.stderr
    before = pins(lock_path)
    assert before["pip:mpmath"] == "1.3.0"
    homemade_wheel(links, "mpmath", "9.9", {"mpmath/__init__.py": "__version__ = '9.9'\n"})
    shutil.copytree(channel, mirror)
    again = run_envkit("lock", str(recipe), "--mirror", f"pipchannel={mirror.as_uri()}", "--json", env=env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["data"]["platforms"][0]["changes"] == []
    assert pins(lock_path) == before
    moved_on = run_envkit("lock", str(recipe), "--mirror", f"pipchannel={mirror.as_uri()}", "--update", "mpmath", "--json", env=env)
    assert moved_on.returncode == 0, moved_on.stderr
    assert json.loads(moved_on.stdout)["data"]["platforms"][0]["changes"] == ["pip ~ mpmath 1.3.0 -> 9.9"]
    # a recipe whose pip list the pins no longer fit: pip's constraints are hard, so it resolves afresh
    recipe.write_text(recipe.read_text().replace("pip: [mpmath]", "pip: ['mpmath <2']"))
    narrowed = run_envkit("lock", str(recipe), "--mirror", f"pipchannel={mirror.as_uri()}", "--json", env=env)
    assert narrowed.returncode == 0, narrowed.stderr
    assert json.loads(narrowed.stdout)["data"]["platforms"][0]["changes"] == ["pip ~ mpmath 9.9 -> 1.3.0"]


def locked_alpha_beta(tmp_path: Path, name: str, channel: Path, links: Path) -> tuple[Path, Path, dict[str, str]]:
    """(recipe, its lock, pip's offline env): a linux-64 recipe with pip: [alpha, beta], locked."""
    recipe = write_recipe(
        tmp_path / "r",
        name,
        f'envkit: 1\nname: {name}\nchannels: [{channel.as_uri()}]\npython: "3.11"\nplatforms: [linux-64]\n'
        "packages: [pip]\npip: [alpha, beta]\n",
    )
    env = offline_pip_env(dict(os.environ), links)
    assert run_envkit("lock", str(recipe), env=env).returncode == 0
    return recipe, recipe.parent / f"{name}.lock", env


def test_a_narrowed_pip_requirement_moves_that_package_only(tmp_path: Path) -> None:
    """pip's constraints are hard: a pin the recipe's own pip list now rules out made pip fail with
    every pin, and the fresh resolve that followed moved every other wheel to its newest too."""
    channel, links = pip_channel(tmp_path)
    for name in ("alpha", "beta"):
        homemade_wheel(links, name, "1.0", {f"{name}/__init__.py": "v = 1\n"})
    recipe, lock_path, env = locked_alpha_beta(tmp_path, "twopip", channel, links)
    assert (pins(lock_path)["pip:alpha"], pins(lock_path)["pip:beta"]) == ("1.0", "1.0")
    for name, version in (("alpha", "2.0"), ("beta", "2.0"), ("beta", "0.5")):
        homemade_wheel(links, name, version, {f"{name}/__init__.py": "v = 2\n"})
    recipe.write_text(recipe.read_text().replace("pip: [alpha, beta]", "pip: [alpha, 'beta <1']"))
    relocked = run_envkit("lock", str(recipe), "--json", env=env)
    assert relocked.returncode == 0, relocked.stderr
    assert json.loads(relocked.stdout)["data"]["platforms"][0]["changes"] == ["pip ~ beta 1.0 -> 0.5"]
    assert pins(lock_path)["pip:alpha"] == "1.0"


def test_a_new_pip_requirement_moves_only_what_it_needs(tmp_path: Path) -> None:
    """A teammate adds a wheel that needs a newer version of a locked dependency. The pins cannot
    all hold, and the fresh resolve that followed moved every wheel to its newest; now only the pins
    the new requirement needs, all the way down, are let go."""
    channel, links = pip_channel(tmp_path)
    homemade_wheel(links, "alpha", "1.0", {"alpha/__init__.py": "v = 1\n"})
    homemade_wheel(links, "beta", "1.0", {"beta/__init__.py": "v = 1\n"}, requires=("common",))
    homemade_wheel(links, "common", "1.0", {"common/__init__.py": "v = 1\n"}, requires=("base",))
    homemade_wheel(links, "base", "1.0", {"base/__init__.py": "v = 1\n"})
    recipe, lock_path, env = locked_alpha_beta(tmp_path, "growing", channel, links)
    assert {k: v for k, v in pins(lock_path).items() if k.startswith("pip:")} == {
        "pip:alpha": "1.0", "pip:base": "1.0", "pip:beta": "1.0", "pip:common": "1.0"
    }  # fmt: skip
    for name in ("alpha", "beta", "base"):
        homemade_wheel(links, name, "2.0", {f"{name}/__init__.py": "v = 2\n"})
    homemade_wheel(links, "common", "2.0", {"common/__init__.py": "v = 2\n"}, requires=("base >=2",))
    homemade_wheel(links, "newcomer", "1.0", {"newcomer/__init__.py": "v = 1\n"}, requires=("common >=2", "mpmath; extra == 'fast'"))
    recipe.write_text(recipe.read_text().replace("pip: [alpha, beta]", "pip: [alpha, beta, newcomer]"))
    relocked = run_envkit("lock", str(recipe), "--json", env=env)
    assert relocked.returncode == 0, relocked.stderr
    assert json.loads(relocked.stdout)["data"]["platforms"][0]["changes"] == [
        "pip ~ base 1.0 -> 2.0", "pip ~ common 1.0 -> 2.0", "pip + newcomer 1.0"
    ]  # fmt: skip
    assert (pins(lock_path)["pip:alpha"], pins(lock_path)["pip:beta"]) == ("1.0", "1.0")


def test_a_new_python_lets_go_only_the_pins_with_no_file_for_it(tmp_path: Path) -> None:
    """python 3.11 -> 3.12 in the recipe: a pinned wheel built for cp311 alone has no file for the new
    python, so the pins could not all hold, and the fresh resolve that followed moved every wheel;
    now the pins pip names in its conflict are let go, and the rest are kept."""
    channel, links, other = two_pythons_pip_channel(tmp_path)
    host = f"{sys.version_info[0]}.{sys.version_info[1]}"
    homemade_wheel(links, "alpha", "1.0", {"alpha/__init__.py": "v = 1\n"}, tag=HOST_ONLY)  # a compiled wheel, for this python only
    homemade_wheel(links, "beta", "1.0", {"beta/__init__.py": "v = 1\n"}, requires=("alpha",))
    recipe = write_recipe(
        tmp_path / "r",
        "newpython",
        f'envkit: 1\nname: newpython\nchannels: [{channel.as_uri()}]\npython: "{host}"\nplatforms: [linux-64]\n'
        "packages: [pip]\npip: [alpha, beta]\n",
    )
    env = offline_pip_env(dict(os.environ), links)
    assert run_envkit("lock", str(recipe), env=env).returncode == 0
    lock_path = recipe.parent / "newpython.lock"
    assert (pins(lock_path)["pip:alpha"], pins(lock_path)["pip:beta"]) == ("1.0", "1.0")
    for name in ("alpha", "beta"):
        homemade_wheel(links, name, "2.0", {f"{name}/__init__.py": "v = 2\n"})
    recipe.write_text(recipe.read_text().replace(f'python: "{host}"', f'python: "{other}"'))
    relocked = run_envkit("lock", str(recipe), "--json", env=env)
    assert relocked.returncode == 0, relocked.stderr
    changes = json.loads(relocked.stdout)["data"]["platforms"][0]["changes"]
    assert [c for c in changes if c.startswith("pip ")] == ["pip ~ alpha 1.0 -> 2.0"]
    assert pins(lock_path)["pip:beta"] == "1.0"


def test_recipes_check_names_locked_wheels_whose_files_are_gone(tmp_path: Path) -> None:
    """A team's CI checks the locks of its recipe repo; a wheel the lock pins by URL whose file is no
    longer there (a mirror that dropped it, a wheelhouse cleaned) was not checked at all, and the
    next locked create on a machine without that file in its own index failed."""
    channel, links = pip_channel(tmp_path)
    recipe = write_recipe(
        tmp_path / "r",
        "wheelcheck",
        f'envkit: 1\nname: wheelcheck\nchannels: [{channel.as_uri()}]\npython: "3.11"\nplatforms: [linux-64]\n'
        "packages: [pip]\npip: [mpmath, threadpoolctl]\n",
    )
    lock_path = recipe.parent / "wheelcheck.lock"
    served = sorted(links.glob("mpmath-*.whl"))
    with simple_index(tmp_path / "index", served) as url:
        env = {**index_pip_env(dict(os.environ), url), "PIP_FIND_LINKS": str(links)}  # mpmath from the index, the rest from the folder
        assert run_envkit("lock", str(recipe), env=env).returncode == 0
        mpmath_url = next(p.url for p in read_lock(lock_path).platforms[0].pip if p.name == "mpmath")
        assert mpmath_url.startswith(url.rsplit("/simple", 1)[0])
        assert run_envkit("recipes", "check", str(recipe)).returncode == 0
    (links / "threadpoolctl-3.8.0-py3-none-any.whl").unlink()
    checked = run_envkit("recipes", "check", str(recipe), "--json")
    assert checked.returncode == 1, checked.stdout
    problems = json.loads(checked.stdout)["data"][0]["problems"]
    assert [p.split(": its file")[0] for p in problems] == [
        f"{lock_path}: linux-64: pip mpmath 1.3.0",
        f"{lock_path}: linux-64: pip threadpoolctl 3.8.0",
    ]
    assert all(f"'envkit lock {recipe} --update " in p for p in problems)


def test_recipes_check_asks_for_every_locked_wheel_at_once(tmp_path: Path) -> None:
    """Each locked wheel is a round trip to where it is kept (up to 30 s for a server that does not
    answer), and a team's locks name dozens: asked one after another, a check took their sum."""
    channel, links = pip_channel(tmp_path)
    recipe = write_recipe(
        tmp_path / "r",
        "farpip",
        f'envkit: 1\nname: farpip\nchannels: [{channel.as_uri()}]\npython: "3.11"\nplatforms: [linux-64]\n'
        "packages: [pip]\npip: [mpmath, threadpoolctl]\n",
    )
    tally = Tally()
    wheels = sorted(w for w in links.glob("*.whl") if w.name.startswith(("mpmath-", "threadpoolctl-")))
    with simple_index(tmp_path / "index", wheels, stall=1.0, tally=tally) as url:
        env = index_pip_env(dict(os.environ), url)
        assert run_envkit("lock", str(recipe), env=env).returncode == 0
        locked = read_lock(recipe.parent / "farpip.lock").platforms[0].pip
        assert sorted(p.name for p in locked) == ["mpmath", "threadpoolctl"]
        assert all(p.url.startswith(url.rsplit("/simple", 1)[0]) for p in locked)
        tally.most = 0
        checked = run_envkit("recipes", "check", str(recipe), env=env)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    assert tally.most == 2


def test_recipes_check_reaches_a_private_indexs_wheels_with_the_credentials_pip_has(tmp_path: Path) -> None:
    """A team's wheels on a private index (a password in PIP_INDEX_URL, pip.conf or ~/.netrc): the
    lock holds none (pip's report leaves them out of its URLs), and the locked create gets the files
    through the credentials pip is given; but `recipes check` asked for each file without them,
    took the 401 for a file gone, and told the team to move every wheel and commit a new lock."""
    channel, links = pip_channel(tmp_path)
    recipe = write_recipe(
        tmp_path / "r",
        "privpip",
        f'envkit: 1\nname: privpip\nchannels: [{channel.as_uri()}]\npython: "3.11"\nplatforms: [linux-64]\n'
        "packages: [pip]\npip: [mpmath]\n",
    )
    secret = "pw-4a4a99ba1801"
    with simple_index(tmp_path / "index", sorted(links.glob("mpmath-*.whl")), basic=("team", secret)) as url:
        with_password = index_pip_env(dict(os.environ), url.replace("http://", f"http://team:{secret}@"))
        assert run_envkit("lock", str(recipe), env=with_password).returncode == 0
        assert secret not in (recipe.parent / "privpip.lock").read_text()
        made = run_envkit("create", str(recipe), "--locked", "--yes", "--no-probe", env=with_password)
        assert made.returncode == 0, made.stderr
        assert run_envkit("recipes", "check", str(recipe), env=with_password).returncode == 0
        conf = tmp_path / "pip.conf"
        conf.write_text(f"[global]\nindex-url = {url.replace('http://', f'http://team:{secret}@')}\n")
        in_conf = {**index_pip_env(dict(os.environ), url), "PIP_CONFIG_FILE": str(conf)}
        in_conf.pop("PIP_INDEX_URL")
        assert run_envkit("recipes", "check", str(recipe), env=in_conf).returncode == 0
        without = index_pip_env(dict(os.environ), url)
        refused = run_envkit("recipes", "check", str(recipe), "--json", env=without)
        [problem] = json.loads(refused.stdout)["data"][0]["problems"]
        assert refused.returncode == 1 and "asks for credentials" in problem and "no longer answers" not in problem, problem
        netrc = Path(os.environ["HOME"]) / ".netrc"
        netrc.write_text(f"machine 127.0.0.1 login team password {secret}\n")
        netrc.chmod(0o600)  # as pip's reader (and Python's) require of a file with a password
        assert run_envkit("recipes", "check", str(recipe), env=without).returncode == 0
        netrc.write_text("machine 127.0.0.1 login team password wrong\n")
        wrong = json.loads(run_envkit("recipes", "check", str(recipe), "--json", env=without).stdout)["data"][0]["problems"]
        assert len(wrong) == 1 and "refuses the credentials" in wrong[0] and secret not in wrong[0], wrong


def test_a_conflicted_lock_is_locked_afresh_and_said(tmp_path: Path) -> None:
    ch = two_platform_channel(tmp_path)
    recipe = team_recipe(tmp_path / "recipes", ch, platforms="[linux-64]")
    lock_path = recipe.parent / "team.lock"
    assert run_envkit("lock", str(recipe)).returncode == 0
    text = lock_path.read_text()
    lock_path.write_text("<<<<<<< HEAD\n" + text + "=======\n" + text + ">>>>>>> theirs\n")
    relocked = run_envkit("lock", str(recipe), "--json")
    assert relocked.returncode == 0, relocked.stderr
    [said] = json.loads(relocked.stdout)["messages"]
    assert "an unresolved merge conflict" in said and "every package was solved afresh" in said
    assert lock_path.read_text() == text


def test_a_re_lock_for_fewer_platforms_says_which_it_dropped(tmp_path: Path) -> None:
    recipe = team_recipe(tmp_path / "recipes", two_platform_channel(tmp_path))
    assert run_envkit("lock", str(recipe)).returncode == 0
    narrowed = run_envkit("lock", str(recipe), "--platform", "linux-64")
    assert narrowed.returncode == 0, narrowed.stderr
    assert "osx-arm64: dropped: the lock it replaces had it, --platform did not ask for it" in narrowed.stdout
    assert [p.platform for p in read_lock(recipe.parent / "team.lock").platforms] == ["linux-64"]
    assert json.loads(run_envkit("lock", str(recipe), "--json").stdout)["data"]["dropped"] == []


def test_an_env_whose_lock_moved_on_says_so_in_list_and_sync(tmp_path: Path) -> None:
    """A teammate re-locks (or `recipes update` brings the team's new lock): the recipe is
    unchanged, so a plain sync has nothing to do, but the env is behind its lock, and says so."""
    ch = two_platform_channel(tmp_path)
    recipe = team_recipe(tmp_path / "recipes", ch, platforms="[linux-64]")
    assert run_envkit("lock", str(recipe)).returncode == 0
    assert run_envkit("create", str(recipe), "--locked", "--yes", "--no-probe").returncode == 0
    listed = run_envkit("list")
    assert "team (" not in listed.stdout and "sync --locked" not in listed.stdout
    # a sync to the edited recipe that changes no package: the env still holds its lock's packages
    recipe.write_text(recipe.read_text() + "# reviewed\n")
    assert "already matches its recipe" in run_envkit("sync", "-n", "team", "--yes", "--no-probe").stdout
    add_tool_2(ch)
    assert run_envkit("lock", str(recipe), "--update", "tool").returncode == 0
    listed = run_envkit("list", "--json")
    [row] = [r for r in json.loads(listed.stdout)["data"] if r["recipe"] == "team"]
    assert (row["lock_file"], row["recipe_files"]) == ("changed", "unchanged")
    text = run_envkit("list").stdout
    assert "team (its lock changed since)" in text and "`envkit sync --locked -n NAME`" in text
    plain = run_envkit("sync", "-n", "team")
    assert plain.returncode == 0 and "nothing to do" in plain.stdout + plain.stderr
    assert f"the lock it was installed from ({recipe.parent / 'team.lock'}) changed since: 'envkit sync --locked' installs it" in (
        plain.stdout + plain.stderr
    )
    synced = run_envkit("sync", "-n", "team", "--locked", "--yes", "--no-probe")
    assert synced.returncode == 0, synced.stderr
    assert "~ tool 1.0 0 -> 2.0 0" in synced.stdout
    assert json.loads(run_envkit("list", "--json").stdout)["data"][0]["lock_file"] == "unchanged"
    (recipe.parent / "team.lock").unlink()
    assert "team (its lock is gone)" in run_envkit("list").stdout


def test_a_lock_shows_each_platforms_findings_in_text(tmp_path: Path) -> None:
    """The findings under each platform's line, fresh lock or re-lock (a re-lock's changes printed
    there once hid them)."""
    ch = two_platform_channel(tmp_path)
    recipe = write_recipe(
        tmp_path / "r",
        "debugcpu",
        f"envkit: 1\nname: debugcpu\nchannels: [{ch.as_uri()}]\nplatforms: [linux-64, osx-arm64]\npackages: [tool]\n"
        "threading:\n  env:\n    MKL_DEBUG_CPU_TYPE: '5'\n",
    )
    for attempt in ("first", "again"):
        shown = run_envkit("lock", str(recipe))
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        at = [n for n, line in enumerate(lines) if line.startswith(("  linux-64:", "  osx-arm64:"))]
        assert len(at) == 2, (attempt, shown.stdout)
        for start, end in zip(at, [*at[1:], len(lines)], strict=True):
            assert any("warning EK009 MKL_DEBUG_CPU_TYPE set" in line for line in lines[start:end]), (attempt, shown.stdout)


def test_a_pin_whose_build_must_change_keeps_its_version(tmp_path: Path) -> None:
    """Moving python takes every compiled package to another build. rattler keeps a pinned record,
    not its version: numpyish went to its newest (1.1) where `conda install python=3.12` keeps
    1.0 and takes its py312 build. The recipe, --update, or a package that needs the newer one
    still move it."""
    ch = python_builds_channel(tmp_path, newer_needs="numpyish >=1.1")
    recipe = write_recipe(
        tmp_path / "r",
        "py",
        f"envkit: 1\nname: py\nchannels: [{ch.as_uri()}]\nplatforms: [linux-64]\npackages: [python 3.11.*, numpyish 1.0, helper 1.0]\n",
    )
    lock_path = recipe.parent / "py.lock"
    assert run_envkit("lock", str(recipe)).returncode == 0
    recipe.write_text(recipe.read_text().replace("python 3.11.*, numpyish 1.0", "python 3.12.*, numpyish"))

    def relock(*args: str) -> list[str]:
        done = run_envkit("lock", str(recipe), "--dry-run", "--json", *args)
        assert done.returncode == 0, done.stderr
        return list(json.loads(done.stdout)["data"]["platforms"][0]["changes"])

    assert relock() == ["~ numpyish 1.0 py311_0 -> 1.0 py312_0", "~ python 3.11.0 0 -> 3.12.0 0"]
    assert "~ numpyish 1.0 py311_0 -> 1.1 py312_0" in relock("--update", "numpyish")
    # helper 1.1 needs numpyish >=1.1: holding 1.0 cannot solve, so the first solve stands
    recipe.write_text(recipe.read_text().replace("helper 1.0", "helper 1.1"))
    assert "~ numpyish 1.0 py311_0 -> 1.1 py312_0" in relock()
    recipe.write_text(recipe.read_text().replace("helper 1.1", "helper").replace("numpyish,", "numpyish >=1.1,"))
    assert "~ numpyish 1.0 py311_0 -> 1.1 py312_0" in relock()
    assert pins(lock_path)["numpyish"] == "1.0"  # dry runs all


def test_a_git_wheel_is_locked_at_its_commit_and_stays_there_until_updated(tmp_path: Path) -> None:
    """A team's own package from git (`proj @ git+URL@main`). The lock kept the bare URL, without
    `git+` and without the commit pip resolved: a locked create installed whatever that URL then
    held, a re-lock followed the branch's head while it said "unchanged", and `recipes check`
    could not tell a commit a force-push took away."""
    channel, links = pip_channel(tmp_path)
    repo = tmp_path / "proj"
    commit = git_project(repo, "proj")
    first = commit("REV = 1\n")
    source = f"git+file://localhost{repo}"
    recipe = write_recipe(
        tmp_path / "r",
        "fromgit",
        f'envkit: 1\nname: fromgit\nchannels: [{channel.as_uri()}]\npython: "3.11"\nplatforms: [linux-64]\n'
        f'packages: [pip]\npip: ["proj @ {source}@main"]\n',
    )
    lock_path = recipe.parent / "fromgit.lock"
    env = offline_pip_env(dict(os.environ), links)

    def locked_url() -> str:
        return next(p.url for p in read_lock(lock_path).platforms[0].pip if p.name == "proj")

    assert run_envkit("lock", str(recipe), env=env).returncode == 0
    assert locked_url() == f"{source}@{first}"
    second = commit("REV = 2\n")
    relocked = run_envkit("lock", str(recipe), "--json", env=env)
    assert relocked.returncode == 0, relocked.stderr
    assert json.loads(relocked.stdout)["data"]["platforms"][0]["changes"] == []
    assert locked_url() == f"{source}@{first}"

    prefix = tmp_path / "envs" / "fromgit"
    made = run_envkit("create", str(recipe), "-p", str(prefix), "--locked", "--yes", "--no-probe", env=env)
    assert made.returncode == 0, made.stderr
    assert module_rev(prefix) == "1"

    updated = run_envkit("lock", str(recipe), "--update", "proj", "--json", env=env)
    assert json.loads(updated.stdout)["data"]["platforms"][0]["changes"] == [f"pip ~ proj 0.1 ({first[:12]}) -> 0.1 ({second[:12]})"]
    assert locked_url() == f"{source}@{second}"
    # the env made from the lock follows it: pip took the commit installed for the new one (same version)
    synced = run_envkit("sync", "-p", str(prefix), "--locked", "--yes", "--no-probe", env=env)
    assert synced.returncode == 0, synced.stderr
    assert module_rev(prefix) == "2"
    assert run_envkit("recipes", "check", str(recipe)).returncode == 0

    git = ["git", "-C", str(repo)]
    subprocess.run([*git, "reset", "--quiet", "--hard", first], check=True)  # the force-push that takes `second` away
    subprocess.run([*git, "reflog", "expire", "--expire=now", "--all"], check=True)
    subprocess.run([*git, "gc", "--quiet", "--prune=now"], check=True)
    checked = run_envkit("recipes", "check", str(recipe), "--json")
    assert checked.returncode == 1, checked.stdout
    assert json.loads(checked.stdout)["data"][0]["problems"] == [
        f"{lock_path}: linux-64: pip proj 0.1: its commit {second[:12]} is no longer in file://localhost{repo};"
        f" move it with 'envkit lock {recipe} --update proj' and commit the lock"
    ]
    repo.rename(tmp_path / "moved")  # a repository that does not answer is not a commit gone
    unreachable = json.loads(run_envkit("recipes", "check", str(recipe), "--json").stdout)["data"][0]["problems"]
    assert [p.split(" (")[0] for p in unreachable] == [
        f"{lock_path}: linux-64: pip proj 0.1: its repository file://localhost{repo} did not answer"
    ]


def test_a_wheel_from_a_folder_is_locked_by_its_path_and_said_so(tmp_path: Path) -> None:
    """A project folder (`proj @ file:///path`) is locked by path: the lock says that it cannot pin
    what the folder holds, and `recipes check` took the folder for a file that was gone."""
    channel, links = pip_channel(tmp_path)
    folder = editable_project(tmp_path / "proj", "proj")
    recipe = write_recipe(
        tmp_path / "r",
        "fromfolder",
        f'envkit: 1\nname: fromfolder\nchannels: [{channel.as_uri()}]\npython: "3.11"\nplatforms: [linux-64]\n'
        f'packages: [pip]\npip: ["proj @ {folder.as_uri()}"]\n',
    )
    locked = run_envkit("lock", str(recipe), "--json", env=offline_pip_env(dict(os.environ), links))
    assert locked.returncode == 0, locked.stderr
    assert f"pip proj 0.1 is locked as the folder {folder}: the lock cannot pin what it holds" in json.dumps(
        json.loads(locked.stdout)["messages"]
    )
    assert run_envkit("recipes", "check", str(recipe)).returncode == 0
    shutil.rmtree(folder)
    gone = run_envkit("recipes", "check", str(recipe))
    assert gone.returncode == 1 and f"its file no longer answers at {folder.as_uri()}" in gone.stdout, gone.stdout


def markers_recipe(tmp_path: Path) -> tuple[Path, Path]:
    """(recipe, find-links folder): python 3.12 and pip for linux-64, win-64 and osx-arm64, and a
    wheel `app` that requires another wheel per platform and per python by environment markers."""
    channel = build_replica(tmp_path / "replica")["conda-forge"]
    write_tar_bz2(channel, PkgMeta("pip", "24.0", "pyhd8ed1ab_0", depends=["python >=3.8"], subdir="noarch", noarch="python"))
    index_channel(channel)
    links = tmp_path / "links"
    requires = (
        'winonly; sys_platform == "win32"',
        'linuxonly; platform_system == "Linux"',
        'armonly; platform_machine == "arm64"',
        'newpy; python_version >= "3.12"',
    )
    homemade_wheel(links, "app", "1.0", {"app/__init__.py": "v = 1\n"}, requires=requires)
    for name in ("winonly", "linuxonly", "armonly", "newpy"):
        homemade_wheel(links, name, "1.0", {f"{name}/__init__.py": "v = 1\n"})
    assert sys.version_info[:2] != (3, 12), "the python_version marker must differ from the host's"
    recipe = write_recipe(
        tmp_path / "r",
        "markers",
        f"envkit: 1\nname: markers\nchannels: [{channel.as_uri()}]\nplatforms: [linux-64, win-64, osx-arm64]\n"
        "python: '3.12'\npackages: [pip]\npip: [app]\n",
    )
    return recipe, links


def test_pip_is_locked_for_each_platforms_own_environment_markers(tmp_path: Path) -> None:
    """pip evaluates environment markers for the machine it runs on, whatever --platform and
    --python-version say: a win-64 lock made here held linux's wheels and lacked windows' own
    (`colorama; platform_system == "Windows"`, which click and tqdm require), a mac's held
    linux's, and a python 3.12 lock made under 3.11 lacked what only 3.12 needs."""
    recipe, links = markers_recipe(tmp_path)
    locked = run_envkit("lock", str(recipe), env=offline_pip_env(dict(os.environ), links))
    assert locked.returncode == 0, locked.stderr
    wheels = {p.platform: sorted(q.name for q in p.pip) for p in read_lock(recipe.parent / "markers.lock").platforms}
    assert wheels == {
        "linux-64": ["app", "linuxonly", "newpy"],
        "win-64": ["app", "newpy", "winonly"],
        "osx-arm64": ["app", "armonly", "newpy"],
    }


def test_each_platforms_pip_resolves_at_once_and_stopping_the_lock_stops_every_pip(tmp_path: Path) -> None:
    """pip resolved one platform after another: three times the wait on an index far away. Now
    the three run at once, in threads, where neither Ctrl-C nor a SIGTERM sent to envkit alone
    arrives: stopping the lock must stop every pip it started, and leave no lock behind."""
    recipe, links = markers_recipe(tmp_path)
    mark = new_mark()
    with simple_index(tmp_path / "index", sorted(links.glob("*.whl")), stall=120) as url:
        env = {**index_pip_env(dict(os.environ), url), MARK: mark}
        proc = subprocess.Popen(
            [sys.executable, "-m", "envkit", "lock", str(recipe)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            deadline = time.monotonic() + 120
            while len(marked(mark)) < 4 and proc.poll() is None and time.monotonic() < deadline:  # envkit and three pips
                time.sleep(0.1)
            waiting = len(marked(mark))
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert waiting == 4, f"{waiting} processes: envkit and a pip per platform, all waiting on the index"
    assert proc.returncode == 130 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert none_left(mark)
    assert not (recipe.parent / "markers.lock").exists()


def test_a_platform_whose_pip_list_cannot_resolve_is_named_and_no_lock_is_written(tmp_path: Path) -> None:
    """With the platforms' pips running at once, the one that fails is still the one named (the
    others, linux's and the mac's, succeed), in one line, and nothing is written."""
    recipe, links = markers_recipe(tmp_path)
    next(links.glob("winonly-*.whl")).unlink()
    mark = new_mark()
    failed = run_envkit("lock", str(recipe), env={**offline_pip_env(dict(os.environ), links), MARK: mark})
    assert failed.returncode == 3 and len(failed.stderr.strip().splitlines()) == 1, failed.stderr
    assert "pip could not resolve app for win-64, Python 3.12" in failed.stderr and "winonly" in failed.stderr
    assert none_left(mark) and not (recipe.parent / "markers.lock").exists()


def test_a_lock_in_a_newer_format_is_neither_read_nor_written_over(tmp_path: Path) -> None:
    """A teammate's newer envkit (or pixi) wrote the lock in a format this rattler does not read:
    the create said "re-lock it", and `envkit lock` solved afresh and wrote the older format over
    the team's lock."""
    recipe = team_recipe(tmp_path / "recipes", two_platform_channel(tmp_path))
    assert run_envkit("lock", str(recipe)).returncode == 0
    lock_path = recipe.with_suffix(".lock")
    newer = lock_path.read_text().replace("version: 7\n", "version: 99\n", 1)
    lock_path.write_text(newer)
    created = run_envkit("create", str(recipe), "--locked", "--yes", "--no-probe")
    assert created.returncode == 2 and "upgrade envkit" in created.stderr and "re-lock" not in created.stderr, created.stderr
    relocked = run_envkit("lock", str(recipe))
    assert relocked.returncode == 2 and "upgrade envkit" in relocked.stderr, relocked.stderr
    assert lock_path.read_text() == newer


def test_a_lock_for_newer_gpus_says_so_where_it_is_installed(tmp_path: Path) -> None:
    """The lock takes the recipe's cuda_arch (9.0: H100/H200); a locked create on a node whose GPUs
    are 8.0 (A100; rattler's overrides stand in for its driver and devices) says the lock's builds
    were picked for newer GPUs, and the audit of the plan names the package (EK038)."""
    from tests.support.tiny import cuda_arch_channel, cuda_recipe

    recipe = cuda_recipe(tmp_path, cuda_arch_channel(tmp_path), "9.0")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDA_OVERRIDE_CUDA")}
    assert run_envkit("lock", str(recipe), env=env).returncode == 0
    a100 = {**env, "CONDA_OVERRIDE_CUDA": "12.9", "CONDA_OVERRIDE_CUDA_ARCH": "8.0"}
    proc = run_envkit("create", str(recipe), "-p", str(tmp_path / "env"), "--locked", "--dry-run", "--json", env=a100)
    data = json.loads(proc.stdout)["data"]
    assert "the lock assumes __cuda_arch=9.0; this machine has __cuda_arch=8.0: builds picked for its GPUs" in " ".join(
        data["plan"]["assumed"]
    )
    assert {p["name"]: p["build"] for p in data["plan"]["packages"]}["pytorch"] == "cuda129_mkl_sm90_100"
    assert [f["rule_id"] for f in data["findings"] if f["severity"] == "error"] == ["EK038"]
