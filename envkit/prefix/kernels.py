"""Jupyter kernels of an env: the kernelspecs (`python -m ipykernel install`) whose kernel is the
env's own python. Jupyter starts such a kernel with that python and the server's environment, plus
the spec's `env`; it runs no activation, so none of the env's activation settings reach the
kernel, or the processes it starts (a DDP run launched from a notebook included). Only the spec's
`env` can carry them, and Jupyter reads its values as templates (`$NAME` and `${NAME}` take the
server's variables, `$$` is one `$`: jupyter_client 7 and later), so a value is written with its
`$` doubled.

Where Jupyter looks (jupyter_core.paths.jupyter_path): $JUPYTER_PATH, the user's data folder,
the server's own prefix and the system's folders. The server may run from any env, so every env
conda knows counts as a server's prefix."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envkit.recipe.model import EnvOp

KERNEL_FILE = "kernel.json"


@dataclass(frozen=True)
class KernelSpec:
    """One kernelspec as it is on disk; an env's kernels are those whose python is the env's."""

    path: Path  # its kernel.json
    name: str  # its folder's name: what `jupyter kernelspec list` and a notebook's metadata call it
    python: str  # argv[0]
    env: dict[str, str]
    text: str  # the file as read: the diff a fix shows, and the file it writes with the other keys kept

    def differences(self, settings: Mapping[str, str | None]) -> tuple[str, ...]:
        """Where the kernel's environment would differ from `settings` (envkit's activation: a value,
        or None for a variable it unsets), each said as a person reads it."""
        out = []
        for name, value in sorted(settings.items()):
            have = self.env.get(name)
            if value is None:
                if have is not None:
                    out.append(f"{name}={unescaped(have)} (envkit's activation unsets it)")
            elif have is None:
                out.append(f"no {name}={value}")
            elif have != escaped(value):
                out.append(f"{name}={unescaped(have)} (envkit's activation: {value})")
        return tuple(out)

    def with_settings(self, settings: Mapping[str, str | None], drop: Iterable[str] = ()) -> str:
        """The kernel.json that gives the kernel `settings`, and not the `drop` names, all else as
        it was; indented as ipykernel writes it."""
        data: dict[str, Any] = json.loads(self.text)
        gone = {name for name, value in settings.items() if value is None} | set(drop)
        env = {name: value for name, value in self.env.items() if name not in gone}
        env.update({name: escaped(value) for name, value in settings.items() if value is not None})
        data["env"] = env
        return json.dumps(data, indent=1, ensure_ascii=False) + ("\n" if self.text.endswith("\n") else "")


def settings_of(ops: Iterable[EnvOp], carried: Iterable[tuple[str, str]] = ()) -> dict[str, str | None]:
    """What a kernelspec's env can carry of an activation: the values it sets, and the names it
    unsets (None), with the values envkit's startup files carry from conda's activation (EK037).
    A prepend or append is left out: the spec's env cannot add to a variable the server may not
    have (Jupyter leaves a `${NAME}` it cannot fill as it is)."""
    own: dict[str, str | None] = {op.name: op.value if op.action == "set" else None for op in ops if op.action in ("set", "unset")}
    return own | dict(carried)


def escaped(value: str) -> str:
    """`value` as a kernelspec's env holds it, for Jupyter to pass on unchanged."""
    return value.replace("$", "$$")


def unescaped(value: str) -> str:
    """A kernelspec's env value as the kernel gets it where the server has none of the variables
    it names."""
    return Template(value).safe_substitute({})


def kernel_dirs(server_prefixes: tuple[Path, ...]) -> tuple[Path, ...]:
    """The folders Jupyter takes kernelspecs from, with `server_prefixes` as the prefixes a server
    may run from (each one's share/jupyter), in jupyter_core's order, once each."""
    home = Path(os.path.expanduser("~"))
    data: list[Path] = [Path(p) for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    if os.environ.get("JUPYTER_DATA_DIR"):
        data.append(Path(os.environ["JUPYTER_DATA_DIR"]))
    if sys.platform == "darwin":
        data += [home / "Library" / "Jupyter", home / "Library" / "Application Support" / "jupyter"]
    elif sys.platform == "win32":
        data += [Path(os.environ["APPDATA"]) / "jupyter"] if os.environ.get("APPDATA") else []
    else:
        data.append(Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share") / "jupyter")
    userbase = os.environ.get("PYTHONUSERBASE")  # the user site's prefix (PEP 370), which jupyter_core reads too
    data.append((Path(userbase) if userbase else home / ".local") / "share" / "jupyter")
    data += [prefix / "share" / "jupyter" for prefix in server_prefixes]
    if sys.platform == "win32":
        data += [Path(os.environ["PROGRAMDATA"]) / "jupyter"] if os.environ.get("PROGRAMDATA") else []
    else:
        data += [Path("/usr/local/share/jupyter"), Path("/usr/share/jupyter")]
    return tuple(dict.fromkeys(folder / "kernels" for folder in data))


def search_dirs(prefix: Path) -> tuple[Path, ...]:
    """kernel_dirs with every env conda knows (and `prefix`) as a server's prefix."""
    from envkit.prefix.envs import all_envs  # conda's registry and envs folders: read only where kernels are looked for

    return kernel_dirs((prefix, *all_envs()))


def installed_kernels(dirs: tuple[Path, ...], read: Mapping[Path, tuple[KernelSpec, ...]] | None = None) -> tuple[KernelSpec, ...]:
    """Every kernelspec Jupyter takes from `dirs`: the first of a name (names are not case
    sensitive) wins, as in Jupyter. `read`: folders read earlier (folder_kernels), taken as they were."""
    seen: set[str] = set()
    out = []
    for folder in dirs:
        for spec in read[folder] if read is not None and folder in read else folder_kernels(folder):
            if spec.name.lower() not in seen:
                seen.add(spec.name.lower())
                out.append(spec)
    return tuple(out)


def folder_kernels(folder: Path) -> tuple[KernelSpec, ...]:
    """The kernelspecs Jupyter would take from one folder, by name."""
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.is_dir())
    except OSError:
        return ()
    return tuple(spec for name in names if (spec := _read(folder / name / KERNEL_FILE, name)) is not None)


@dataclass(frozen=True)
class KernelSearch:
    """Where Jupyter finds `prefix`'s kernels (search_dirs), with the folders outside the prefix
    already read: create reads them while rattler links the env, which holds no GIL meanwhile,
    and reads the prefix's own folder once the env is in place."""

    prefix: Path
    dirs: tuple[Path, ...]
    read: Mapping[Path, tuple[KernelSpec, ...]]


def search_ahead(prefix: Path) -> KernelSearch:
    own = _real(prefix / "share" / "jupyter" / "kernels")  # also as conda's registry may name it (a link's target)
    dirs = search_dirs(prefix)
    return KernelSearch(prefix, dirs, {folder: folder_kernels(folder) for folder in dirs if _real(folder) != own})


def kernels_of(prefix: Path, kernels: tuple[KernelSpec, ...]) -> tuple[KernelSpec, ...]:
    """Those of `kernels` whose kernel is `prefix`'s python, started as itself: a kernel run
    through `conda run` or nb_conda_kernels' runner names another program first, and is activated."""
    homes = {_real(p) for p in (prefix, prefix / "bin", prefix / "Scripts")}
    return tuple(
        k
        for k in kernels
        if (python := Path(k.python)).is_absolute() and python.name.lower().startswith("python") and _real(python.parent) in homes
    )


def env_kernels(prefix: Path, search: KernelSearch | None = None) -> tuple[KernelSpec, ...]:
    """`prefix`'s kernels, wherever Jupyter finds them (search_dirs, or `search` made for it)."""
    if search is None or search.prefix != prefix:
        return kernels_of(prefix, installed_kernels(search_dirs(prefix)))
    return kernels_of(prefix, installed_kernels(search.dirs, search.read))


@dataclass(frozen=True)
class KernelsGiven:
    """What writing an env's settings into its kernels did."""

    written: tuple[str, ...] = ()  # the kernel.json files
    failed: tuple[str, ...] = ()  # "PATH: why", each left as it was


def settings_writes(
    prefix: Path,
    settings: Mapping[str, str | None],
    before: Mapping[str, str | None] | None = None,
    search: KernelSearch | None = None,
) -> tuple[tuple[KernelSpec, str], ...]:
    """Each of `prefix`'s kernels whose environment is not what `settings` give, with the
    kernel.json that gives them. `before`: the settings the env had, whose values a kernel still
    holds for names `settings` no longer has are taken out (envkit wrote them)."""
    dropped = {name: escaped(value) for name, value in (before or {}).items() if name not in settings and value is not None}
    out = []
    for kernel in env_kernels(prefix, search) if settings or dropped else ():
        drop = [name for name, value in dropped.items() if kernel.env.get(name) == value]
        if kernel.differences(settings) or drop:
            out.append((kernel, kernel.with_settings(settings, drop)))
    return tuple(out)


def give_settings(
    prefix: Path,
    settings: Mapping[str, str | None],
    before: Mapping[str, str | None] | None = None,
    search: KernelSearch | None = None,
) -> KernelsGiven:
    """settings_writes, written: each file whole or not at all (it keeps its mode); one that cannot
    be written is said, not fatal, as the env is what matters here (`audit --fix` stops instead)."""
    from envkit.core.fsutil import atomic_write_text

    written, failed = [], []
    for kernel, text in settings_writes(prefix, settings, before, search):
        try:
            atomic_write_text(kernel.path, text)
        except OSError as exc:
            failed.append(f"{kernel.path}: {exc.strerror or exc}")
            continue
        written.append(str(kernel.path))
    return KernelsGiven(tuple(written), tuple(failed))


def _real(path: Path) -> Path:
    """The folder itself, links followed; not the python in it, which may be a link to another
    prefix's interpreter (a venv's)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # Python 3.11 raises RuntimeError on a link loop
        return path.absolute()


def _read(path: Path, name: str) -> KernelSpec | None:
    """A kernelspec Jupyter would take; None for a folder with none, or one it would not read."""
    try:
        if not path.is_file():  # a folder without one, or a FIFO someone named kernel.json: not read (it would block)
            return None
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    argv, env = data.get("argv"), data.get("env") or {}
    if not isinstance(argv, list) or not argv or not isinstance(argv[0], str) or not isinstance(env, dict):
        return None
    return KernelSpec(path, name, argv[0], {str(k): str(v) for k, v in env.items()}, text)
