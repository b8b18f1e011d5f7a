"""`envkit sync` on real envs: the difference shown first, applied in place over the installed
packages, rolled back on failure, Ctrl-C or (by the next command that changes the env) kill -9."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from envkit.install import inplace
from envkit.prefix.record import record_path, sync_journal_path
from envkit.team.sync import in_sync
from tests.conftest import payload_recipe, run_envkit, write_recipe
from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_conda, write_tar_bz2
from tests.support.fullfs import run_in_small_fs
from tests.support.pipchannel import (
    HOST_ONLY,
    Commit,
    git_project,
    homemade_wheel,
    module_rev,
    offline_pip_env,
    pip_channel,
    two_pythons_pip_channel,
)
from tests.support.procs import MARK, new_mark, none_left
from tests.support.records import record_json
from tests.support.terminal import converse
from tests.support.tiny import python_builds_channel, tiny_channel, tiny_recipe


def snapshot(prefix: Path) -> dict[str, bytes]:
    """Every file of the env with its bytes (symlinks by target): what 'as it was' means."""
    out: dict[str, bytes] = {}
    for path in sorted(prefix.rglob("*")):
        rel = str(path.relative_to(prefix))
        if path.is_symlink():
            out[rel] = b"-> " + os.readlink(path).encode()
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out


def tiny_env(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(channel, recipe, prefix) of a created tiny env; the channel also has extra 1.0 and 2.0."""
    channel = tiny_channel(tmp_path, extra=(PkgMeta("extra", "1.0", "0"), PkgMeta("extra", "2.0", "0")))
    recipe = tiny_recipe(tmp_path, channel)
    assert run_envkit("create", str(recipe), "--yes", "--no-probe").returncode == 0
    return channel, recipe, tmp_path / "envs" / "tiny"


def edit(recipe: Path, old: str, new: str) -> None:
    text = recipe.read_text()
    assert old in text
    recipe.write_text(text.replace(old, new))


def test_a_changed_recipe_moves_only_what_it_must(tmp_path: Path) -> None:
    """A package added to the recipe is not a request for the channel's newest of everything
    else: what envkit installed stays (as conda install keeps what is installed) unless the recipe
    needs it moved, and conda's own changes since are still undone."""
    channel, recipe, prefix = tiny_env(tmp_path)
    write_tar_bz2(channel, PkgMeta("helper", "2.0", "0"), [PkgFile("share/helper/data.txt", b"helper 2\n")])
    write_tar_bz2(channel, PkgMeta("tool", "2.0", "0", depends=["helper >=2"]), [PkgFile("share/tool/version.txt", b"v2\n")])
    index_channel(channel)
    edit(recipe, "packages: [tool]", "packages: [tool, extra]")
    synced = run_envkit("sync", "-n", "tiny", "--yes", "--no-probe", "--json")
    assert synced.returncode == 0, synced.stderr
    assert json.loads(synced.stdout)["data"]["packages"] == [{"name": "extra", "kind": "added", "old": None, "new": "2.0 0"}]
    assert (prefix / "share" / "tool" / "version.txt").read_text() == "v1\n"

    def would_move(*flags: str) -> set[tuple[str, str]]:
        dry = run_envkit("sync", "-n", "tiny", "--dry-run", "--json", *flags)
        assert dry.returncode == 0, dry.stderr
        return {(c["name"], c["new"]) for c in json.loads(dry.stdout)["data"]["packages"]}

    # to move on purpose, by name or all of it; the recipe unchanged
    assert would_move() == set()
    assert would_move("--update", "helper") == {("helper", "2.0 0")}
    assert would_move("--update-all") == {("tool", "2.0 0"), ("helper", "2.0 0")}
    typo = run_envkit("sync", "-n", "tiny", "--update", "hleper")
    assert typo.returncode == 2 and "--update hleper: envkit installed no package of that name" in typo.stderr
    locked = run_envkit("sync", "-n", "tiny", "--update", "helper", "--locked")
    assert locked.returncode == 2 and "envkit lock --update NAME" in locked.stderr
    # the recipe asks for a newer tool: tool moves, and helper with it, as it must
    edit(recipe, "packages: [tool, extra]", "packages: [tool >=2, extra]")
    moved = run_envkit("sync", "-n", "tiny", "--yes", "--no-probe", "--json")
    assert moved.returncode == 0, moved.stderr
    assert {(c["name"], c["new"]) for c in json.loads(moved.stdout)["data"]["packages"]} == {("tool", "2.0 0"), ("helper", "2.0 0")}


def test_a_new_python_keeps_the_versions_of_what_it_rebuilds(tmp_path: Path) -> None:
    """A sync to a recipe that moves python took numpyish to its newest version along with the new
    build it needed; `conda install python=3.12` keeps the version, and so does sync now."""
    channel = python_builds_channel(tmp_path)
    recipe = tmp_path / "recipes" / "py.yaml"
    recipe.parent.mkdir(parents=True)
    recipe.write_text(f"envkit: 1\nname: py\nchannels: [{channel.as_uri()}]\npackages: [python 3.11.*, numpyish 1.0]\n")
    assert run_envkit("create", str(recipe), "--yes", "--no-probe").returncode == 0
    edit(recipe, "python 3.11.*, numpyish 1.0", "python 3.12.*, numpyish")
    synced = run_envkit("sync", "-n", "py", "--yes", "--no-probe", "--json")
    assert synced.returncode == 0, synced.stderr
    assert {(c["name"], c["old"], c["new"]) for c in json.loads(synced.stdout)["data"]["packages"]} == {
        ("python", "3.11.0 0", "3.12.0 0"),
        ("numpyish", "1.0 py311_0", "1.0 py312_0"),
    }
    assert (tmp_path / "envs" / "py" / "share" / "numpyish.txt").read_text() == "1.0 py312"


def test_nothing_to_do_answers_at_once(tmp_path: Path) -> None:
    _, _, prefix = tiny_env(tmp_path)
    assert in_sync(prefix)
    before = snapshot(prefix)
    proc = run_envkit("sync", "-n", "tiny", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)["data"]
    assert data["noop"] is True and data["packages"] == [] and data["variables"] == []
    assert snapshot(prefix) == before


def test_sync_writes_anew_the_scripts_an_older_envkit_wrote(tmp_path: Path) -> None:
    """An env made before the fish scripts ended with `true` (status 4 after activation): its
    record has no scripts format. sync rewrites them (same settings), says so, and is quick after."""
    from envkit.activation.shells import FISH_ZERO_STATUS
    from envkit.activation.writer import text_sha256

    _, _, prefix = tiny_env(tmp_path)
    rel = "etc/conda/activate.d/envkit-tiny.fish"
    current = (prefix / rel).read_text()
    older = current.removesuffix("".join(f"{line}\n" for line in FISH_ZERO_STATUS))
    assert older != current
    (prefix / rel).write_text(older)
    record_file = prefix / "etc" / "envkit" / "record.json"
    record = json.loads(record_file.read_text())
    record["activation"].pop("format")  # as an older envkit wrote it
    record["activation"]["sha256"][rel] = text_sha256(older)
    record_file.write_text(json.dumps(record))
    assert in_sync(prefix) is False

    proc = run_envkit("sync", "-n", "tiny", "--yes", "--no-probe")
    assert proc.returncode == 0, proc.stderr
    assert f"wrote 1 activation file(s) anew from its recorded settings (they were not as this envkit writes them): {rel}" in proc.stdout, (
        proc.stdout
    )
    assert (prefix / rel).read_text() == current
    assert in_sync(prefix) and "nothing to do" in run_envkit("sync", "-n", "tiny").stdout


def test_add_change_remove_and_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, recipe, prefix = tiny_env(tmp_path)
    edit(recipe, "packages: [tool]", "packages: [tool, extra 1.0]")
    edit(recipe, "omp_num_threads: 2", "omp_num_threads: 1")
    before = snapshot(prefix)
    dry = run_envkit("sync", "-n", "tiny", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    data = json.loads(dry.stdout)["data"]
    assert data["packages"] == [{"name": "extra", "kind": "added", "old": None, "new": "1.0 0"}]
    assert data["variables"] == [{"name": "OMP_NUM_THREADS", "old": "= '2'", "new": "= '1'"}]
    assert snapshot(prefix) == before, "a dry run changed the env"

    mark = new_mark()
    monkeypatch.setenv(MARK, mark)
    meanwhile: list[subprocess.CompletedProcess[str]] = []
    declined, screen = converse(
        [sys.executable, "-m", "envkit", "sync", "-n", "tiny"],
        b"n",
        question=b"Apply these changes? [y/N]",
        while_asked=lambda: meanwhile.append(run_envkit("sync", "-n", "tiny", "--yes", "--no-probe")),
    )
    assert declined == 0 and "+ extra 1.0 0" in screen and "aborted: nothing was changed" in screen
    # the env's lock is held from the look to the change: what was shown is what would be applied
    assert meanwhile[0].returncode != 0 and "is locked by another envkit process" in meanwhile[0].stderr
    assert snapshot(prefix) == before
    assert none_left(mark), "the installer child started ahead outlived a declined sync"
    assert not list(sync_journal_path(prefix).parent.glob("sync-journal*")), "a declined sync left its journal's draft"
    monkeypatch.delenv(MARK)

    added = run_envkit("sync", "-n", "tiny", "--yes", "--no-probe")
    assert added.returncode == 0, added.stderr
    assert "+ extra 1.0 0" in added.stdout and "OMP_NUM_THREADS" in added.stdout
    assert (prefix / "conda-meta" / "extra-1.0-0.json").is_file()
    assert "OMP_NUM_THREADS='1'" in (prefix / "etc" / "conda" / "activate.d" / "envkit-tiny.sh").read_text()
    history = (prefix / "conda-meta" / "history").read_text()
    assert "+file://" in history and "extra-1.0-0" in history and "# update specs: " in history
    assert in_sync(prefix)

    edit(recipe, "extra 1.0", "extra 2.0")
    changed = run_envkit("sync", "-n", "tiny", "--yes", "--no-probe", "--json")
    assert changed.returncode == 0, changed.stderr
    assert json.loads(changed.stdout)["data"]["packages"] == [{"name": "extra", "kind": "changed", "old": "1.0 0", "new": "2.0 0"}]
    assert sorted(p.name for p in (prefix / "conda-meta").glob("extra-*.json")) == ["extra-2.0-0.json"]

    edit(recipe, "packages: [tool, extra 2.0]", "packages: [tool]")
    removed = run_envkit("sync", "-n", "tiny", "--yes", "--no-probe")
    assert removed.returncode == 0, removed.stderr
    assert "- extra 2.0 0" in removed.stdout
    assert not list((prefix / "conda-meta").glob("extra-*.json")) and not (prefix / "share" / "extra").exists()
    record = record_json(prefix)
    assert record is not None and sorted(p["name"] for p in record["packages"]) == ["helper", "tool"]

    # the recipe's warnings show above a change, as create shows them above a plan
    edit(recipe, "omp_num_threads: 1}", "omp_num_threads: 1, env: {DATA: '~/data'}}")
    warned = run_envkit("sync", "-n", "tiny", "--dry-run")
    assert "warning RC016: threading.env DATA: '~/data'" in warned.stdout, warned.stdout
    assert json.loads(run_envkit("sync", "-n", "tiny", "--dry-run", "--json").stdout)["data"]["warnings"][0].startswith("RC016: ")


def test_sync_to_the_lock(tmp_path: Path) -> None:
    channel, recipe, prefix = tiny_env(tmp_path)
    edit(recipe, "packages: [tool]", "packages: [tool, extra]")
    assert run_envkit("lock", str(recipe)).returncode == 0
    write_tar_bz2(channel, PkgMeta("extra", "3.0", "0"), [PkgFile("share/extra/data.txt", b"3\n")])
    index_channel(channel)
    locked = run_envkit("sync", "-n", "tiny", "--locked", "--yes", "--no-probe")
    assert locked.returncode == 0, locked.stderr
    assert (prefix / "conda-meta" / "extra-2.0-0.json").is_file()  # the lock's, not the channel's newest
    record = record_json(prefix)
    assert record is not None and record["lock"]["path"] == str(recipe.parent / "tiny.lock")
    again = run_envkit("sync", "-n", "tiny", "--locked")
    assert again.returncode == 0 and "nothing to do" in again.stdout
    # sync brings the env to its recipe; an unchanged recipe is not a request for newer builds
    unlocked = run_envkit("sync", "-n", "tiny", "--yes", "--no-probe")
    assert unlocked.returncode == 0 and "nothing to do" in unlocked.stdout
    assert (prefix / "conda-meta" / "extra-2.0-0.json").is_file()
    # an edit that changes nothing resolved keeps the lock fresh; one that does makes it stale, and a
    # locked sync refuses it as a locked create does, however quick an unchanged env would answer
    recipe.write_text(recipe.read_text() + "# a comment\n")
    assert "nothing to do" in run_envkit("sync", "-n", "tiny", "--locked").stdout
    edit(recipe, "omp_num_threads: 2", "omp_num_threads: 1")
    stale = run_envkit("sync", "-n", "tiny", "--locked", "--yes", "--no-probe")
    assert stale.returncode == 2 and "tiny.lock is stale" in stale.stderr, stale.stdout + stale.stderr
    assert f"(re-lock: 'envkit lock {recipe}';" in stale.stderr  # the lock is where lock puts it: no -o to say so
    frozen = run_envkit("sync", "-n", "tiny", "--frozen", "--yes", "--no-probe")
    assert frozen.returncode == 0 and "nothing to do" in frozen.stdout, frozen.stderr
    assert "tiny (from a stale lock)" in run_envkit("list").stdout
    # without --locked a sync solves the recipe: an env made from a lock says so before it changes.
    # After that --frozen sync (a stale lock taken as it is) the recipe's files were recorded as
    # synced, and a plain sync answered "nothing to do" with the lock's OMP_NUM_THREADS in place.
    lock = recipe.parent / "tiny.lock"
    solved = run_envkit("sync", "-n", "tiny", "--dry-run")
    assert solved.returncode == 0 and solved.stdout.splitlines()[:2] == [
        f"sync {prefix} to its recipe:",
        f"  made from the lock {lock}: this syncs it to the recipe instead; --locked installs the lock",
    ], solved.stdout
    assert json.loads(run_envkit("sync", "-n", "tiny", "--dry-run", "--json").stdout)["data"]["lock_set_aside"] == str(lock)
    assert run_envkit("sync", "-n", "tiny", "--yes", "--no-probe").returncode == 0
    assert record_json(prefix)["lock"] is None
    edit(recipe, "omp_num_threads: 1", "omp_num_threads: 2")
    assert "made from the lock" not in run_envkit("sync", "-n", "tiny", "--dry-run").stdout  # no longer so


def unextractable(channel: Path, meta: PkgMeta) -> None:
    """A .conda whose metadata is sound (it indexes, its hash matches the index) but whose payload is
    not zstd: the install fails half-way, after other packages were linked."""
    good = write_conda(channel, meta, [PkgFile(f"share/{meta.name}/data.txt", b"x\n")])
    with zipfile.ZipFile(good) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    with zipfile.ZipFile(good, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(name, b"not zstd at all" * 64 if name.startswith("pkg-") else data)
    index_channel(channel)


def test_a_sync_stopped_before_its_change_leaves_no_journal_and_no_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the difference is shown (the child has read the env by then: the difference
    comes from its read): the child is killed, no journal is begun, and the env is as it was."""
    from envkit.commands.sync import sync

    _, recipe, prefix = tiny_env(tmp_path)
    edit(recipe, "packages: [tool]", "packages: [tool, extra 1.0]")
    before = snapshot(prefix)
    mark = new_mark()
    monkeypatch.setenv(MARK, mark)

    def interrupt(changes: object) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sync(prefix, probe=False, show=interrupt)
    assert not list(sync_journal_path(prefix).parent.glob("sync-journal*"))
    assert none_left(mark), "the installer child outlived the interrupted sync"
    assert snapshot(prefix) == before


def test_a_failed_sync_leaves_the_env_as_it_was(tmp_path: Path) -> None:
    channel, recipe, prefix = tiny_env(tmp_path)
    unextractable(channel, PkgMeta("broken", "1.0", "0"))
    edit(recipe, "packages: [tool]", "packages: [tool, extra 1.0, broken]")
    edit(recipe, "omp_num_threads: 2", "omp_num_threads: 1")
    before = snapshot(prefix)
    proc = run_envkit("sync", "-n", "tiny", "--yes", "--no-probe")
    assert proc.returncode == 4, proc.stderr
    assert "Traceback" not in proc.stderr and "was rolled back to what it was" in proc.stderr
    assert snapshot(prefix) == before
    assert not sync_journal_path(prefix).exists() and in_sync(prefix) is False  # the recipe still differs


def test_a_link_the_filesystem_refuses_is_told_with_its_os_error(tmp_path: Path) -> None:
    """rattler's first line names the package ("failed to link extra-1.0-0.tar.bz2"), its last
    'Caused by:' line the OS error; the one line carries both (a full disk read as the package name
    alone). Here a file sits where the package needs a folder."""
    _, recipe, prefix = tiny_env(tmp_path)
    (prefix / "share" / "extra").write_text("a file where extra's folder goes\n")
    edit(recipe, "packages: [tool]", "packages: [tool, extra 1.0]")
    before = snapshot(prefix)
    proc = run_envkit("sync", "-n", "tiny", "--yes", "--no-probe")
    assert proc.returncode == 4 and "Traceback" not in proc.stderr, proc.stderr
    line = next(line for line in proc.stderr.splitlines() if line.startswith("envkit: error: "))
    assert "failed to link extra-1.0-0" in line and "(os error " in line and "was rolled back to what it was" in line, line
    assert snapshot(prefix) == before


def in_small_fs(mount: Path, recipe: Path, old: str, new: str) -> str:
    """The start of a script run_in_small_fs runs: `envkit(...)` and `snapshot()` (every file's
    digest, every folder) defined, the env made in the mount (`made`), then the recipe edited (`old`
    to `new`) and the env's `before` taken."""
    return f"""
import hashlib, json, os, subprocess, sys
from pathlib import Path
prefix, recipe = Path({str(mount)!r}) / "env", Path({str(recipe)!r})
def envkit(*args):
    return subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True)
def snapshot():
    return {{str(p.relative_to(prefix)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(prefix.rglob("*"))}}
made = envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe")
recipe.write_text(recipe.read_text().replace({old!r}, {new!r}))
before = snapshot()
"""


def test_a_sync_on_a_full_disk_says_so_and_changes_nothing(tmp_path: Path) -> None:
    """The journal is the first thing a sync writes: on a full disk it fails there, in one line
    (exit 74, what and where), with the env as it was and no draft left; it was a traceback."""
    channel = tiny_channel(tmp_path, extra=(PkgMeta("extra", "1.0", "0"),))
    recipe = tiny_recipe(tmp_path, channel)
    mount = tmp_path / "small"
    script = (
        in_small_fs(mount, recipe, "packages: [tool]", "packages: [tool, extra]")
        + f"""
fill({str(mount)!r})
synced = envkit("sync", "-p", str(prefix), "--yes", "--no-probe")
print(json.dumps({{"made": made.returncode, "code": synced.returncode, "stderr": synced.stderr, "same": snapshot() == before,
                  "left": sorted(p.name for p in (prefix / "etc" / "envkit").iterdir())}}))
"""
    )
    seen = run_in_small_fs(mount, 1024, script, dict(os.environ))
    assert seen["made"] == 0
    assert seen["code"] == 74 and "Traceback" not in seen["stderr"], seen["stderr"]
    assert f"envkit: error: no space left on the device: cannot write {mount}/env/etc/envkit/sync-journal.tmp-" in seen["stderr"]
    assert f"{mount}/env was not changed" in seen["stderr"] and "(free space there (df -h)" in seen["stderr"]
    assert seen["same"] and seen["left"] == ["record.json"]


def test_a_corrupt_download_is_caught_before_anything_changes(tmp_path: Path) -> None:
    channel, recipe, prefix = tiny_env(tmp_path)
    archive = channel / "linux-64" / "extra-1.0-0.tar.bz2"
    archive.write_bytes(archive.read_bytes()[:-20] + b"\0" * 20)
    edit(recipe, "packages: [tool]", "packages: [tool, extra 1.0]")
    before = snapshot(prefix)
    proc = run_envkit("sync", "-n", "tiny", "--yes", "--no-probe")
    assert proc.returncode == 4 and "does not match its channel index" in proc.stderr and "was not changed" in proc.stderr
    assert snapshot(prefix) == before


def test_a_journal_half_made_by_a_killed_sync_is_dropped_by_the_next_run(tmp_path: Path) -> None:
    """Killed while its journal was being copied: the journal never existed, so nothing had
    changed; the next run deletes the copy and rolls nothing back."""
    _, _, prefix = tiny_env(tmp_path)
    before = snapshot(prefix)
    journal = sync_journal_path(prefix)
    partial = journal.with_name(journal.name + ".tmp-4242")
    (partial / "conda-meta").mkdir(parents=True)
    (partial / "conda-meta" / "tool-1.0-0.json").write_text("{")
    proc = run_envkit("sync", "-n", "tiny", "--json")
    assert proc.returncode == 0, proc.stderr
    assert not partial.exists() and not journal.exists()
    assert snapshot(prefix) == before
    messages = json.loads(proc.stdout)["messages"]
    assert not any("rolled" in m for m in messages) and f"removed {partial} left by an interrupted envkit" in messages


def test_an_unreadable_package_record_is_refused_before_anything_changes(tmp_path: Path) -> None:
    """Neither envkit nor rattler could tell what that record installed: no difference to show."""
    _, recipe, prefix = tiny_env(tmp_path)
    (prefix / "conda-meta" / "broken-1.0-0.json").write_text("{")
    edit(recipe, "packages: [tool]", "packages: [tool, extra 1.0]")
    before = snapshot(prefix)
    proc = run_envkit("sync", "-n", "tiny", "--yes", "--no-probe")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "conda-meta/broken-1.0-0.json is not a readable package record" in proc.stderr and "EK022" in proc.stderr
    assert snapshot(prefix) == before


def test_a_package_record_rewritten_under_its_name_is_no_longer_taken_as_installed(tmp_path: Path) -> None:
    """The quick answer went by conda-meta's file names: a record damaged in place (same name) was
    "in sync: nothing to do" while audit, list and conda itself saw the env broken."""
    _, _, prefix = tiny_env(tmp_path)
    helper = next((prefix / "conda-meta").glob("helper-*.json"))
    kept = helper.read_bytes()
    status = helper.stat()
    helper.write_text("[1]")
    damaged = run_envkit("sync", "-n", "tiny", "--yes", "--no-probe")
    assert damaged.returncode == 2 and f"conda-meta/{helper.name} is not a readable package record" in damaged.stderr, damaged.stdout
    helper.write_bytes(kept)
    os.utime(helper, ns=(status.st_atime_ns, status.st_mtime_ns))  # as it was: the quick answer again
    assert in_sync(prefix)
    os.utime(helper)  # the same bytes, written again: the full look finds nothing, and keeps the new stamp
    assert not in_sync(prefix)
    full = run_envkit("sync", "-n", "tiny", "--yes", "--no-probe")
    assert full.returncode == 0 and "already matches its recipe" in full.stdout, full.stdout + full.stderr
    assert in_sync(prefix)
    # the records the installer child copied for a journal the sync did not need are gone
    assert not list(sync_journal_path(prefix).parent.glob("sync-journal*"))
    record = json.loads(record_path(prefix).read_text())  # a record an envkit before the stamps wrote: names alone
    del record["conda_meta"]
    record_path(prefix).write_text(json.dumps(record))
    os.utime(helper)
    assert in_sync(prefix)


def test_a_recipe_given_by_a_relative_path_is_synced_from_any_directory(tmp_path: Path) -> None:
    """`envkit create recipes/tiny.yaml` in a repo, `envkit sync -n tiny` anywhere else: the record
    kept "recipes/tiny.yaml", so list said the file was gone and sync refused."""
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path, extra=(PkgMeta("extra", "1.0", "0"),)))
    made = run_envkit("create", "recipes/tiny.yaml", "--locked", "--yes", "--no-probe", cwd=tmp_path)
    assert made.returncode == 2 and "envkit lock recipes/tiny.yaml" in made.stderr  # said as it was given
    assert run_envkit("lock", "recipes/tiny.yaml", cwd=tmp_path).returncode == 0
    assert run_envkit("create", "recipes/tiny.yaml", "--locked", "--yes", "--no-probe", cwd=tmp_path).returncode == 0
    prefix = tmp_path / "envs" / "tiny"
    record = record_json(prefix)
    assert record is not None and record["recipe"]["path"] == str(recipe) and record["lock"]["path"] == str(recipe.with_suffix(".lock"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listed = json.loads(run_envkit("list", "--json", cwd=elsewhere).stdout)["data"]
    assert [e["recipe_files"] for e in listed if e["prefix"] == str(prefix)] == ["unchanged"]
    assert "nothing to do" in run_envkit("sync", "-n", "tiny", "--locked", "--no-probe", cwd=elsewhere).stdout
    edit(recipe, "packages: [tool]", "packages: [tool, extra]")
    synced = run_envkit("sync", "-n", "tiny", "--yes", "--no-probe", cwd=elsewhere)
    assert synced.returncode == 0 and "+ extra 1.0" in synced.stdout, synced.stdout + synced.stderr


def test_sync_an_env_envkit_did_not_make_is_refused(tmp_path: Path) -> None:
    prefix = tmp_path / "plain"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "history").write_text("")
    proc = run_envkit("sync", "-p", str(prefix), "--yes")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def heavy_sync(tmp_path: Path, wheel_channel: Path) -> tuple[Path, Path, subprocess.Popen[str]]:
    """A tiny env whose recipe now asks for torch: the sync that follows extracts a GB from a cold cache."""
    _, recipe, prefix = tiny_env(tmp_path)
    heavy = payload_recipe(tmp_path / "heavy", wheel_channel, name="tiny")
    recipe.write_text(heavy.read_text())
    env = dict(os.environ, ENVKIT_PKGS_DIR=str(tmp_path / "cold-cache"))
    cmd = [sys.executable, "-m", "envkit", "sync", "-p", str(prefix), "--yes", "--no-probe"]
    return recipe, prefix, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def wait_for_install(proc: subprocess.Popen[str], prefix: Path, cache: Path, delay: float = 1.0) -> None:
    """Until the journal exists and rattler is extracting into the cache."""
    deadline = time.monotonic() + 180
    while not (sync_journal_path(prefix).is_dir() and any(cache.glob("pytorch-*"))):
        assert proc.poll() is None, f"sync ended before it could be interrupted: {proc.stderr.read() if proc.stderr else ''}"
        assert time.monotonic() < deadline, "sync never reached the install"
        time.sleep(0.02)
    time.sleep(delay)
    assert proc.poll() is None, "sync finished before it could be interrupted"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_sync_rolls_back(wheel_channel: Path, tmp_path: Path, sig: signal.Signals) -> None:
    _, prefix, proc = heavy_sync(tmp_path, wheel_channel)
    before = snapshot(prefix)
    wait_for_install(proc, prefix, tmp_path / "cold-cache")
    proc.send_signal(sig)
    code = proc.wait(timeout=300)
    stderr = proc.stderr.read() if proc.stderr else ""
    assert code == 130, stderr  # SIGTERM ends envkit as Ctrl-C does (README: exit codes)
    assert "Traceback" not in stderr and "rolled back" in stderr
    assert snapshot(prefix) == before
    assert not sync_journal_path(prefix).exists()


@pytest.mark.parametrize("delay", [0.0, 1.0, 2.5])
def test_killed_sync_is_rolled_back_by_the_next_run(wheel_channel: Path, tmp_path: Path, delay: float) -> None:
    """kill -9 at several points of the install (the installer child dies with envkit); the next
    envkit run that touches the env puts it back, half-linked files included."""
    recipe, prefix, proc = heavy_sync(tmp_path, wheel_channel)
    before = snapshot(prefix)
    wait_for_install(proc, prefix, tmp_path / "cold-cache", delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert sync_journal_path(prefix).is_dir()
    # the job's records, in the scratch dir the killed envkit could not remove (envkit.core.fsutil.scratch_dir)
    scratch = list(Path(tempfile.gettempdir()).glob(f"{inplace.SCRATCH_PREFIX}{proc.pid}-*"))
    assert [p.name for p in scratch[0].iterdir()] == ["records.lock"]
    recipe.write_text(recipe.read_text().replace("pytorch 2.13.0, numpy, mkl-service, threadpoolctl", "numpy"))
    env = dict(os.environ, ENVKIT_PKGS_DIR=str(tmp_path / "cold-cache"))
    killed = snapshot(prefix)
    dry = run_envkit("sync", "-p", str(prefix), "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert f"an interrupted sync is pending on {prefix}; `envkit sync -p {prefix}` finishes undoing it; nothing was changed" in dry.stdout
    assert snapshot(prefix) == killed and sync_journal_path(prefix).is_dir()  # a dry run reads, and writes nothing
    undone = run_envkit("audit", "--fix", "--yes", "-p", str(prefix), env=env)
    assert f"rolled {prefix} back to what it was before an interrupted sync" in undone.stdout, undone.stderr
    after = snapshot(prefix)
    assert after == before
    assert not scratch[0].exists(), "the rollback's own change swept the dead envkit's scratch dir"


def test_killed_sync_from_a_warm_cache_is_rolled_back_from_its_folder_listing(
    wheel_channel: Path, tmp_path: Path, seed_env: Path, session_pkgs: Path
) -> None:
    """Every package the sync links is extracted in the cache already, so its journal lists only the
    folders the change can add entries to (envkit.install.linkscope), not the env's every path. Killed while
    torch is being linked, the next run still puts the env back byte for byte."""
    _, recipe, prefix = tiny_env(tmp_path)
    heavy = payload_recipe(tmp_path / "heavy", wheel_channel, name="tiny")
    recipe.write_text(heavy.read_text())
    before = snapshot(prefix)
    env = dict(os.environ, ENVKIT_PKGS_DIR=str(session_pkgs))  # torch extracted there by seed_env
    cmd = [sys.executable, "-m", "envkit", "sync", "-p", str(prefix), "--yes", "--no-probe"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 180
    while not (prefix / "lib" / "python3.11" / "site-packages" / "torch").is_dir():
        assert proc.poll() is None, f"sync ended before it could be killed: {proc.stderr.read() if proc.stderr else ''}"
        assert time.monotonic() < deadline, "sync never began linking torch"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    journal = sync_journal_path(prefix)
    assert (journal / "folders.json").is_file() and not (journal / "paths").exists()
    folders = json.loads((journal / "folders.json").read_text())["folders"]
    assert "lib" not in folders[""] and "conda-meta" in folders and len(folders) < 20  # a few folders, not the env's every path
    undone = run_envkit("audit", "--fix", "--yes", "-p", str(prefix), env=env)
    assert f"rolled {prefix} back to what it was before an interrupted sync" in undone.stdout, undone.stderr
    assert snapshot(prefix) == before


def test_a_team_recipe_keeps_its_source_and_moves_to_the_new_commit(tmp_path: Path) -> None:
    """A recipe from a team repo (real git, file:// remote), synced after 'recipes update': the
    record still names the repo, at the commit the sync used, as 'envkit list' shows it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()

    channel = tiny_channel(tmp_path, extra=(PkgMeta("extra", "1.0", "0"),))
    repo = tmp_path / "team"
    repo.mkdir()
    git("init", "-q", "-b", "main")
    (repo / "base.yaml").write_text(f"envkit: 1\nname: base\nchannels: [{channel.as_uri()}]\npackages: [tool]\n")
    (repo / "train.yaml").write_text("envkit: 1\nname: train\nextends: [base]\nthreading: {omp_num_threads: 2}\n")
    git("add", "-A")
    git("-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-q", "-m", "v1")
    assert run_envkit("recipes", "add-source", repo.as_uri(), "--name", "team").returncode == 0
    assert run_envkit("create", "train", "--yes", "--no-probe").returncode == 0
    prefix = tmp_path / "envs" / "train"
    record = record_json(prefix)
    assert record is not None and (record["recipe"]["source"], record["recipe"]["commit"]) == ("team", git("rev-parse", "HEAD"))

    (repo / "base.yaml").write_text(f"envkit: 1\nname: base\nchannels: [{channel.as_uri()}]\npackages: [tool, extra]\n")
    git("-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-q", "-am", "v2: extra")
    assert run_envkit("recipes", "update").returncode == 0
    synced = run_envkit("sync", "-n", "train", "--yes", "--no-probe")
    assert synced.returncode == 0 and "+ extra 1.0 0" in synced.stdout, synced.stderr
    record = record_json(prefix)
    assert record is not None and (record["recipe"]["source"], record["recipe"]["commit"]) == ("team", git("rev-parse", "HEAD"))
    listed = {e["prefix"]: e for e in json.loads(run_envkit("list", "--json").stdout)["data"]}
    assert listed[str(prefix)]["commit"] == git("rev-parse", "HEAD")

    # the lock is the repo's too: made in a clone, committed, brought by 'recipes update'
    assert run_envkit("lock", str(repo / "train.yaml")).returncode == 0
    git("add", "train.lock")
    git("-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-q", "-m", "lock")
    assert run_envkit("recipes", "update").returncode == 0
    assert "nothing to do" in run_envkit("sync", "-n", "train", "--locked", "--yes", "--no-probe").stdout
    (repo / "train.yaml").write_text("envkit: 1\nname: train\nextends: [base]\nthreading: {omp_num_threads: 1}\n")
    git("-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-q", "-am", "v3")
    assert run_envkit("recipes", "update").returncode == 0
    stale = run_envkit("sync", "-n", "train", "--locked", "--yes", "--no-probe")
    assert stale.returncode == 2, stale.stderr
    assert "'envkit lock train.yaml' in a clone of the 'team' repo, commit it, then 'envkit recipes update'" in stale.stderr

    # renamed upstream: the env's recipe is gone, and sync says so and what to do, in one line
    git("mv", "train.yaml", "trainer.yaml")
    (repo / "trainer.yaml").write_text("envkit: 1\nname: trainer\nextends: [base]\nthreading: {omp_num_threads: 1}\n")
    git("-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-q", "-am", "v4: renamed")
    assert run_envkit("recipes", "update").returncode == 0
    gone = run_envkit("sync", "-n", "train", "--yes", "--no-probe")
    assert gone.returncode == 2 and gone.stderr.count("\n") == 1, gone.stderr
    assert (
        "train.yaml, which is gone from the 'team' recipe repo" in gone.stderr and f"envkit create NEW -p {prefix} --force" in gone.stderr
    )


def test_a_synced_env_is_probed_and_its_record_says_how_it_went(tmp_path: Path, wheel_channel: Path, session_pkgs: Path) -> None:
    """The probe runs in the synced env (its new activation included) once the env's lock is
    released, and its verdict lands in the record, as after create."""
    from envkit.core.fsutil import LockBusy, exclusive_lock
    from envkit.install.transaction import lock_for

    recipe = payload_recipe(tmp_path / "r", wheel_channel, name="probed", threading="threading: {omp_num_threads: 2}")
    env = dict(os.environ, ENVKIT_PKGS_DIR=str(session_pkgs))
    prefix = tmp_path / "envs" / "probed"
    assert run_envkit("create", str(recipe), "--yes", "--no-probe", env=env).returncode == 0
    edit(recipe, "omp_num_threads: 2", "omp_num_threads: 1")

    proc = subprocess.Popen(
        [sys.executable, "-m", "envkit", "sync", "-p", str(prefix), "--yes", "--json"], stdout=subprocess.PIPE, text=True, env=env
    )
    script = prefix / "etc" / "conda" / "activate.d" / "envkit-probed.sh"
    free_while_probing = False
    while proc.poll() is None and not free_while_probing:
        if "OMP_NUM_THREADS='1'" in script.read_text():  # the change is applied; the probe comes next
            with contextlib.suppress(LockBusy), exclusive_lock(lock_for(prefix), "env"):
                free_while_probing = proc.poll() is None
        time.sleep(0.05)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    assert free_while_probing, "the env's lock was held while the probe ran"
    data = json.loads(out)["data"]
    assert data["applied"] is True and data["variables"] == [{"name": "OMP_NUM_THREADS", "old": "= '2'", "new": "= '1'"}]
    assert data["probe"]["status"] != "fail", data["probe"]
    record = record_json(prefix)
    assert record is not None and record["healthy"] is True and record["probe"]["status"] == data["probe"]["status"]
    assert record["probe"]["checks"]["ddp-seed"] == "pass"


def test_a_sync_that_runs_out_of_space_midway_is_rolled_back_on_the_still_full_disk(tmp_path: Path) -> None:
    """The journal fits, the new package does not: rattler takes the old one away, then fails
    linking the new one. The rollback runs on the disk as full as the failure left it, and the env
    ends byte for byte as it was (exit 74, one line). The package cache is elsewhere, as a shared
    cache would be, so every link is a copy that needs room."""
    channel = tmp_path / "tiny"
    write_tar_bz2(channel, PkgMeta("tool", "1.0", "0"), [PkgFile("share/tool/version.txt", b"v1\n")])
    write_tar_bz2(channel, PkgMeta("big", "1.0", "0"), [PkgFile("share/big/data.bin", os.urandom(300 * 1024))])
    write_tar_bz2(channel, PkgMeta("big", "2.0", "0"), [PkgFile("share/big/data.bin", os.urandom(2048 * 1024))])
    index_channel(channel)
    recipe = tiny_recipe(tmp_path, channel)
    edit(recipe, "packages: [tool]", "packages: [tool, big 1.0]")
    mount = tmp_path / "small"
    script = (
        in_small_fs(mount, recipe, "big 1.0", "big 2.0")
        + f"""
st = os.statvfs({str(mount)!r})
with open({str(mount)!r} + "/.filler", "wb") as f:  # leave 512 KiB: the journal fits, big 2.0 does not
    f.write(b"\\0" * (st.f_bavail * st.f_frsize - 512 * 1024))
synced = envkit("sync", "-p", str(prefix), "--yes", "--no-probe")
st = os.statvfs({str(mount)!r})
print(json.dumps({{"made": made.returncode, "madeerr": made.stderr, "code": synced.returncode, "stderr": synced.stderr,
                  "same": snapshot() == before, "free_kb": st.f_bavail * st.f_frsize // 1024,
                  "left": sorted(p.name for p in (prefix / "etc" / "envkit").iterdir())}}))
"""
    )
    env = dict(os.environ, ENVKIT_PKGS_DIR=str(tmp_path / "pkgs"))
    seen = run_in_small_fs(mount, 3 * 1024, script, env)
    assert seen["made"] == 0, seen["madeerr"]
    assert seen["code"] == 74 and "Traceback" not in seen["stderr"], seen["stderr"]
    assert seen["stderr"].count("\n") == 1 and "envkit: error: " in seen["stderr"], seen["stderr"]
    assert "No space left on device" in seen["stderr"] or "no space left" in seen["stderr"], seen["stderr"]
    assert f"{mount}/env was rolled back to what it was" in seen["stderr"], seen["stderr"]
    assert "failed to link big-2.0-0" in seen["stderr"] and abs(seen["free_kb"] - 512) <= 16  # as full as before
    assert seen["same"], "the env is not as it was before the sync"
    assert seen["left"] == ["record.json"], seen["left"]


def made_pip_env(
    tmp_path: Path, name: str, channel: Path, links: Path, python: str = "3.11", pip: str = "mpmath, threadpoolctl", more: str = ""
) -> tuple[Path, Path, dict[str, str]]:
    """(recipe, prefix, pip's offline env) of an env created from `channel` with pip: [`pip`] from
    the find-links folder `links` (and `more` recipe lines)."""
    recipe = write_recipe(
        tmp_path / "r",
        name,
        f'envkit: 1\nname: {name}\nchannels: [{channel.as_uri()}]\npython: "{python}"\npackages: [pip]\npip: [{pip}]\n{more}',
    )
    env = offline_pip_env(dict(os.environ), links)
    made = run_envkit("create", str(recipe), "--yes", "--no-probe", env=env)
    assert made.returncode == 0, made.stderr
    return recipe, tmp_path / "envs" / name, env


def made_git_env(tmp_path: Path, name: str) -> tuple[Commit, str, str, Path, dict[str, str]]:
    """(commit, its first commit, the repository as pip reaches it, prefix, pip's offline env) of
    an env whose recipe takes `proj` from a git branch (`proj @ git+URL@main`), its REV 1."""
    channel, links = pip_channel(tmp_path)
    commit = git_project(tmp_path / "proj", "proj")
    first = commit("REV = 1\n")
    source = f"git+file://localhost{tmp_path / 'proj'}"
    _, prefix, env = made_pip_env(tmp_path, name, channel, links, pip=f'"proj @ {source}@main"')
    return commit, first, source, prefix, env


def recorded_pip(prefix: Path) -> dict[str, str]:
    """The wheels the env's record names, with the URL each came from."""
    record = record_json(prefix)
    assert record is not None
    return {str(p["name"]): str(p["url"]) for p in record["pip_installed"]}


def _site(prefix: Path) -> Path:
    return prefix / "lib" / "python3.11" / "site-packages"


def _wheels(prefix: Path) -> set[str]:
    return {d.name for d in _site(prefix).glob("*.dist-info") if (d / "INSTALLER").read_text().strip() == "pip"}


def test_update_moves_a_pip_wheel_and_only_that_one(tmp_path: Path) -> None:
    """`sync --update NAME` moves a pip wheel as it moves a conda package: to the newest the recipe
    and everything else allow, every other wheel held where it is; --update-all moves them all.
    The change shown is pip's own choice in the env, and the files installed are the ones shown."""
    channel, links = pip_channel(tmp_path)
    recipe, prefix, env = made_pip_env(tmp_path, "wheels", channel, links)
    assert _wheels(prefix) == {"mpmath-1.3.0.dist-info", "threadpoolctl-3.8.0.dist-info"}
    # newer of both, and a dependency the newer mpmath brings
    homemade_wheel(links, "gmpyhelper", "1.0", {"gmpyhelper/__init__.py": "v = 1\n"})
    homemade_wheel(links, "mpmath", "9.9", {"mpmath/__init__.py": "__version__ = '9.9'\n"}, requires=("gmpyhelper",))
    homemade_wheel(links, "threadpoolctl", "9.9", {"threadpoolctl.py": "__version__ = '9.9'\n"})
    assert json.loads(run_envkit("sync", "-n", "wheels", "--json", env=env).stdout)["data"]["noop"] is True

    before = snapshot(prefix)
    shown = run_envkit("sync", "-n", "wheels", "--update", "MPMath", "--dry-run", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["data"]["pip"] == ["+ gmpyhelper 1.0", "~ mpmath 1.3.0 -> 9.9"]
    assert snapshot(prefix) == before

    moved = run_envkit("sync", "-n", "wheels", "--update", "mpmath", "--yes", "--no-probe", env=env)
    assert moved.returncode == 0, moved.stderr
    assert "pip ~ mpmath 1.3.0 -> 9.9" in moved.stdout
    assert _wheels(prefix) == {"mpmath-9.9.dist-info", "gmpyhelper-1.0.dist-info", "threadpoolctl-3.8.0.dist-info"}
    record = record_json(prefix)
    assert record is not None
    installed = {p["name"]: p for p in record["pip_installed"]}
    assert {n: p["version"] for n, p in installed.items()} == {"gmpyhelper": "1.0", "mpmath": "9.9", "threadpoolctl": "3.8.0"}
    assert installed["mpmath"]["url"].startswith((links / "mpmath-9.9-py3-none-any.whl").as_uri() + "#sha256=")
    # the record is the env again: the quick answer, no drift
    again = run_envkit("sync", "-n", "wheels", "--json", env=env)
    assert json.loads(again.stdout)["data"]["noop"] is True, again.stdout
    audited = json.loads(run_envkit("audit", "-n", "wheels", "--json", env=env).stdout)["data"]["audits"][0]["findings"]
    assert [f["rule_id"] for f in audited if f["rule_id"] == "EK024"] == []

    everything = run_envkit("sync", "-n", "wheels", "--update-all", "--yes", "--no-probe", "--json", env=env)
    assert everything.returncode == 0, everything.stderr
    assert json.loads(everything.stdout)["data"]["pip"] == ["~ threadpoolctl 3.8.0 -> 9.9"]
    assert "threadpoolctl-9.9.dist-info" in _wheels(prefix)
    newest = run_envkit("sync", "-n", "wheels", "--update", "mpmath", "--json", env=env)
    assert newest.returncode == 0 and json.loads(newest.stdout)["data"]["noop"] is True, newest.stdout
    # an index that does not answer: pip's --upgrade keeps what is installed and says nothing, which
    # read as "already the newest"
    (tmp_path / "unreachable").mkdir()
    lost = run_envkit(
        "sync", "-n", "wheels", "--update", "mpmath", "--dry-run", env=offline_pip_env(dict(os.environ), tmp_path / "unreachable")
    )
    assert lost.returncode == 3 and "pip found no file for mpmath to move to" in lost.stderr, lost.stderr
    # a newer mpmath that needs a newer threadpoolctl: held, it stays, and the sync says what would free it
    homemade_wheel(links, "mpmath", "10.0", {"mpmath/__init__.py": "__version__ = '10.0'\n"}, requires=("threadpoolctl >=10",))
    homemade_wheel(links, "threadpoolctl", "10.0", {"threadpoolctl.py": "__version__ = '10.0'\n"})
    held = run_envkit("sync", "-n", "wheels", "--update", "mpmath", "--dry-run", env=env)
    assert held.returncode == 0, held.stderr
    assert "mpmath 10.0 needs threadpoolctl to move with it" in held.stdout + held.stderr
    assert "sync --update mpmath --update threadpoolctl" in held.stdout + held.stderr
    both = run_envkit("sync", "-n", "wheels", "--update", "mpmath", "--update", "threadpoolctl", "--dry-run", "--json", env=env)
    assert json.loads(both.stdout)["data"]["pip"] == ["~ mpmath 9.9 -> 10.0", "~ threadpoolctl 9.9 -> 10.0"]
    typo = run_envkit("sync", "-n", "wheels", "--update", "mpmth", env=env)
    assert typo.returncode == 2 and "--update mpmth: envkit installed no package of that name" in typo.stderr
    # wheels the recipe no longer lists go; they are not moved first
    edit(recipe, "pip: [mpmath, threadpoolctl]\n", "")
    emptied = run_envkit("sync", "-n", "wheels", "--update-all", "--dry-run", "--json", env=env)
    assert emptied.returncode == 0, emptied.stderr
    assert json.loads(emptied.stdout)["data"]["pip"] == ["- mpmath", "- threadpoolctl"]


def test_update_keeps_a_wheel_upgraded_by_hand_and_what_it_needs(tmp_path: Path) -> None:
    """`pip install -U mpmath` by hand, then `sync --update mpmath`: the sync took the upgrade back to
    the recorded version first, saw the older one, and left it there. A wheel the user installed by
    hand that the new mpmath requires was taken away too, leaving mpmath without it."""
    channel, links = pip_channel(tmp_path)
    _, prefix, env = made_pip_env(tmp_path, "byhand", channel, links)
    homemade_wheel(links, "helperlib", "1.0", {"helperlib/__init__.py": "v = 1\n"})
    homemade_wheel(links, "mpmath", "9.9", {"mpmath/__init__.py": "__version__ = '9.9'\n"}, requires=("helperlib",))
    pip = [str(prefix / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "-U", "mpmath"], check=True, env=env, capture_output=True)
    assert {"mpmath-9.9.dist-info", "helperlib-1.0.dist-info"} <= _wheels(prefix)

    shown = run_envkit("sync", "-n", "byhand", "--update", "mpmath", "--dry-run", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["data"]["pip"] == [
        "= helperlib 1.0 (the recipe's pip list needs it; recorded now)",
        "~ mpmath 1.3.0 -> 9.9",
    ]
    kept = run_envkit("sync", "-n", "byhand", "--update", "mpmath", "--yes", "--no-probe", env=env)
    assert kept.returncode == 0, kept.stderr
    assert _wheels(prefix) == {"mpmath-9.9.dist-info", "helperlib-1.0.dist-info", "threadpoolctl-3.8.0.dist-info"}
    record = record_json(prefix)
    assert record is not None
    assert {p["name"]: p["version"] for p in record["pip_installed"]} == {"helperlib": "1.0", "mpmath": "9.9", "threadpoolctl": "3.8.0"}
    # the file pip offers for the version kept, so that a put-back, an export or a lock has it
    mpmath = next(p for p in record["pip_installed"] if p["name"] == "mpmath")
    assert mpmath["url"].startswith((links / "mpmath-9.9-py3-none-any.whl").as_uri() + "#sha256="), mpmath
    again = run_envkit("sync", "-n", "byhand", "--json", env=env)
    assert json.loads(again.stdout)["data"]["noop"] is True, again.stdout
    # a plain sync still puts a hand upgrade back
    homemade_wheel(links, "threadpoolctl", "9.9", {"threadpoolctl.py": "__version__ = '9.9'\n"})
    subprocess.run([*pip, "-U", "threadpoolctl"], check=True, env=env, capture_output=True)
    back = run_envkit("sync", "-n", "byhand", "--yes", "--no-probe", "--json", env=env)
    assert json.loads(back.stdout)["data"]["pip"] == [
        "- threadpoolctl 9.9 (pip-installed since)",
        "+ threadpoolctl 3.8.0 (as envkit installed it)",
    ]


def test_a_wheel_update_that_fails_midway_is_rolled_back(tmp_path: Path) -> None:
    """Two wheels move, the second's file cannot be unpacked (its metadata reads, its module's bytes
    are damaged): the first is already in place when pip fails, and the env goes back to what it was."""
    channel, links = pip_channel(tmp_path)
    _, prefix, env = made_pip_env(tmp_path, "halfway", channel, links)
    homemade_wheel(links, "mpmath", "9.9", {"mpmath/__init__.py": "__version__ = '9.9'\n"})
    broken = homemade_wheel(links, "threadpoolctl", "9.9", {"threadpoolctl.py": "__version__ = '9.9'  # " + "x" * 64 + "\n"})
    data = broken.read_bytes()
    broken.write_bytes(data.replace(b"x" * 64, b"y" * 64, 1))  # stored, not deflated: the CRC no longer matches
    before = snapshot(prefix)

    failed = run_envkit("sync", "-n", "halfway", "--update-all", "--yes", "--no-probe", env=env)
    assert failed.returncode != 0 and "rolled back" in failed.stderr, failed.stderr
    assert len(failed.stderr.strip().splitlines()) <= 2 and "Traceback" not in failed.stderr
    assert snapshot(prefix) == before
    assert not sync_journal_path(prefix).exists()


LOADED_BY_SYNC = """
import os, sys
from envkit.cli.main import main
code = main(sys.argv[1:])
print(sorted(m for m in ("packaging",) if m in sys.modules))
sys.stdout.flush()
os._exit(code)
"""


def test_a_sync_without_pip_loads_no_packaging(tmp_path: Path) -> None:
    """packaging is loaded only where a pip list or --update needs it."""
    _, recipe, prefix = tiny_env(tmp_path)
    edit(recipe, "packages: [tool]", "packages: [tool, extra]")
    proc = subprocess.run(
        [sys.executable, "-c", LOADED_BY_SYNC, "sync", "-p", str(prefix), "--yes", "--no-probe"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "+ extra 2.0 0" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_a_python_move_installs_the_pip_list_anew_for_the_new_python(tmp_path: Path) -> None:
    """python 3.11 -> 3.12 in the recipe: the new python reads lib/python3.12, and the wheels pip had
    put in lib/python3.11 stayed there, unseen. The sync said "nothing to do" afterwards and the
    audit found the env clean (both read every lib/python3*), while `import mpmath` failed. Now the
    wheels go with the old python and come back for the new one, all or nothing, at the versions
    they had where the new python has files for them (a compiled wheel built for the old python
    alone moves; the others do not move to the newest with it)."""
    channel, links, other = two_pythons_pip_channel(tmp_path)
    host = f"{sys.version_info[0]}.{sys.version_info[1]}"
    homemade_wheel(links, "compiled", "1.0", {"compiled/__init__.py": "v = 1\n"}, tag=HOST_ONLY)
    recipe, prefix, env = made_pip_env(
        tmp_path,
        "moving",
        channel,
        links,
        python=host,
        pip="mpmath, threadpoolctl, compiled",
        more="threading: {env: {MOVED_WITH: python}}\n",
    )
    assert (prefix / f"lib/python{host}/site-packages/_envkit_settings.pth").is_file()
    homemade_wheel(links, "compiled", "2.0", {"compiled/__init__.py": "v = 2\n"})
    homemade_wheel(links, "mpmath", "9.9", {"mpmath/__init__.py": "__version__ = '9.9'\n"})
    edit(recipe, f'python: "{host}"', f'python: "{other}"')

    before = snapshot(prefix)
    (tmp_path / "nowheels").mkdir()
    failed = run_envkit("sync", "-n", "moving", "--yes", "--no-probe", env=offline_pip_env(dict(os.environ), tmp_path / "nowheels"))
    assert failed.returncode == 4 and "was rolled back to what it was" in failed.stderr, failed.stderr
    assert snapshot(prefix) == before

    moved = run_envkit("sync", "-n", "moving", "--yes", "--no-probe", "--json", env=env)
    assert moved.returncode == 0, moved.stderr
    assert json.loads(moved.stdout)["data"]["pip"] == [
        f"~ installed anew for python {other} (the versions kept where pip has them for it): compiled 1.0, mpmath 1.3.0, threadpoolctl 3.8.0"
    ]
    python = prefix / "bin" / "python"
    where = subprocess.run(
        [str(python), "-c", "import mpmath, threadpoolctl, sys; print(sys.version_info[:2], mpmath.__file__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert where.returncode == 0, where.stderr
    assert f"lib/python{other}/site-packages/mpmath" in where.stdout
    assert not list(prefix.glob(f"lib/python{host}/site-packages/*.dist-info"))
    # the startup files went with the python: the new one starts with the settings, the old one's folder is gone
    started = subprocess.run([str(python), "-c", "import os; print(os.environ['MOVED_WITH'])"], capture_output=True, text=True, check=False)
    assert started.stdout == "python\n", started.stderr
    assert not (prefix / f"lib/python{host}").exists()
    record = record_json(prefix)
    assert record is not None and {p["name"]: p["version"] for p in record["pip_installed"]} == {
        "compiled": "2.0",
        "mpmath": "1.3.0",
        "threadpoolctl": "3.8.0",
    }
    again = run_envkit("sync", "-n", "moving", "--json", env=env)
    assert json.loads(again.stdout)["data"]["noop"] is True, again.stdout


def test_a_git_wheel_is_put_back_at_the_commit_envkit_installed(tmp_path: Path) -> None:
    """The record kept a git wheel by its bare URL (no `git+`, no commit): putting it back after a
    `pip uninstall` installed what that URL held by then (the branch's new head, or for a remote
    repository a web page), and the env's exports named no commit either."""
    commit, first, source, prefix, env = made_git_env(tmp_path, "fromgit")
    assert recorded_pip(prefix) == {"proj": f"{source}@{first}"}
    commit("REV = 2\n")
    subprocess.run([str(prefix / "bin" / "python"), "-m", "pip", "uninstall", "--yes", "--quiet", "proj"], check=True)
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert synced.returncode == 0, synced.stderr
    assert module_rev(prefix) == "1"
    exported = run_envkit("export", "-p", str(prefix), "--format", "environment-yml", env=env)
    assert f'- "proj @ {source}@{first}"' in exported.stdout, exported.stdout


def test_a_git_wheel_moved_to_another_commit_by_hand_is_drift_and_sync_puts_it_back(tmp_path: Path) -> None:
    """`pip install --force-reinstall git+URL@<other commit>` of the same version (a branch's head, a colleague's
    fix): the env's wheels were compared by name and version only, so the audit found no drift,
    `sync` said "nothing to do", and the env ran code its record and lock did not name."""
    commit, first, source, prefix, env = made_git_env(tmp_path, "handmoved")
    second = commit("REV = 2\n")
    _hand_moved(prefix, env, f"{source}@{second}")
    assert module_rev(prefix) == "2"
    audited = run_envkit("audit", "-p", str(prefix), "--json", env=env)
    drift = [f["evidence"] for f in json.loads(audited.stdout)["data"]["audits"][0]["findings"] if f["rule_id"] == "EK024"]
    assert drift == [f"~ pip proj 0.1 ({first[:12]}) -> 0.1 ({second[:12]}) (changed since)"], audited.stdout
    dry = run_envkit("sync", "-p", str(prefix), "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["data"]["pip"] == [f"~ proj 0.1 ({second[:12]}) -> 0.1 ({first[:12]}) (as envkit installed it)"]
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert synced.returncode == 0, synced.stderr
    assert module_rev(prefix) == "1"
    assert recorded_pip(prefix) == {"proj": f"{source}@{first}"}
    assert "nothing to do" in run_envkit("sync", "-p", str(prefix), env=env).stdout
    assert run_envkit("audit", "-p", str(prefix), "--fail-on", "warning", env=env).returncode == 0


def _hand_moved(prefix: Path, env: dict[str, str], reference: str) -> None:
    """`pip install --force-reinstall` of the git wheel at another commit, as a user fetches a fix."""
    pip = [str(prefix / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", f"proj @ {reference}"]
    subprocess.run(pip, check=True, env={**os.environ, **env})


def test_update_of_a_git_wheel_already_at_its_branch_head_by_hand_records_that_commit(tmp_path: Path) -> None:
    """The user had pip-installed the branch's head; `sync --update proj` found that commit there,
    installed nothing, and recorded the commit envkit had installed first: the record, the lock's
    next export and the audit named a commit the env did not have."""
    commit, first, source, prefix, env = made_git_env(tmp_path, "headbyhand")
    second = commit("REV = 2\n")
    _hand_moved(prefix, env, f"{source}@{second}")
    dry = run_envkit("sync", "-p", str(prefix), "--update", "proj", "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["data"]["pip"] == [f"~ proj 0.1 ({first[:12]}) -> 0.1 ({second[:12]})"]
    moved = run_envkit("sync", "-p", str(prefix), "--update", "proj", "--yes", "--no-probe", env=env)
    assert moved.returncode == 0, moved.stderr
    assert module_rev(prefix) == "2"
    assert recorded_pip(prefix) == {"proj": f"{source}@{second}"}
    assert run_envkit("audit", "-p", str(prefix), "--fail-on", "warning", env=env).returncode == 0


def test_update_of_a_git_wheel_moved_by_hand_off_its_branch_head_puts_the_head_back(tmp_path: Path) -> None:
    """The branch's head is still the commit envkit installed, the env has another by hand: the
    update found the head recorded and left the env at the other commit."""
    commit, first, source, prefix, env = made_git_env(tmp_path, "offhead")
    second = commit("REV = 2\n")
    subprocess.run(["git", "-C", str(tmp_path / "proj"), "reset", "--quiet", "--hard", first], check=True)
    _hand_moved(prefix, env, f"{source}@{second}")
    dry = run_envkit("sync", "-p", str(prefix), "--update", "proj", "--dry-run", "--json", env=env)
    assert json.loads(dry.stdout)["data"]["pip"] == [f"~ proj 0.1 ({second[:12]}) -> 0.1 ({first[:12]}) (as envkit installed it)"]
    moved = run_envkit("sync", "-p", str(prefix), "--update", "proj", "--yes", "--no-probe", env=env)
    assert moved.returncode == 0, moved.stderr
    assert module_rev(prefix) == "1"
    assert recorded_pip(prefix) == {"proj": f"{source}@{first}"}


def test_a_failed_sync_leaves_a_git_wheel_moved_by_hand_at_its_commit(tmp_path: Path) -> None:
    """A sync puts the recorded commit back, then fails on the recipe's new wheel: the rollback
    is to the env as it was, the hand-moved commit included; it put back the recorded one."""
    commit, _, source, prefix, env = made_git_env(tmp_path, "backtohand")
    second = commit("REV = 2\n")
    _hand_moved(prefix, env, f"{source}@{second}")
    links = tmp_path / "links"
    broken = homemade_wheel(links, "alpha", "1.0", {"alpha.py": "v = 1  # " + "x" * 64 + "\n"})
    broken.write_bytes(broken.read_bytes().replace(b"x" * 64, b"y" * 64, 1))  # stored: the CRC no longer matches
    recipe = next((tmp_path / "r").glob("backtohand.y*ml"))
    recipe.write_text(recipe.read_text().replace('@main"]', '@main", alpha]'))
    before = snapshot(prefix)
    failed = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert failed.returncode != 0 and "rolled back" in failed.stderr, failed.stderr
    assert module_rev(prefix) == "2"
    assert snapshot(prefix) == before


def test_update_moves_a_git_wheel_to_its_branch_head_with_what_it_now_needs(tmp_path: Path) -> None:
    """`sync --update proj` for a wheel the recipe takes from a git branch: it asked the index for
    proj's newest version, which no index has (exit 3), and pip's own --upgrade keeps a git wheel
    already installed whatever the branch's head has become. The branch's head is what moves it,
    with what that commit requires, and the move shows the commits (the version stays)."""
    commit, first, source, prefix, env = made_git_env(tmp_path, "gitmove")
    links = tmp_path / "links"
    second = commit("import mpmath\nREV = 2\n", requires=("mpmath",))
    assert "nothing to do" in run_envkit("sync", "-p", str(prefix), env=env).stdout  # an unchanged recipe moves nothing
    dry = run_envkit("sync", "-p", str(prefix), "--update", "proj", "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["data"]["pip"] == ["+ mpmath 1.3.0", f"~ proj 0.1 ({first[:12]}) -> 0.1 ({second[:12]})"]
    moved = run_envkit("sync", "-p", str(prefix), "--update", "proj", "--yes", "--no-probe", env=env)
    assert moved.returncode == 0, moved.stderr
    assert module_rev(prefix) == "2"
    assert {name: url.split("#")[0] for name, url in recorded_pip(prefix).items()} == {
        "proj": f"{source}@{second}",
        "mpmath": (links / "mpmath-1.3.0-py3-none-any.whl").as_uri(),
    }
    assert "nothing to do" in run_envkit("sync", "-p", str(prefix), env=env).stdout
    assert run_envkit("audit", "-p", str(prefix), env=env).returncode == 0


def test_update_of_a_wheel_the_recipe_takes_from_a_file_says_what_moves_it(tmp_path: Path) -> None:
    """`mpmath @ file:///.../mpmath-1.3.0-...whl` is its own pin. `sync --update mpmath` asked
    the index for mpmath's newest and, with an index that has none, failed (exit 3) as if the
    index were down; with one that had a newer version, it would have said the others held it."""
    channel, links = pip_channel(tmp_path)
    own = tmp_path / "own"
    own.mkdir()
    wheel = next(links.glob("mpmath-*.whl"))
    shutil.copy(wheel, own / wheel.name)
    _, prefix, env = made_pip_env(tmp_path, "fromfile", channel, links, pip=f'"mpmath @ {(own / wheel.name).as_uri()}"')
    (tmp_path / "empty").mkdir()
    moved = run_envkit("sync", "-p", str(prefix), "--update", "mpmath", "--json", env={**env, "PIP_FIND_LINKS": str(tmp_path / "empty")})
    assert moved.returncode == 0, moved.stdout
    out = json.loads(moved.stdout)
    assert out["data"]["noop"] is True
    assert any(m.startswith("mpmath comes from the file the recipe names") for m in out["messages"]), out["messages"]


def test_a_pip_list_that_takes_a_wheel_from_git_instead_installs_it_from_there(tmp_path: Path) -> None:
    """`proj==0.1` became `proj @ git+URL@main` (a fix not released yet, the version not bumped):
    pip took the installed index wheel for the git one, installed nothing, and the sync said
    "synced" with the record still naming the index's file; the way back did the same."""
    channel, links = pip_channel(tmp_path)
    homemade_wheel(links, "proj", "0.1", {"proj/__init__.py": 'REV = "index"\n'})
    repo = tmp_path / "proj"
    git_project(repo, "proj")('REV = "git"\n')
    source = f"git+file://localhost{repo}@main"
    recipe, prefix, env = made_pip_env(tmp_path, "switch", channel, links, pip='"proj==0.1"')
    assert module_rev(prefix) == "index"
    listed = '"proj==0.1"'
    for spec, expected in ((f"proj @ {source}", "git"), ("proj==0.1", "index")):
        recipe.write_text(recipe.read_text().replace(f"pip: [{listed}]", f'pip: ["{spec}"]'))
        listed = f'"{spec}"'
        synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
        assert synced.returncode == 0, synced.stderr
        assert module_rev(prefix) == expected
        recorded = recorded_pip(prefix)["proj"]
        assert recorded.startswith(f"git+file://localhost{repo}@" if expected == "git" else (links / "proj-0.1-py3-none-any.whl").as_uri())
        assert run_envkit("audit", "-p", str(prefix), env=env).returncode == 0


def test_upgrade_in_the_users_pip_settings_moves_no_wheel_a_sync_did_not_ask_to_move(tmp_path: Path) -> None:
    """`upgrade = true` in pip.conf (here PIP_UPGRADE=1, and an eager strategy): a teammate adds
    one wheel to the recipe, and the sync's pip install took every wheel of the list to its
    newest with it, which no `--update` had asked for."""
    channel, links = pip_channel(tmp_path)
    recipe, prefix, env = made_pip_env(tmp_path, "settled", channel, links, pip="mpmath")
    homemade_wheel(links, "mpmath", "9.9", {"mpmath/__init__.py": "__version__ = '9.9'\n"})
    homemade_wheel(links, "alpha", "1.0", {"alpha/__init__.py": "v = 1\n"})
    recipe.write_text(recipe.read_text().replace("pip: [mpmath]", "pip: [mpmath, alpha]"))
    eager = {**env, "PIP_UPGRADE": "1", "PIP_UPGRADE_STRATEGY": "eager"}
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=eager)
    assert synced.returncode == 0, synced.stderr
    assert _wheels(prefix) == {"mpmath-1.3.0.dist-info", "alpha-1.0.dist-info"}
