"""Atomic writes: the mode a file ends with (a rename keeps the temp file's, and mkstemp's is 0600)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from envkit.core.errors import UsageError
from envkit.core.fsutil import (
    atomic_write_text,
    discard_lock,
    exclusive_lock,
    scratch_file,
    sweep_scratch,
    umask,
    write_output,
    write_staged,
)
from envkit.probe.runner import SCRATCH_PREFIX


@pytest.fixture
def mask_027() -> Iterator[None]:
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_a_new_file_gets_what_open_gives(tmp_path: Path, mask_027: None) -> None:
    assert umask() == 0o027
    atomic_write_text(tmp_path / "new.txt", "x\n")
    with open(tmp_path / "plain.txt", "w") as handle:
        handle.write("x\n")
    assert (tmp_path / "new.txt").stat().st_mode & 0o7777 == (tmp_path / "plain.txt").stat().st_mode & 0o7777 == 0o640


def test_a_replaced_file_keeps_its_mode_and_an_explicit_one_wins(tmp_path: Path, mask_027: None) -> None:
    kept = tmp_path / "dir" / "kept.txt"
    kept.parent.mkdir()
    kept.write_text("old\n")
    kept.chmod(0o604)
    atomic_write_text(kept, "new\n")
    assert (kept.read_text(), kept.stat().st_mode & 0o7777) == ("new\n", 0o604)
    atomic_write_text(kept, "newer\n", mode=0o644)
    assert kept.stat().st_mode & 0o7777 == 0o644
    assert [p.name for p in kept.parent.iterdir()] == ["kept.txt"]  # no temp file left behind


def test_a_staged_file_gets_its_mode_and_never_writes_through_what_a_package_put_there(tmp_path: Path, mask_027: None) -> None:
    """A staging env's files are written straight (no temp file, no fsync), yet like the rename
    of an atomic write: a hard link into the package cache or a symlink at the path is replaced,
    never written through, and the mode is the one asked for, whatever the umask."""
    cache, staging = tmp_path / "pkgs" / "pkg" / "activate.sh", tmp_path / "staging" / "etc" / "conda" / "activate.d"
    cache.parent.mkdir(parents=True)
    cache.write_text("the package's\n")
    staging.mkdir(parents=True)
    (staging / "linked.sh").hardlink_to(cache)
    (staging / "pointing.sh").symlink_to(cache)
    for name in ("linked.sh", "pointing.sh", "new.sh"):
        write_staged(staging / name, "export A=1\r\n", mode=0o644)
        written = staging / name
        assert not written.is_symlink() and written.read_bytes() == b"export A=1\r\n"  # newlines as given
        assert written.stat().st_mode & 0o7777 == 0o644 and written.stat().st_nlink == 1
    assert cache.read_text() == "the package's\n" and cache.stat().st_nlink == 1
    assert sorted(p.name for p in staging.iterdir()) == ["linked.sh", "new.sh", "pointing.sh"]


def test_an_output_that_is_a_link_is_written_where_it_points_and_the_link_stays(tmp_path: Path) -> None:
    real = tmp_path / "repo" / "team.lock"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "team.lock"
    link.symlink_to(real)
    assert write_output(link, "new\n") == real
    assert link.is_symlink() and real.read_text() == "new\n"


def test_an_output_that_is_a_stream_is_written_as_one(tmp_path: Path) -> None:
    """A FIFO (as /dev/stdout is, under a pipe) gets the text; a rename would have replaced it."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_output(fifo, "through the pipe\n")
    reader.join(timeout=10)
    assert got == ["through the pipe\n"]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    write_output(Path("/dev/null"), "gone\n")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_an_output_that_cannot_be_a_file_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"cannot write .*/folder: it is a directory"):
        (tmp_path / "folder").mkdir()
        write_output(tmp_path / "folder", "x\n")
    (tmp_path / "a-file").write_text("")
    with pytest.raises(UsageError, match=r"cannot write .*/a-file/out.txt: Not a directory"):
        write_output(tmp_path / "a-file" / "out.txt", "x\n")
    assert write_output(tmp_path / "new" / "folders" / "out.txt", "x\n").read_text() == "x\n"
    with pytest.raises(UsageError, match=r"cannot write /proc/version: "):
        write_output(Path("/proc/version"), "x\n")


def test_a_draft_goes_beside_its_file_and_is_gone_after(tmp_path: Path) -> None:
    """For a writer that takes only a path (rattler's LockFile.to_path): a new empty file of this
    user's alone beside the file it is the draft of, removed after, also when the writer fails."""
    lock = tmp_path / "repo" / "team.lock"
    lock.parent.mkdir()
    for existing in (False, True):
        with scratch_file(lock) as draft:
            assert draft.parent == lock.parent and draft.name.startswith(".team.lock.")
            assert stat.S_IMODE(draft.stat().st_mode) == 0o600 and draft.read_bytes() == b""
            draft.write_text("drafted\n")
        assert sorted(os.listdir(lock.parent)) == (["team.lock"] if existing else [])
        lock.write_text("the lock\n")
    with pytest.raises(RuntimeError, match="the writer failed"), scratch_file(lock) as draft:
        raise RuntimeError("the writer failed")
    assert not draft.exists() and sorted(os.listdir(lock.parent)) == ["team.lock"]


@pytest.mark.parametrize("where", ["-", "/dev/null", "missing/x.lock"])
def test_a_draft_with_no_place_beside_its_file_goes_to_the_temporary_folder(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stdout, a device and a folder not made yet have no place for a draft beside them."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where tempfile makes its files (documented)
    target = tmp_path / where if where.startswith("missing") else Path(where)
    with scratch_file(target) as draft:
        assert draft.parent == temp and draft.exists()
    assert list(temp.iterdir()) == [] and not (tmp_path / "missing").exists()


def test_sweep_removes_only_dead_owners_scratch(tmp_path: Path) -> None:
    """A probe's or an installer's scratch dir, left by an envkit killed with SIGKILL."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{SCRATCH_PREFIX}{dead.pid}-abc"
    live = tmp_path / f"{SCRATCH_PREFIX}{os.getpid()}-def"
    other = tmp_path / "envkit-probe-notapid"
    for path in (stale, live, other):
        path.mkdir()
    assert sweep_scratch(SCRATCH_PREFIX, tmp_path) == [stale]
    assert live.exists() and other.exists() and not stale.exists()


def _fds_open_on(path: Path) -> int:
    return sum(1 for fd in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{fd}") == str(path))


def _soon(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + 10
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def test_a_discarded_lock_file_is_not_held_by_whoever_waited_on_it(tmp_path: Path) -> None:
    """`envkit remove` takes the env's lock file away with the env. A waiter that opened that file
    before it went must not end up holding it once the remover lets go: a newcomer has meanwhile
    locked the new file at the same path, and both would think they hold the env's lock."""
    lock = tmp_path / "envs" / ".env.envkit-lock"
    got, done = threading.Event(), threading.Event()

    def waiter() -> None:
        with exclusive_lock(lock, "env", wait=30) as held:
            got.set()
            assert held == lock and lock.read_text() == str(os.getpid())
            done.wait(30)

    with ExitStack() as newcomer:
        with exclusive_lock(lock, "env") as held:
            waiting = threading.Thread(target=waiter)
            waiting.start()
            assert _soon(lambda: _fds_open_on(lock) == 2)  # the waiter has the file open, and waits for it
            discard_lock(held)
            assert not lock.exists()
            newcomer.enter_context(exclusive_lock(lock, "env"))  # a new file at the path, locked at once
        assert not got.wait(0.5)  # the remover let go of the old file: the waiter waits for the newcomer
    assert got.wait(10)
    done.set()
    waiting.join()
    discard_lock(lock)
    assert list(lock.parent.iterdir()) == []
