"""Filesystem edges: atomic writes and advisory locks, so nothing is ever half-written."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from envkit.core.errors import EnvkitError, UsageError, filesystem_refusal


def umask() -> int:
    """The process umask, read without changing it (os.umask can only set it, and setting it
    for a moment would race any thread creating files then)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # no /proc (macOS): the only way there is
    os.umask(mask)
    return mask


def created_mode() -> int:
    """The mode open() gives a new file: what conda's own files get, and what others sharing an
    env (a team's /opt/envs) need to read it."""
    return 0o666 & ~umask()


def owner_name(path: Path) -> str | None:
    """The login name of the user who owns `path`, where it can be told."""
    try:
        import pwd

        return pwd.getpwuid(path.stat().st_uid).pw_name
    except (ImportError, KeyError, OSError):
        return None


def may_create_in(directory: Path) -> Path | None:
    """None when this user may create entries in `directory` (or, where it is not there yet, in the
    nearest directory above it that is, where the rest would be made); else that entry: a directory
    this user may not write to, or a file where a directory must be (whatever its mode)."""
    nearest = next((d for d in (directory, *directory.absolute().parents) if d.exists()), None)
    if nearest is None or (nearest.is_dir() and os.access(nearest, os.W_OK | os.X_OK)):
        return None
    return nearest


def write_staged(path: Path, text: str, *, mode: int) -> None:
    """A file in a tree nobody sees until the whole tree is renamed into place (a staging env):
    written straight, since that rename is what makes it appear whole; atomic_write_text's temp
    file and fsync cost ~1 ms a file, and rattler links the package files beside it without.
    Whatever a package put there goes first: never written through (a hard link into the
    package cache, a symlink), as the rename of atomic_write_text would not either."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.fchmod(fd, mode)  # the umask narrowed what open() gave
        with os.fdopen(fd, "w", encoding="utf-8", newline="", closefd=False) as handle:
            handle.write(text)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str, *, mode: int | None = None, errors: str = "strict", flush: bool = True) -> None:
    """Write via a temp file in the same directory and rename over the target. The file keeps the
    mode it had, or gets the one open() would have given it: mkstemp's 0600 would make a shared
    env's record, or a lock meant for the team, readable by its writer only. `flush=False`: no
    fsync before the rename, for a file in a staging env that is not in place yet (an fsync right
    after an install waits for the journal to commit every link rattler made); replacing a file,
    the rename still gives the old one or the new one whole on ext4 and btrfs, which write a file
    renamed over another before the rename is committed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except OSError:
            mode = created_mode()
    try:
        fd, tmp = _temp_beside(path)
    except PermissionError as exc:  # name the file being written, not the temp file beside it
        raise PermissionError(exc.errno, exc.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors=errors, newline="") as handle:
            handle.write(text)
            if flush:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)  # a full disk fails in write(), which names no file: name the target
        raise


def _temp_beside(path: Path) -> tuple[int, str]:
    """A new file of this user's alone beside `path`, opened for writing, as tempfile.mkstemp makes
    one (exclusive create, never through a link, 0600) but without importing tempfile, which loads
    the random module: a few ms of every create, where the rename over `path` is all it is for."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue  # as mkstemp does: another name
    raise FileExistsError(errno.EEXIST, "no unused temporary name", str(path.parent))


@contextlib.contextmanager
def scratch_file(beside: Path) -> Iterator[Path]:
    """An empty file of this user's alone, for a writer that takes only a path (rattler's
    LockFile.to_path), removed on the way out. Beside `beside`, the file it is the draft of, as
    atomic_write_text's temporary file is; in the system's temporary folder where that is no place
    for one (stdout, a device, a folder not made yet or not this user's to write). tempfile is
    imported only then: it loads random, shutil, bz2 and lzma, 4-5 ms of an `envkit lock` whose
    own work is some 35 ms (measured in a process that has loaded rattler)."""
    made: tuple[int, str] | None = None
    if not is_stdout(str(beside)) and (beside.is_file() or not beside.exists()):
        with contextlib.suppress(OSError):
            made = _temp_beside(beside)
    if made is None:
        import tempfile

        made = tempfile.mkstemp(prefix=".envkit-", suffix=".tmp")
    fd, tmp = made
    os.close(fd)
    try:
        yield Path(tmp)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


STDOUT = "-"  # -o -: standard output, as most tools take it


def output_path(output: str) -> Path:
    """The file -o names: `-` as it is (write_output takes it for stdout), else an absolute path."""
    return Path(STDOUT) if output == STDOUT else Path(output).expanduser().absolute()


def is_stdout(path: str) -> bool:
    """Whether `path` is this process's standard output (-, /dev/stdout, or the file it was sent
    to): what envkit says about writing there must then go to stderr."""
    if path == STDOUT:
        return True
    try:
        there, out = os.stat(path), os.fstat(1)
    except (OSError, ValueError):
        return False
    return (there.st_dev, there.st_ino) == (out.st_dev, out.st_ino)


def write_output(path: Path, text: str, usual_name: str = "out.txt") -> Path:
    """A file the user named (-o): replaced atomically, as every envkit write is, but where it points
    when it is a link (the link stays), and written as a stream when it is one (/dev/stdout, a
    FIFO; a rename over it would replace the device or pipe, and as root did). Folders on the way
    are made; a directory, or a path through a file, is refused in one line (the hint names the file
    `usual_name` in that directory). Returns where it went."""
    if str(path) == STDOUT:
        sys.stdout.write(text)
        return path
    try:
        mode = os.stat(path).st_mode  # follows links: /dev/stdout is one
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}", hint="give another output path") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise UsageError(f"cannot write {path}: it is a directory", hint="give a file path, e.g. " + str(path / usual_name))
    if mode is not None and (not stat.S_ISREG(mode) or is_stdout(str(path))):
        with open(path, "w", encoding="utf-8") as stream:
            stream.write(text)
        return path
    target = Path(os.path.realpath(path))
    try:
        atomic_write_text(target, text)
    except OSError as exc:
        if isinstance(exc, PermissionError) or filesystem_refusal(exc.errno or 0):
            raise  # the CLI says these in its own words (a permission, a full disk)
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}", hint="give another output path") from None
    return target


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: alive
        pass
    return False


def sweep_scratch(prefix: str, root: Path | None = None) -> list[Path]:
    """Remove the scratch dirs named PREFIX<pid>-<random> (see scratch_dir) of envkits that are gone:
    one killed by SIGKILL never ran its cleanup."""
    import shutil
    import tempfile

    removed = []
    for path in Path(root or tempfile.gettempdir()).glob(f"{prefix}*-*"):
        owner = path.name[len(prefix) :].split("-", 1)[0]
        if owner.isdigit() and path.is_dir() and _pid_gone(int(owner)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def scratch_dir(prefix: str) -> Path:
    """A new temporary dir named for this process, once those of envkits that are gone are swept: a
    kill -9 leaves one at most until the next envkit that makes one of its kind."""
    import tempfile

    sweep_scratch(prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


def read_exact(path: Path) -> str | None:
    """File text with line endings untouched (CRLF scripts compare byte for byte); None where there
    is no such file: also where a file stands in for a folder on its path (an `activate.d` that is a
    file) or a folder stands at it, which read as a traceback before."""
    try:
        with path.open(encoding="utf-8", errors="surrogateescape", newline="") as handle:
            return handle.read()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


class LockBusy(EnvkitError):
    pass


@contextlib.contextmanager
def exclusive_lock(lock_path: Path, what: str, *, wait: float = 0) -> Iterator[Path]:
    """flock: a second envkit working on the same target fails at once (or after `wait` seconds,
    for short critical sections such as a registry update). Yields the lock file's path, for
    `discard_lock` once what it guards is gone. A lock is held only on the file that its path
    names when it is taken: one a holder discarded while this process waited on it is let go, and
    the file now at the path is locked instead, so two holders never think they hold one lock."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)  # the umask applies
            mine = True
        except PermissionError:  # another user's lock file (an env beside others'): flock needs only a read
            try:
                fd = os.open(lock_path, os.O_RDONLY)
            except FileNotFoundError:  # its holder discarded it just now: make ours
                continue
            mine = False
        try:
            _take(fd, lock_path, what, deadline)
        except BaseException:
            os.close(fd)
            raise
        if _names(lock_path, fd):
            break
        os.close(fd)  # discarded while we waited on it
    try:
        if mine:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        yield lock_path
    finally:
        os.close(fd)


def _take(fd: int, lock_path: Path, what: str, deadline: float) -> None:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if time.monotonic() >= deadline:
                raise LockBusy(
                    f"{what} is locked by another envkit process ({lock_path})",
                    hint="wait for it to finish, then retry",
                ) from None
            time.sleep(0.05)


def _names(lock_path: Path, fd: int) -> bool:
    """`lock_path` still names the open file `fd` (no holder discarded it meanwhile)."""
    try:
        there = os.stat(lock_path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino)


def discard_lock(lock_path: Path) -> None:
    """Take away a lock file this process holds (exclusive_lock), where what it guarded is gone (a
    removed env), so nothing is left behind; safe because a waiter checks, once it has the lock,
    that the path still names the file it locked. Call it last in the locked block: the next
    taker locks a new file at once. One this user may not delete (another's, in a shared folder)
    stays."""
    with contextlib.suppress(FileNotFoundError, PermissionError):
        os.unlink(lock_path)
