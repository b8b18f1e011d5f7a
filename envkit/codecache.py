"""The code Python compiles for dataclass methods, kept between runs in the user's cache.

`@dataclass` writes each class's methods (`__init__`, `__repr__`, `__eq__`, `__hash__`, and a
frozen class's `__setattr__` and `__delattr__`) as source text and compiles that text while the
class is created. Python keeps bytecode for modules in `__pycache__`, but none for that text, so
every start compiles it again: about half of what `envkit lock` spends importing (53 classes, most
of them envkit's, the rest rattler's), the gap between envkit and raw rattler in the team benches.
The cache keeps each text's compiled code, keyed by the text itself, so a later start executes the
same code object that compiling the same text gives, with the same flags (none inherited).

One file per envkit install and interpreter, its texts grouped by the module that defines the
class, each group decoded only when that module creates its first dataclass: `envkit --version`
decodes 2 classes' worth, not every command's. A module's classes are all created when it is
imported, so a run that compiles a new text for a module (its classes were edited) keeps just the
texts that module used in that run: the old versions' code goes, and the file never grows for good.
A save also takes away the files beside it that no run has written for STALE_DAYS (the installs of
deleted venvs and gone CI checkouts), so the folder does not either.

Place and trust: the user's cache folder (`~/.cache/envkit/methods`, under XDG_CACHE_HOME if set),
not envkit's own `__pycache__`, which `pip uninstall` would leave behind with the file in it and
which a shared read-only install never lets its users write. The file is code this process runs, so
it is read only where it is this user's own and nobody else may write it (checked on the open
file): a root run whose HOME is still a user's (sudo) reads nothing that user could have written,
and writes nothing into a folder that is not its own. The file is headed by this interpreter's
bytecode magic number and optimization level. Written only where Python would write bytecode (not
under PYTHONDONTWRITEBYTECODE or `-B`), and never failing the command; a file that is torn or
foreign is ignored and replaced.

Only envkit's own processes use it (the console script and `python -m envkit`: envkit.__main__),
never a process that merely imports envkit, such as conda with the plugin.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import marshal
import os
import sys
import time
import zlib
from importlib.util import MAGIC_NUMBER
from types import CodeType
from typing import Any

FORMAT = b"envkit dataclass methods 2\n"
STALE_DAYS = 30  # a cache file not written for this long is taken away by the next save beside it

Codes = dict[str, CodeType]  # a text of generated methods -> its compiled code


def cache_path() -> str | None:
    """This envkit install's file for this interpreter (as envkit.paths.cache_dir finds the folder,
    without pathlib: `envkit --version` loads none, and this runs first in every envkit process);
    None where the interpreter keeps no bytecode at all."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    flavour = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""
    install = zlib.crc32(os.fsencode(os.path.dirname(os.path.abspath(__file__))))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "envkit", "methods", f"{tag}{flavour}-{install:08x}.bin")


def _euid() -> int | None:
    """Who this process is, where users are told apart by uid (not on Windows)."""
    return None if sys.platform == "win32" else os.geteuid()


def _own(st: os.stat_result) -> bool:
    """This user's, and nobody else's to write."""
    euid = _euid()
    return euid is None or (st.st_uid == euid and not st.st_mode & 0o022)


def _own_folder(folder: str) -> bool:
    """`folder`, or its nearest ancestor that exists, is this user's: a run as root whose HOME is a
    user's must not leave that user a folder they cannot write. (What is read is checked apart.)"""
    euid = _euid()
    while euid is not None:
        try:
            return os.stat(folder).st_uid == euid
        except FileNotFoundError:
            parent = os.path.dirname(folder)
            if parent == folder:
                return False
            folder = parent
        except OSError:
            return False
    return True


def header() -> bytes:
    """The format, then this interpreter's bytecode magic number and optimization level."""
    return FORMAT + MAGIC_NUMBER + bytes([sys.flags.optimize])


class MethodCache:
    """Per module: the texts' code as read (`stored`, still marshalled until the module asks),
    the texts this run took from it (`used`) and those it compiled itself (`new`)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.stored: dict[str, bytes] = read_groups(path) if path else {}
        self.loaded: dict[str, Codes] = {}
        self.used: dict[str, set[str]] = {}
        self.new: dict[str, Codes] = {}

    def exec(self, source: Any, globals: dict[str, Any] | None = None, locals: Any = None) -> None:
        """`exec` as the dataclasses module calls it: a text is compiled once, ever."""
        if globals is None:  # exec's own default: the namespaces of the frame that called it
            caller = sys._getframe(1)
            globals, locals = caller.f_globals, caller.f_locals if locals is None else locals
        if isinstance(source, str):
            source = self.code(str(globals.get("__name__", "")), source)
        builtins.exec(source, globals, locals)  # noqa: S102 - what the caller asked for, compiled as it would be

    def code(self, module: str, source: str) -> CodeType:
        stored = self.loaded.get(module)
        if stored is None:
            stored = self.loaded[module] = codes_of(self.stored.get(module))
        code = stored.get(source)
        if code is not None:
            self.used.setdefault(module, set()).add(source)
            return code
        new = self.new.setdefault(module, {})
        code = new.get(source)
        if code is None:
            code = new[source] = compile(source, "<string>", "exec", dont_inherit=True)
        return code

    def save(self) -> None:
        """Rewrite the groups of the modules that compiled something, with what each used and
        compiled in this run; the others' bytes go back as they came."""
        if not self.new or self.path is None or sys.dont_write_bytecode:
            return
        groups = dict(self.stored)
        for module, new in self.new.items():
            kept = {text: self.loaded[module][text] for text in self.used.get(module, ())}
            groups[module] = marshal.dumps({**kept, **new})
        folder = os.path.dirname(self.path)
        temp = f"{self.path}.{os.getpid()}.tmp"
        try:
            if not _own_folder(folder):
                return
            os.makedirs(folder, mode=0o700, exist_ok=True)
            with open(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:  # never through a link
                out.write(header() + marshal.dumps(groups))
            os.replace(temp, self.path)  # a reader sees the old file or the new one, never part of one
        except OSError:  # read-only, full, gone: the cache is an optimisation, never a failure
            with contextlib.suppress(OSError):
                os.unlink(temp)
            return
        self.stored, self.loaded, self.used, self.new = groups, {}, {}, {}
        forget_stale(folder)


def forget_stale(folder: str, now: float | None = None) -> None:
    """Remove the files of envkit installs no run has written for STALE_DAYS (a venv deleted, a CI
    job's checkout gone) and what a killed save left: every install has its own file, so nothing
    else bounds the folder. A file still in use but unwritten that long costs one cold start."""
    cutoff = (time.time() if now is None else now) - STALE_DAYS * 86400
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)


def read_groups(path: str) -> dict[str, bytes]:
    """Each module's marshalled texts; nothing from a file that is absent, torn, or another Python's."""
    try:
        with open(path, "rb") as cached:
            if not _own(os.fstat(cached.fileno())):  # the file as opened: no swap after the check
                return {}
            data = cached.read()
    except OSError:
        return {}
    start = header()
    if not data.startswith(start):
        return {}
    try:
        groups = marshal.loads(memoryview(data)[len(start) :])  # noqa: S302 - the user's own file, no one else's to write (checked above)
    except (EOFError, ValueError, TypeError):
        return {}
    return groups if isinstance(groups, dict) else {}  # a group that is no group: codes_of


def codes_of(group: bytes | None) -> Codes:
    """One module's texts and their code; nothing from a group that is not that."""
    if group is None:
        return {}
    try:
        codes = marshal.loads(group)  # noqa: S302 - the user's own file, no one else's to write (read_groups)
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(codes, dict) or not all(type(t) is str and type(c) is CodeType for t, c in codes.items()):
        return {}
    return codes


def installed() -> MethodCache | None:
    """The cache the dataclasses module compiles through in this process, if any: found where it
    is installed, so there is no second record of it to disagree."""
    owner = getattr(vars(dataclasses).get("exec"), "__self__", None)
    return owner if isinstance(owner, MethodCache) else None


def install() -> MethodCache:
    """From here on, the dataclasses module compiles through the cache (its `exec` is looked up
    among its globals before the builtins). Once per process."""
    cache = installed()
    if cache is None:
        cache = MethodCache(cache_path())
        vars(dataclasses)["exec"] = cache.exec
    return cache


def save() -> None:
    """Write what this process compiled; nothing where the cache was never installed."""
    cache = installed()
    if cache is not None:
        cache.save()
