"""Where conda envs live and how conda learns about them (~/.conda/environments.txt)."""

from __future__ import annotations

import os
from pathlib import Path

from envkit.errors import UsageError
from envkit.fsutil import atomic_write_text, exclusive_lock
from envkit.recipe.model import NAME_RE


def envs_dir() -> Path:
    """ENVKIT_ENVS_DIR, CONDA_ENVS_PATH/CONDA_ENVS_DIRS (first entry), the conda of CONDA_EXE, ~/.conda/envs."""
    if os.environ.get("ENVKIT_ENVS_DIR"):
        return Path(os.environ["ENVKIT_ENVS_DIR"]).expanduser()
    for var in ("CONDA_ENVS_PATH", "CONDA_ENVS_DIRS"):
        first = next((p for p in os.environ.get(var, "").replace(",", os.pathsep).split(os.pathsep) if p), None)
        if first:
            return Path(first).expanduser()
    if os.environ.get("CONDA_EXE"):
        root = Path(os.environ["CONDA_EXE"]).resolve().parent.parent
        if (root / "envs").is_dir():
            return root / "envs"
    return Path.home() / ".conda" / "envs"


def pkgs_dir() -> Path:
    """ENVKIT_PKGS_DIR, CONDA_PKGS_DIRS (first entry), else rattler's own default location."""
    if os.environ.get("ENVKIT_PKGS_DIR"):
        return Path(os.environ["ENVKIT_PKGS_DIR"]).expanduser()
    first = next((p for p in os.environ.get("CONDA_PKGS_DIRS", "").replace(",", os.pathsep).split(os.pathsep) if p), None)
    if first:
        return Path(first).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rattler" / "cache" / "pkgs"


def target_prefix(name: str | None, prefix: str | None) -> Path:
    if prefix:
        return Path(prefix).expanduser().absolute()
    assert name is not None
    if not NAME_RE.match(name):
        raise UsageError(f"invalid env name {name!r}", hint="use letters, digits, '-' and '_', or give -p PREFIX")
    return envs_dir() / name


def find_env(name_or_path: str) -> Path:
    """An env given by name or path; a clear error when it is not a conda env."""
    candidate = Path(name_or_path).expanduser()
    if "/" in name_or_path or candidate.is_absolute():
        prefix = candidate.absolute()
    else:
        prefix = envs_dir() / name_or_path
        if not (prefix / "conda-meta").is_dir():
            for registered in registered_envs():
                if registered.name == name_or_path and (registered / "conda-meta").is_dir():
                    prefix = registered
                    break
    if not (prefix / "conda-meta").is_dir():
        raise UsageError(f"{prefix} is not a conda env (no conda-meta/)", hint="give an env name from 'conda env list' or a prefix path")
    return prefix


def environments_txt() -> Path:
    return Path.home() / ".conda" / "environments.txt"


def registered_envs() -> list[Path]:
    path = environments_txt()
    if not path.is_file():
        return []
    return [Path(line.strip()) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _rewrite_registry(update: list[str]) -> None:
    path = environments_txt()
    with exclusive_lock(path.with_name(".environments.txt.envkit.lock"), "the conda env registry"):
        atomic_write_text(path, "".join(f"{line}\n" for line in update))


def register(prefix: Path) -> None:
    current = [str(p) for p in registered_envs()]
    if str(prefix) not in current:
        _rewrite_registry([*current, str(prefix)])


def unregister(prefix: Path) -> None:
    current = [str(p) for p in registered_envs()]
    if str(prefix) in current:
        _rewrite_registry([p for p in current if p != str(prefix)])


def all_envs() -> list[Path]:
    """Every env conda would list: the registry plus the envs dir, existing ones only, no duplicates."""
    seen: list[Path] = []
    for prefix in registered_envs():
        if (prefix / "conda-meta").is_dir() and prefix not in seen:
            seen.append(prefix)
    folder = envs_dir()
    if folder.is_dir():
        for prefix in sorted(folder.iterdir()):
            if (prefix / "conda-meta").is_dir() and prefix not in seen:
                seen.append(prefix)
    return seen
