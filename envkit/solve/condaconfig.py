"""The conda settings envkit shares with conda, read the way conda reads them.

Two sources, one shape (`CondaConfig`):

- `read_condarc()`, standalone (no conda needed): conda's search path (`/etc/conda/.condarc` ...
  `$CONDA_PREFIX/.condarc`, `$CONDARC`, each `condarc.d/` folder too), conda's merge rules
  (a scalar from the last file that sets it, mappings merged key by key with the last file winning,
  lists concatenated with the last file's entries first) and its environment variables on top
  (`CONDA_CHANNEL_ALIAS`, `CONDA_ENVS_DIRS`/`CONDA_ENVS_PATH` split on `os.pathsep`,
  `CONDA_PKGS_DIRS` split on commas), values with `$VARS` and `~` expanded;
- `from_context()`, inside conda (the plugin): conda's own `context`.

tests/conda/test_condarc_agreement.py runs the real conda on a range of .condarc layouts and checks
that both give the same channel URLs, envs dirs and package caches. `#!final` and the
`#!top`/`#!bottom` markers are not read here.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_ALIAS = "https://conda.anaconda.org"
DEFAULT_CUSTOM_CHANNELS = {"pkgs/pro": "https://repo.anaconda.com"}  # replaced, not merged, by any custom_channels
DEFAULT_CHANNELS = ("https://repo.anaconda.com/pkgs/main", "https://repo.anaconda.com/pkgs/r")  # what "defaults" means
SEARCH_PATH = (
    "/etc/conda/.condarc",
    "/etc/conda/condarc",
    "/etc/conda/condarc.d/",
    "/var/lib/conda/.condarc",
    "/var/lib/conda/condarc",
    "/var/lib/conda/condarc.d/",
    "$CONDA_ROOT/.condarc",
    "$CONDA_ROOT/condarc",
    "$CONDA_ROOT/condarc.d/",
    "$XDG_CONFIG_HOME/conda/.condarc",
    "$XDG_CONFIG_HOME/conda/condarc",
    "$XDG_CONFIG_HOME/conda/condarc.d/",
    "~/.config/conda/.condarc",
    "~/.config/conda/condarc",
    "~/.config/conda/condarc.d/",
    "~/.conda/.condarc",
    "~/.conda/condarc",
    "~/.conda/condarc.d/",
    "~/.condarc",
    "$CONDA_PREFIX/.condarc",
    "$CONDA_PREFIX/condarc",
    "$CONDA_PREFIX/condarc.d/",
    "$CONDARC",
)


@dataclass(frozen=True)
class CondaConfig:
    """The condarc settings envkit shares with conda, so both find the same channels, envs and packages."""

    channel_alias: str = DEFAULT_ALIAS
    custom_channels: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_CUSTOM_CHANNELS))  # name -> base URL
    default_channels: tuple[str, ...] = DEFAULT_CHANNELS  # "defaults"; each is also known by its path (pkgs/main)
    envs_dirs: tuple[Path, ...] = ()  # where conda looks for envs by name, in order (defaults included)
    pkgs_dirs: tuple[Path, ...] = ()  # package caches the user configured (none: envkit uses rattler's)
    files: tuple[str, ...] = ()  # the condarc files read, in order
    via: str = "condarc"  # "condarc" (envkit read them) or "conda" (conda's context)
    default_activation_env: str = "base"  # what `conda activate` with no name activates: a name or a path
    # a name that stands for several channels, each a name or a URL (conda's custom_multichannels)
    custom_multichannels: dict[str, tuple[str, ...]] = field(default_factory=dict)


class _InForce:
    """The settings this process uses: conda's, handed over by the plugin, or the files' (read once
    per environment: tests change HOME and CONDA_* between calls)."""

    override: CondaConfig | None = None
    cached: tuple[tuple[object, ...], CondaConfig] | None = None


def use(config: CondaConfig | None) -> None:
    """Inside conda, the plugin hands envkit conda's own settings; None goes back to reading files."""
    _InForce.override = config


def current() -> CondaConfig:
    """The settings in force: conda's context when running inside conda, else the files."""
    if _InForce.override is not None:
        return _InForce.override
    key = _environment_key()
    if _InForce.cached is None or _InForce.cached[0] != key:
        _InForce.cached = (key, read_condarc())
    return _InForce.cached[1]


def _environment_key() -> tuple[object, ...]:
    """What the answer depends on: the variables, and each condarc file's identity and mtime."""
    names = (
        "HOME",
        "XDG_CONFIG_HOME",
        "CONDA_ROOT",
        "CONDA_EXE",
        "CONDA_PREFIX",
        "CONDARC",
        "CONDA_CHANNEL_ALIAS",
        "CONDA_DEFAULT_ACTIVATION_ENV",
    )
    variables = tuple(os.environ.get(n, "") for n in (*names, "CONDA_ENVS_DIRS", "CONDA_ENVS_PATH", "CONDA_PKGS_DIRS"))
    stats = []
    for path in condarc_files():
        with contextlib.suppress(OSError):
            st = path.stat()
            stats.append((str(path), st.st_mtime_ns, st.st_size))
    return (*variables, *stats)


def root_prefix() -> Path | None:
    """The base env of the conda in use (CONDA_EXE, else CONDA_ROOT), if it is a conda env."""
    for var in ("CONDA_EXE", "CONDA_ROOT"):
        value = os.environ.get(var)
        if value:
            path = Path(value).expanduser()
            root = path.resolve().parent.parent if var == "CONDA_EXE" else path
            if (root / "conda-meta").is_dir():
                return root
    return None


def _expand(text: str, root: Path | None) -> str:
    """$VAR and ${VAR} from the environment (unset ones left as written, as conda does), then ~."""
    if "$" not in text:
        return os.path.expanduser(text)

    def sub(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name == "CONDA_ROOT" and root is not None:
            return str(root)
        return os.environ.get(name, match.group(0))

    return os.path.expanduser(re.sub(r"\$(?:\{(\w+)\}|(\w+))", sub, text))


def condarc_files(root: Path | None = None) -> list[Path]:
    """Every file conda reads, in its order: later ones take precedence."""
    root = root if root is not None else root_prefix()
    out: list[Path] = []
    for entry in SEARCH_PATH:
        if entry == "$CONDARC" and not os.environ.get("CONDARC"):
            continue
        expanded = _expand(entry, root)
        if "$" in expanded:
            continue  # a variable that is not set: conda skips the entry too
        path = Path(expanded)
        if entry.endswith("/"):
            if path.is_dir():
                out += sorted(p for p in path.iterdir() if p.suffix in (".yml", ".yaml") and p.is_file())
        elif path.is_file() and path not in out:
            out.append(path)
    return out


def read_mapping(path: Path, hint: str = "fix the file's YAML (conda reads it too)") -> dict[str, Any]:
    """A YAML config file as a mapping (anything else reads as empty); one-line error if unreadable."""
    import yaml

    from envkit.core.errors import UsageError
    from envkit.core.yamlload import safe_load

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {str(exc).splitlines()[0]}", hint=hint) from None
    try:
        data = safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"cannot read {where}: {reason}", hint=hint) from None
    return data if isinstance(data, dict) else {}


def _sequence(sources: list[list[str]]) -> list[str]:
    """conda's list merge: the last source's entries first, each entry once."""
    out: list[str] = []
    for values in reversed(sources):
        for value in values:
            if value not in out:
                out.append(value)
    return out


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, list) else []


def _writable(path: Path) -> bool:
    """conda's test for a root prefix it may create envs in: the directory can be written."""
    return os.access(path, os.W_OK)


# radon cc 32: one branch per condarc key envkit honours, each validated as conda validates it
def read_condarc() -> CondaConfig:
    root = root_prefix()
    files = condarc_files(root)
    alias = DEFAULT_ALIAS
    custom: dict[str, str] | None = None
    multi: dict[str, tuple[str, ...]] = {}
    defaults: list[list[str]] = []
    envs: list[list[str]] = []
    pkgs: list[list[str]] = []
    default_env = "base"
    for path in files:
        data = read_mapping(path)
        if isinstance(data.get("default_activation_env"), str) and data["default_activation_env"]:
            default_env = data["default_activation_env"]  # as conda keeps it: not expanded
        if isinstance(data.get("channel_alias"), str):
            alias = _expand(data["channel_alias"], root)
        if isinstance(data.get("custom_channels"), dict):
            custom = {**(custom or {}), **{str(k): _expand(str(v), root) for k, v in data["custom_channels"].items()}}
        if isinstance(data.get("custom_multichannels"), dict):  # merged key by key, as conda merges maps
            multi.update(
                {str(k): tuple(_strings(v)) for k, v in data["custom_multichannels"].items() if str(k) not in ("defaults", "local")}
            )
        if "default_channels" in data:
            defaults.append([_expand(v, root).rstrip("/") for v in _strings(data["default_channels"])])
        for key in ("envs_dirs", "envs_path"):
            if key in data:
                envs.append([_expand(v, root) for v in _strings(data[key])])
        if "pkgs_dirs" in data:
            pkgs.append([_expand(v, root) for v in _strings(data["pkgs_dirs"])])
    if os.environ.get("CONDA_CHANNEL_ALIAS"):
        alias = _expand(os.environ["CONDA_CHANNEL_ALIAS"], root)
    for var in ("CONDA_ENVS_DIRS", "CONDA_ENVS_PATH"):
        if os.environ.get(var):
            envs.append([_expand(v, root) for v in os.environ[var].split(os.pathsep) if v])
    if os.environ.get("CONDA_PKGS_DIRS"):
        pkgs.append([_expand(v, root) for v in os.environ["CONDA_PKGS_DIRS"].split(",") if v])
    if os.environ.get("CONDA_DEFAULT_ACTIVATION_ENV"):
        default_env = os.environ["CONDA_DEFAULT_ACTIVATION_ENV"]
    return CondaConfig(
        channel_alias=alias.rstrip("/"),
        custom_channels=_with_defaults(_sequence(defaults) if defaults else list(DEFAULT_CHANNELS), custom),
        default_channels=tuple(_sequence(defaults)) if defaults else DEFAULT_CHANNELS,
        envs_dirs=_envs_dirs([Path(p).absolute() for p in _sequence(envs)], root),
        pkgs_dirs=tuple(dict.fromkeys(Path(p).absolute() for p in _sequence(pkgs))),
        files=tuple(str(p) for p in files),
        default_activation_env=default_env,
        custom_multichannels=multi,
    )


def _with_defaults(default_channels: list[str], custom: dict[str, str] | None) -> dict[str, str]:
    """conda's known channel names: each default channel by its path (pkgs/main ->
    https://repo.anaconda.com), then custom_channels over them (or conda's own default map when no
    file sets custom_channels)."""
    out: dict[str, str] = {}
    for url in default_channels:
        scheme, _, rest = url.partition("://")
        host, _, name = rest.partition("/")
        if name:
            out[name] = f"{scheme}://{host}"
    out.update(custom if custom is not None else DEFAULT_CUSTOM_CHANNELS)
    return {k: v.rstrip("/") for k, v in out.items()}


def _envs_dirs(configured: list[Path], root: Path | None) -> tuple[Path, ...]:
    """conda's context.envs_dirs: the configured ones, then the root's envs (first when the root is
    writable) and ~/.conda/envs."""
    home = Path.home() / ".conda" / "envs"
    fixed = [home] if root is None else [root / "envs", home] if _writable(root) else [home, root / "envs"]
    return tuple(dict.fromkeys([*configured, *fixed]))


def from_context() -> CondaConfig:
    """Inside conda: its context, which has already read every source above (and its own flags)."""
    from conda.base.context import context

    custom = {}
    for name, channel in context.custom_channels.items():
        base = channel.base_url.rstrip("/")
        custom[name] = base[: -len(name) - 1] if base.endswith("/" + name) else base
    configured_pkgs = tuple(getattr(context, "_pkgs_dirs", ()) or ())  # configured only; the default is conda's own cache
    return CondaConfig(
        channel_alias=context.channel_alias.base_url.rstrip("/"),
        custom_channels=custom,
        default_channels=tuple(str(c.base_url).rstrip("/") for c in context.default_channels),
        envs_dirs=tuple(Path(p) for p in context.envs_dirs),
        pkgs_dirs=tuple(dict.fromkeys(Path(os.path.expanduser(p)).absolute() for p in configured_pkgs)),
        files=tuple(str(p) for p in context.config_files if Path(str(p)).is_file()) if hasattr(context, "config_files") else (),
        via="conda",
        default_activation_env=str(getattr(context, "default_activation_env", "base") or "base"),
        custom_multichannels={
            str(name): tuple(str(c.base_url).rstrip("/") for c in channels)
            for name, channels in (getattr(context, "custom_multichannels", None) or {}).items()
            if str(name) not in ("defaults", "local")
        },
    )


def first_writable(dirs: tuple[Path, ...]) -> Iterator[Path]:
    """Directories that exist and can be written, or can be created: conda's pick for a new env."""
    for path in dirs:
        probe = path
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if probe.is_dir() and os.access(probe, os.W_OK | os.X_OK):
            yield path
