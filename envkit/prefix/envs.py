"""Where conda envs live and how conda learns about them (~/.conda/environments.txt)."""

from __future__ import annotations

import os
from pathlib import Path

from envkit.core import paths
from envkit.core.errors import UsageError
from envkit.core.fsutil import atomic_write_text, exclusive_lock, owner_name
from envkit.core.names import env_name_problem, refused_characters
from envkit.core.notices import notify
from envkit.prefix.leftovers import is_leftover, pending, real_prefix
from envkit.solve.condaconfig import current, first_writable, root_prefix


def envs_dir() -> Path:
    """Where a new env named NAME goes: ENVKIT_ENVS_DIR, else the first writable of conda's envs
    dirs (envs_dirs in .condarc, CONDA_ENVS_DIRS, the root's envs, ~/.conda/envs: envkit.solve.condaconfig)."""
    if os.environ.get("ENVKIT_ENVS_DIR"):
        return _own_dir("ENVKIT_ENVS_DIR")
    return next(first_writable(current().envs_dirs), Path.home() / ".conda" / "envs")


def _own_dir(variable: str) -> Path:
    """A folder named by envkit's variable, absolute as conda makes its own: an env made under a
    relative one was registered by that relative path, which no other directory finds."""
    return Path(os.environ[variable]).expanduser().absolute()


def envs_dirs() -> tuple[Path, ...]:
    """Every dir conda looks in for envs by name, ENVKIT_ENVS_DIR first."""
    own = (_own_dir("ENVKIT_ENVS_DIR"),) if os.environ.get("ENVKIT_ENVS_DIR") else ()
    return tuple(dict.fromkeys((*own, *current().envs_dirs)))


def pkgs_dir() -> Path:
    """ENVKIT_PKGS_DIR, else the first writable package cache configured for conda (pkgs_dirs in
    .condarc, CONDA_PKGS_DIRS), else rattler's own cache. conda's unconfigured default (ROOT/pkgs)
    is not shared: conda skips extracted packages that have no tarball beside them, and rattler
    keeps none, so sharing it would save nothing and mix two caches' bookkeeping."""
    if os.environ.get("ENVKIT_PKGS_DIR"):
        own = _own_dir("ENVKIT_PKGS_DIR")
        if own.exists() and not own.is_dir():  # rattler's cache lock said only "File exists", exit 4
            raise UsageError(f"ENVKIT_PKGS_DIR={own} is a file, not a folder", hint="name a folder (envkit makes it), or unset it")
        return own
    configured = next(first_writable(current().pkgs_dirs), None)
    if configured is not None:
        return configured
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rattler" / "cache" / "pkgs"


def target_prefix(name: str | None, prefix: str | None) -> Path:
    """Where a create puts the env: through a link, where it points (the link stays)."""
    if prefix:
        given = Path(prefix).expanduser().absolute()
    else:
        assert name is not None
        if problem := env_name_problem(name):
            raise UsageError(f"invalid env name {name!r}: {problem}", hint="choose another name, or give -p PREFIX")
        given = envs_dir() / name
    _must_be_placeable(given)
    return real_prefix(given)


def _must_be_placeable(prefix: Path) -> None:
    """The paths conda refuses to make an env at (conda.core.prefix_data.validate_path), refused
    here too: envkit's envs are conda's envs."""
    try:
        str(prefix).encode("utf-8")
    except UnicodeEncodeError:  # a byte that is not UTF-8: Python keeps it as a lone surrogate
        raise UsageError(
            f"{os.fsencode(prefix)!r}: an env's path must be UTF-8 text",
            hint="conda packages and their records name files in UTF-8 (rattler refuses to link into such a path); choose another path",
        ) from None
    if "\n" in str(prefix) or "\r" in str(prefix):
        raise UsageError(
            f"{str(prefix)!r}: an env's path cannot contain a line break",
            hint="conda's list of envs (~/.conda/environments.txt) holds one path a line, so conda makes such an env and then "
            "neither it nor envkit finds it again; choose another path",
        )
    if os.pathsep in str(prefix):
        raise UsageError(
            f"{prefix}: an env's path cannot contain '{os.pathsep}'",
            hint=f"activation puts its bin folder on PATH, which '{os.pathsep}' would split; choose another path (conda refuses it too)",
        )
    if shown := refused_characters(prefix.name):
        raise UsageError(
            f"{prefix}: an env's folder name cannot contain {shown}",
            hint="conda cannot name such an env (conda activate NAME, an environment.yml's name:); choose another name (conda refuses it too)",
        )
    if (prefix.parent / "conda-meta" / "history").is_file():
        raise UsageError(
            f"{prefix} is inside the env {prefix.parent}",
            hint="removing that env would take this one with it; choose a path outside it (conda refuses it too)",
        )


def conda_root() -> Path | None:
    """The base env of the conda in use (CONDA_EXE, else CONDA_ROOT), if it is a conda env."""
    return root_prefix()


def find_env(name_or_path: str) -> Path:
    """An env given by name or path; a clear error when it is not a conda env. A look-up only
    reads: what an interrupted envkit left is told, never settled (commands that change an env
    settle it first, envkit.install.transaction.settle_before_change)."""
    candidate = Path(name_or_path).expanduser()
    if "/" in name_or_path or candidate.is_absolute():
        return _must_be_env(candidate.absolute())
    return find_env_by_name(name_or_path)


def looked_at(name: str | None, prefix: str | None) -> list[Path]:
    """Every path a look-up by -n NAME or -p PREFIX (or the active env, with neither) would read,
    in its order: where interrupted work is settled before a command changes the env."""
    if prefix:
        return [Path(prefix).expanduser().absolute()]
    if name:
        if "/" in name or Path(name).expanduser().is_absolute():
            return [Path(name).expanduser().absolute()]
        root = conda_root()
        if name == "base" and root is not None:
            return [root]
        return [folder / name for folder in envs_dirs()]
    active = os.environ.get("CONDA_PREFIX")
    return [Path(active)] if active else []


def find_env_by_name(name: str) -> Path:
    root = conda_root()
    if name == "base" and root is not None:
        return root
    for folder in envs_dirs():  # conda's order: the first envs dir that has it
        prefix = folder / name
        _told(prefix)
        if (prefix / "conda-meta").is_dir():
            return prefix
    for registered in registered_envs():
        if registered.name == name and (registered / "conda-meta").is_dir():
            return registered
    looked = ", ".join(str(p) for p in envs_dirs())
    raise UsageError(f"no env named '{name}' (looked in {looked} and {environments_txt()})", hint="see 'conda env list', or give -p PREFIX")


def _told(prefix: Path) -> None:
    """Tell what an interrupted envkit left at `prefix` (a command that changes the env has
    settled it before its look-up, so nothing is left to tell). An env moved aside by an interrupted replacement is not there to read: said
    as such, not as "no env"."""
    if os.path.isdir(prefix) and not os.access(prefix, os.R_OK | os.X_OK):
        owner = owner_name(prefix)
        raise UsageError(
            f"{prefix}: you may not read it{f' (it belongs to {owner})' if owner else ''}",
            hint="ask its owner to open it to you (chmod go+rx on the env), or use an env of your own",
        )
    said = pending(prefix)
    if said is not None and not prefix.exists():
        raise UsageError(said, hint="nothing was changed")
    if said is not None:
        notify(f"{said}; nothing was changed")


def _must_be_env(prefix: Path) -> Path:
    _told(prefix)
    if not (prefix / "conda-meta").is_dir():
        raise UsageError(f"{prefix} is not a conda env (no conda-meta/)", hint="give an env name from 'conda env list' or a prefix path")
    return prefix


def select_env(name: str | None, prefix: str | None) -> Path:
    """conda's way of naming an env: -n NAME, -p PREFIX, else the active env (CONDA_PREFIX); a
    look-up only reads (see find_env)."""
    if name and prefix:
        raise UsageError("give either -n NAME or -p PREFIX, not both")
    if prefix:
        return _must_be_env(Path(prefix).expanduser().absolute())
    if name:
        return find_env_by_name(name)
    active = os.environ.get("CONDA_PREFIX")
    if active:
        return _must_be_env(Path(active))
    raise UsageError("no env given and none is active (CONDA_PREFIX is unset)", hint="pass -n NAME or -p PREFIX, or activate an env")


def environments_txt() -> Path:
    return Path.home() / ".conda" / "environments.txt"


def _registry_lines() -> list[str]:
    """environments.txt's lines as paths are: bytes, not always UTF-8 (a folder named on a Latin-1
    system), decoded as Python decodes file names so that they name the same folders and are
    written back as they were."""
    path = environments_txt()
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return []
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}", hint="conda's registry of envs; fix its permissions") from None
    return [os.fsdecode(line.strip()) for line in data.splitlines() if line.strip()]


def registered_envs() -> list[Path]:
    return [Path(line) for line in _registry_lines() if not line.startswith("#")]  # conda skips '#' lines too


def _registry_lock() -> Path:
    # In envkit's own cache, not beside environments.txt: ~/.conda is conda's folder.
    return paths.cache_dir() / "locks" / "environments.txt.lock"


def register(prefix: Path) -> None:
    with exclusive_lock(_registry_lock(), "the conda env registry", wait=30):
        current = _registry_lines()
        if str(prefix) not in current:
            atomic_write_text(environments_txt(), "".join(f"{line}\n" for line in [*current, str(prefix)]), errors="surrogateescape")


def unregister(prefix: Path) -> None:
    with exclusive_lock(_registry_lock(), "the conda env registry", wait=30):
        current = _registry_lines()
        if str(prefix) in current:
            atomic_write_text(environments_txt(), "".join(f"{line}\n" for line in current if line != str(prefix)), errors="surrogateescape")


def all_envs() -> list[Path]:
    """Every env conda would list: its base, the registry, the envs dirs; existing ones only, once
    each (an envs dir's link to an env registered by its own path is that env, named as first seen)."""
    seen: list[Path] = []
    real: set[Path] = set()

    def add(prefix: Path) -> None:
        if (prefix / "conda-meta").is_dir() and real_prefix(prefix) not in real and not is_leftover(prefix):
            seen.append(prefix)
            real.add(real_prefix(prefix))

    root = conda_root()
    if root is not None:
        seen.append(root)
        real.add(real_prefix(root))
    for prefix in registered_envs():
        add(prefix)
    for folder in envs_dirs():
        if folder.is_dir():
            for prefix in sorted(folder.iterdir()):
                add(prefix)
    return seen
