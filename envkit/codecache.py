"""The code Python compiles for dataclass methods, kept between runs beside envkit's bytecode.

`@dataclass` writes each class's methods (`__init__`, `__repr__`, `__eq__`, `__hash__`, and a
frozen class's `__setattr__` and `__delattr__`) as source text and compiles that text while the
class is created. Python keeps bytecode for modules in `__pycache__`, but none for that text, so
every start compiles it again: about half of what `envkit lock` spends importing (53 classes, most
of them envkit's, the rest rattler's), the gap between envkit and raw rattler in the team benches.
The cache keeps each text's compiled code, keyed by the text itself, so a later start executes the
same code object that compiling the same text gives, with the same flags (none inherited).

One file, its texts grouped by the module that defines the class, each group decoded only when that
module creates its first dataclass: `envkit --version` decodes 2 classes' worth, not every
command's. A module's classes are all created when it is imported, so a run that compiles a new
text for a module (its classes were edited) keeps just the texts that module used in that run: the
old versions' code goes, and the file never grows for good.

Trust and place: a file in envkit's own `__pycache__` (or under PYTHONPYCACHEPREFIX), as trusted as
the `.pyc` files there, since whoever can write one can change envkit's code; headed by this
interpreter's bytecode magic number and optimization level, so no other Python reads it. Written
only where Python would write bytecode: not under PYTHONDONTWRITEBYTECODE or `-B`, not where the
folder is read-only, and never failing the command. A file that is torn or foreign is ignored and
replaced.

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
from importlib.util import MAGIC_NUMBER, cache_from_source
from types import CodeType
from typing import Any

FORMAT = b"envkit dataclass methods 2\n"

Codes = dict[str, CodeType]  # a text of generated methods -> its compiled code


def cache_path() -> str | None:
    """Where Python would put the bytecode of a module `dataclass-methods.py` in envkit's folder;
    None where this interpreter keeps no bytecode at all. (os.path, not pathlib: `envkit --version`
    loads no pathlib, and this runs first in every envkit process.)"""
    try:
        pyc = cache_from_source(os.path.join(os.path.dirname(__file__), "dataclass-methods.py"))
    except NotImplementedError:  # sys.implementation.cache_tag is None
        return None
    return pyc.removesuffix(".pyc") + ".bin"


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
        temp = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(temp, "wb") as out:
                out.write(header() + marshal.dumps(groups))
            os.replace(temp, self.path)  # a reader sees the old file or the new one, never part of one
        except OSError:  # read-only, full, gone: the cache is an optimisation, never a failure
            with contextlib.suppress(OSError):
                os.unlink(temp)
            return
        self.stored, self.loaded, self.used, self.new = groups, {}, {}, {}


def read_groups(path: str) -> dict[str, bytes]:
    """Each module's marshalled texts; nothing from a file that is absent, torn, or another Python's."""
    try:
        with open(path, "rb") as cached:
            data = cached.read()
    except OSError:
        return {}
    start = header()
    if not data.startswith(start):
        return {}
    try:
        groups = marshal.loads(memoryview(data)[len(start) :])  # noqa: S302 - as trusted as a .pyc beside it
    except (EOFError, ValueError, TypeError):
        return {}
    return groups if isinstance(groups, dict) else {}  # a group that is no group: codes_of


def codes_of(group: bytes | None) -> Codes:
    """One module's texts and their code; nothing from a group that is not that."""
    if group is None:
        return {}
    try:
        codes = marshal.loads(group)  # noqa: S302 - as trusted as a .pyc beside it
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
