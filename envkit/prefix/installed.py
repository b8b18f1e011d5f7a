"""What a prefix has installed, read from disk: conda-meta records and pip dist-info. The audit's
inventory and the probe's default checks both start here, so they agree on what is installed."""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from envkit.prefix.pipurls import exact_url, url_commit

TorchBuild = Literal["cpu", "cuda"]


# conda-meta records name the channel as conda or rattler wrote it: conda appends the subdir
# (https://conda.anaconda.org/pytorch/linux-64), rattler does not; labels follow the name.
SUBDIRS = frozenset(
    (
        "noarch",
        "linux-32",
        "linux-64",
        "linux-aarch64",
        "linux-armv6l",
        "linux-armv7l",
        "linux-ppc64le",
        "linux-s390x",
        "osx-64",
        "osx-arm64",
        "win-32",
        "win-64",
        "win-arm64",
        "emscripten-wasm32",
        "wasi-wasm32",
        "zos-z",
    )
)


def channel_name(channel: str) -> str:
    """The channel's short name whatever form a record stores it in: 'pytorch' for
    https://conda.anaconda.org/pytorch/linux-64, file:///srv/mirror/pytorch/ or pytorch;
    'pkgs/main' for defaults' URLs."""
    text = channel.strip().rstrip("/")
    if "://" in text:
        from urllib.parse import urlparse

        text = urlparse(text).path
    path = text
    parts = [p for p in path.split("/") if p]
    if parts and parts[-1] in SUBDIRS:
        parts.pop()
    if len(parts) >= 2 and parts[-2] == "label":
        parts = parts[:-2]
    if len(parts) >= 2 and parts[-2] == "pkgs":
        return "/".join(parts[-2:])
    return parts[-1] if parts else ""


NATIVE_LIBRARY = re.compile(r"\.so(\.|$)|\.dylib$|\.dll$")


@dataclass(frozen=True)
class CondaPackage:
    """A package as its conda-meta record says it is installed."""

    name: str
    version: str
    build: str
    channel: str
    depends: tuple[str, ...]
    libraries: tuple[str, ...] = field(default=(), compare=False)  # the native libraries its record lists
    sha256: str | None = field(default=None, compare=False)  # of the archive it was installed from, where its record says

    @property
    def channel_name(self) -> str:
        return channel_name(self.channel)


@dataclass(frozen=True)
class PipDist:
    """A distribution found in site-packages, whoever installed it (pip, conda, or by hand)."""

    name: str
    version: str
    installer: str
    dist_info: str
    top_level: tuple[str, ...]
    outside_files: tuple[str, ...]  # RECORD entries outside site-packages (pip wheels' data files)
    editable_from: str | None = None  # `pip install -e`: the project's URL (PEP 610 direct_url.json)
    source: str | None = None  # installed by URL: the URL that gets it again (a VCS one at its commit), from direct_url.json

    @property
    def managed(self) -> bool:
        """A wheel pip installed, which envkit records and sync puts back: not conda's, and not an
        editable install (a working copy of the user's own project)."""
        return self.installer == "pip" and self.editable_from is None

    @property
    def commit(self) -> str | None:
        """The commit a wheel from git was installed at (None for one from an index or a file)."""
        return url_commit(self.source) if self.source else None

    def reinstall_url(self, recorded_url: str, recorded_version: str) -> str:
        """The URL that gets this very wheel again: the one pip installed it by, else the file
        envkit recorded where it is of this version; "" where neither can (a wheel pip moved since
        from an index, or a recorded git commit the env no longer has)."""
        if self.source:
            return self.source
        same = recorded_version == self.version and url_commit(recorded_url) is None
        return recorded_url if same else ""


def site_packages(prefix: Path) -> list[Path]:
    """The site-packages the env's python reads: where an earlier python's is left beside it (a
    python 3.11 -> 3.12 move leaves lib/python3.11 with the wheels pip put there), those are no
    longer the env's. Every one where no `bin/python3.X` says which python is there."""
    found = sorted(prefix.glob("lib/python3*/site-packages"))
    live = [site for site in found if (prefix / "bin" / site.parent.name).exists()]
    return live or found


@dataclass(frozen=True)
class UnreadableRecord:
    """A conda-meta/*.json that is not a package record conda could load: conda itself then fails
    (CorruptedEnvironmentError) or ignores it, so the env is not what it claims to be."""

    path: str  # relative to the prefix
    reason: str
    denied: bool = False  # sound, perhaps, but this user may not read it (EK030 is about those)


def _record(data: object) -> tuple[CondaPackage | None, str]:
    if not isinstance(data, dict):
        return None, f"a JSON {type(data).__name__}, not an object"
    for key in ("name", "version", "build"):
        if not isinstance(data.get(key), str) or not data[key]:
            return None, f"'{key}' is missing or not a string"
    depends = data.get("depends", [])
    if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
        return None, "'depends' is not a list of strings"
    channel = data.get("channel") or data.get("url") or ""
    if not isinstance(channel, str):
        return None, "'channel' is not a string"
    files = data.get("files", [])
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):  # conda itself fails on such a record
        return None, "'files' is not a list of strings"
    why = _conda_field_problem(data)
    if why:
        return None, why
    libraries = tuple(f for f in files if NATIVE_LIBRARY.search(f))
    sha256 = data.get("sha256") if isinstance(data.get("sha256"), str) else None
    return CondaPackage(data["name"], data["version"], data["build"], channel, tuple(depends), libraries, sha256), ""


# radon cc 23: conda's PrefixRecord checked field by field, one line per field it refuses
def _conda_field_problem(data: dict[str, Any]) -> str:
    """What in a record conda's own PrefixRecord model refuses (conda list then stops with a
    ValidationError or a TypeError), checked against conda 26.7 field by field; "" if nothing."""

    def is_int(value: object) -> bool:
        return type(value) is int

    if "build_number" not in data:
        return "'build_number' is missing (conda requires it)"
    if not is_int(data["build_number"]):
        return f"'build_number' is {type(data['build_number']).__name__}, not an integer"
    for key in ("size",):
        if key in data and data[key] is not None and not is_int(data[key]):
            return f"'{key}' is {type(data[key]).__name__}, not an integer"
    for key in ("timestamp",):
        if key in data and data[key] is not None and not (is_int(data[key]) or type(data[key]) is float):
            return f"'{key}' is {type(data[key]).__name__}, not a number"
    for key in ("depends", "files"):
        if key not in data:
            return f"'{key}' is missing: conda reads the package as having none"
    if "constrains" in data and not (isinstance(data["constrains"], list) and all(isinstance(v, str) for v in data["constrains"])):
        return "'constrains' is not a list of strings"
    if "track_features" in data and not isinstance(data["track_features"], (str, list, type(None))):
        return "'track_features' is neither text nor a list"
    if data.get("noarch") not in (None, "python", "generic", True, False):
        return f"'noarch' is {str(data['noarch'])[:20]!r} (conda knows python and generic)"
    if "paths_data" in data and not isinstance(data["paths_data"], (dict, type(None))):
        return "'paths_data' is not an object"
    return ""


LEGACY_RECORD = "envkit.json"  # envkit 0.1 kept its record in conda-meta, where conda took it for a package's


def read_conda_meta(prefix: Path) -> tuple[dict[str, CondaPackage], tuple[UnreadableRecord, ...]]:
    """Package records by name, and the files that are not readable package records."""
    out: dict[str, CondaPackage] = {}
    bad: list[UnreadableRecord] = []
    for path in sorted((prefix / "conda-meta").glob("*.json")):
        if path.name == LEGACY_RECORD:  # envkit 0.1's record, reported by its own rule
            continue
        rel = str(path.relative_to(prefix))
        try:
            raw = path.read_bytes()
        except OSError as exc:
            bad.append(UnreadableRecord(rel, f"cannot be read ({exc.strerror})", isinstance(exc, PermissionError)))
            continue
        if not raw.strip():
            bad.append(UnreadableRecord(rel, "empty"))
            continue
        try:
            data = json.loads(raw)
        except UnicodeDecodeError:
            bad.append(UnreadableRecord(rel, "not text (binary data)"))
            continue
        except ValueError as exc:
            bad.append(UnreadableRecord(rel, f"not valid JSON ({str(exc).split(':')[0]})"))
            continue
        except RecursionError:
            bad.append(UnreadableRecord(rel, "nested too deeply to be a package record"))
            continue
        package, why = _record(data)
        if package is not None and path.name != (expected := f"{package.name}-{package.version}-{package.build}.json"):
            # conda finds a record by that name, and fails on any other (ValueError in its dist parsing)
            package, why = None, f"named {path.name}, not {expected} as conda requires"
        if package is None:
            bad.append(UnreadableRecord(rel, why))
        else:
            out[package.name] = package
    return out, tuple(bad)


CONDA_UNSET = "***unset***"  # what `conda env config vars unset` leaves in conda-meta/state: set by nobody
CONDA_RESERVED = ("PATH",)  # names conda's activation will not take from env vars (RESERVED_ENV_VARS)
STATE = "conda-meta/state"
PACKAGE_VARS = "etc/conda/env_vars.d"


def _json_vars(path: Path, key: str | None = None) -> dict[str, str]:
    """A JSON object of variables (under `key`); an unreadable or odd file holds none."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        found = data.get(key) if key else data
        return {str(k): str(v) for k, v in (found or {}).items()}
    except (OSError, ValueError, AttributeError, RecursionError):
        return {}


def conda_env_vars(prefix: Path) -> dict[str, str]:
    """What `conda env config vars set` stored in conda-meta/state, as `conda activate` applies it:
    without the variables it marks unset."""
    return {k: v for k, v in _json_vars(prefix / STATE, "env_vars").items() if v != CONDA_UNSET and k not in CONDA_RESERVED}


def conda_activation_vars(prefix: Path) -> dict[str, tuple[str, str]]:
    """name -> (value, the file it comes from): what `conda activate` (and `conda run`) sets before
    it sources activate.d: the packages' etc/conda/env_vars.d files in name order, then
    conda-meta/state, which wins; a variable the state marks unset is set by neither (conda's
    activate.py, _get_environment_env_vars)."""
    merged: dict[str, tuple[str, str]] = {}
    folder = prefix / PACKAGE_VARS
    with contextlib.suppress(OSError):
        for path in sorted(entry.path for entry in os.scandir(folder)):
            name = Path(path).name
            merged.update({k: (v, f"{PACKAGE_VARS}/{name}") for k, v in _json_vars(Path(path)).items()})
    merged.update({k: (v, STATE) for k, v in _json_vars(prefix / STATE, "env_vars").items()})
    return {k: found for k, found in merged.items() if found[0] != CONDA_UNSET and k not in CONDA_RESERVED}


def conda_packages(prefix: Path) -> dict[str, CondaPackage]:
    return read_conda_meta(prefix)[0]


def dependents(packages: dict[str, CondaPackage], name: str) -> list[str]:
    """Every installed package that depends on `name`, directly or not: what `conda remove NAME`
    would take with it."""
    direct: dict[str, set[str]] = {}
    for pkg in packages.values():
        for dep in pkg.depends:
            direct.setdefault(dep.split()[0].lower() if dep.split() else "", set()).add(pkg.name)
    found: list[str] = []
    queue = [name]
    while queue:
        for user in sorted(direct.get(queue.pop(0), ())):
            if user != name and user not in found:
                found.append(user)
                queue.append(user)
    return sorted(found)


def pip_dists(prefix: Path) -> dict[str, PipDist]:
    out: dict[str, PipDist] = {}
    for site in site_packages(prefix):
        for dist in site.glob("*.dist-info"):
            if not (dist / "METADATA").is_file():
                continue  # what an uninstall left (a file its RECORD did not list): no distribution, as for pip
            stem = dist.name[: -len(".dist-info")]
            name, _, version = stem.partition("-")
            name = re.sub(r"[-_.]+", "-", name).lower()  # PEP 503, as the record keeps it (packaging's canonicalize_name)
            installer_file = dist / "INSTALLER"
            installer = installer_file.read_text(errors="replace").strip() if installer_file.exists() else "unknown"
            top = dist / "top_level.txt"
            top_level = (
                tuple(t.strip() for t in top.read_text(errors="replace").splitlines() if t.strip())
                if top.exists()
                else (name.replace("-", "_"),)
            )
            outside: list[str] = []
            record = dist / "RECORD"
            if installer == "pip" and record.exists():
                for line in record.read_text(errors="replace").splitlines():
                    rel = line.split(",", 1)[0]
                    if rel.startswith("../"):
                        outside.append(os.path.normpath(str(site.relative_to(prefix) / rel)))
            if name in out and out[name].installer == "pip":
                continue  # two of one name (pip install --ignore-installed over conda's): pip's is the one that changed
            editable, source = _direct_url(dist)
            out[name] = PipDist(name, version, installer, str(dist.relative_to(prefix)), top_level, tuple(outside), editable, source)
    return out


REQUIRES_RE = re.compile(r"^Requires-Dist:\s*([A-Za-z0-9][A-Za-z0-9._-]*)", re.MULTILINE)


def requires(prefix: Path, dist: PipDist) -> set[str]:
    """The names a dist's METADATA requires (markers and extras not weighed: a superset)."""
    try:
        text = (prefix / dist.dist_info / "METADATA").read_text(errors="replace")
    except OSError:
        return set()
    return {re.sub(r"[-_.]+", "-", name).lower() for name in REQUIRES_RE.findall(text)}


def _direct_url(dist: Path) -> tuple[str | None, str | None]:
    """(the project's URL where it is an editable install, else the URL that installs it again),
    from PEP 610's direct_url.json; a wheel from an index has none."""
    try:
        data = json.loads((dist / "direct_url.json").read_bytes())
    except (OSError, ValueError, RecursionError):
        return None, None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str) or not data["url"]:
        return None, None
    dir_info = data.get("dir_info")
    if isinstance(dir_info, dict) and dir_info.get("editable") is True:
        return data["url"], None
    try:
        return None, exact_url(data)
    except (AttributeError, TypeError):  # a direct_url.json of another shape than PEP 610's
        return None, None


def dist_files(prefix: Path, dist: PipDist) -> tuple[str, ...]:
    """What uninstalling a pip dist removes, relative to the prefix: its RECORD's paths, each .py's
    cached bytecode beside it, and the dist-info folder's own files (RECORD may leave some out)."""
    info = prefix / dist.dist_info
    site = info.parent
    listed: set[str] = set()
    try:
        text = (info / "RECORD").read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        rel = line.split(",", 1)[0]
        if not rel:
            continue
        full = os.path.normpath(os.path.join(site, rel))
        inside = os.path.relpath(full, prefix)
        if inside == ".." or inside.startswith(("../", "/")):
            continue  # never outside the env, whatever a RECORD says (by its paths: lib/ may be a link elsewhere)
        listed.add(inside)
        if full.endswith(".py"):
            cache = os.path.join(os.path.dirname(full), "__pycache__")
            stem = os.path.basename(full)[:-3] + "."
            with contextlib.suppress(OSError):
                listed.update(
                    os.path.relpath(e.path, prefix) for e in os.scandir(cache) if e.name.startswith(stem) and e.name.endswith(".pyc")
                )
    with contextlib.suppress(OSError):
        listed.update(os.path.relpath(e.path, prefix) for e in os.scandir(info) if not e.is_dir(follow_symlinks=False))
    return tuple(sorted(p for p in listed if os.path.lexists(prefix / p)))


def wheel_torch_build(version: str) -> tuple[TorchBuild, str | None] | None:
    """PyPI torch names its build in the local version: +cu130 -> ("cuda", "13.0"), +cpu -> ("cpu",
    None). A plain version (or +rocm, where torch.version.cuda is None) makes no CUDA claim."""
    local = version.partition("+")[2]
    match = re.fullmatch(r"cu(\d+)(\d)", local)
    if match:
        return "cuda", f"{match.group(1)}.{match.group(2)}"
    return ("cpu", None) if local == "cpu" else None


def torch_build(packages: dict[str, CondaPackage], pip: dict[str, PipDist]) -> TorchBuild | None:
    """The torch build the installed packages claim to be: conda says it in the build string
    (cuda129_mkl_..., py3.11_cuda12.1_..., cpu_...), pip wheels in the local version."""
    pytorch = packages.get("pytorch")
    if pytorch is not None:
        if "cuda" in pytorch.build:
            return "cuda"
        if "cpu" in pytorch.build:
            return "cpu"
    torch = pip.get("torch")
    claim = wheel_torch_build(torch.version) if torch is not None else None
    return claim[0] if claim else None


def installed_torch_build(prefix: Path) -> TorchBuild | None:
    return torch_build(conda_packages(prefix), pip_dists(prefix))
