"""A real-payload local channel: conda packages converted from PyPI wheels, plus a `python` package
that is a venv-style shim over the host interpreter (pyvenv.cfg + bin/python3.X link).

Built once and cached under ~/.cache/envkit-tests keyed by the wheels' sha256, so CI pays for the
conversion of torch (about 1 GB unpacked) once per machine.
"""

from __future__ import annotations

import hashlib
import importlib._bootstrap_external
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import cast

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_conda

CONVERTER_VERSION = "4"
PY_VER = f"{sys.version_info.major}.{sys.version_info.minor}"
SITE = f"lib/python{PY_VER}/site-packages"
# The payload the acceptance tests need: the seed crash is `import mkl` in a parent, then
# `import torch; import mkl` in a child (mkl-service + the torch wheel's vendored libgomp).
WHEEL_REQUIREMENTS = ("torch==2.13.0", "mkl-service", "numpy", "threadpoolctl")
CONDA_NAME = {"torch": "pytorch"}


def cache_root() -> Path:
    return Path(os.environ.get("ENVKIT_TEST_CACHE", Path.home() / ".cache" / "envkit-tests"))


def download_wheels(dest: Path) -> list[Path]:
    marker = dest / ".complete"
    if not marker.exists():
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--dest", str(dest), *WHEEL_REQUIREMENTS],
            check=True,
            timeout=1800,
        )
        marker.write_text("ok")
    return sorted(dest.glob("*.whl"))


def _conda_version(version: str) -> str:
    return version.split("+", 1)[0]


def _conda_dep(req: Requirement) -> str:
    name = CONDA_NAME.get(canonicalize_name(req.name), canonicalize_name(req.name))
    parts = []
    for spec in req.specifier:
        version = _conda_version(spec.version)
        if spec.operator == "~=":
            parts.append(f">={version}")
        elif spec.operator == "===":
            parts.append(f"=={version}")
        else:
            parts.append(f"{spec.operator}{version}")
    return f"{name} {','.join(parts)}" if parts else name


def _wheel_depends(metadata: str, wheel_tag_python: str) -> list[str]:
    msg = Parser().parsestr(metadata)
    env: dict[str, str] = {**cast("dict[str, str]", default_environment()), "extra": ""}
    deps = []
    for text in msg.get_all("Requires-Dist") or []:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        deps.append(_conda_dep(req))
    deps.append(f"python {PY_VER}.*" if wheel_tag_python.startswith("cp") else "python")
    return deps


def _bytecode(path: str, source: bytes) -> PkgFile | None:
    """A hash-based .pyc next to each module, as conda packages ship them: imports then never
    compile (PYTHONDONTWRITEBYTECODE is common on shared machines) and mtimes do not matter."""
    folder, _, name = path.rpartition("/")
    try:
        code = compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    data = importlib._bootstrap_external._code_to_hash_pyc(code, importlib.util.source_hash(source), False)  # type: ignore[attr-defined]
    tag = sys.implementation.cache_tag
    return PkgFile(f"{folder}/__pycache__/{name[:-3]}.{tag}.pyc", bytes(data))


def convert_wheel(wheel: Path, channel: Path, *, keep_record: bool = False, python: str | None = None) -> Path:
    """A conda package of the wheel's files. `keep_record`: ship the wheel's RECORD, as conda-forge's
    pip-built packages do, so that pip can uninstall the package (and does, to install over it).
    `python` (X.Y): built for that python instead of the host's, its files in that python's
    site-packages and pinned to it, as conda-forge builds a package per python."""
    site = f"lib/python{python}/site-packages" if python else SITE
    name, version, _build, tags = parse_wheel_filename(wheel.name)
    canonical = canonicalize_name(name)
    conda_name = CONDA_NAME.get(canonical, canonical)
    files: list[PkgFile] = []
    metadata = ""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            path = info.filename
            data = zf.read(info)
            mode = (info.external_attr >> 16) & 0o777 or 0o644
            top, _, rest = path.partition("/")
            if top.endswith(".data"):
                kind, _, inner = rest.partition("/")
                target = {
                    "purelib": f"{site}/{inner}",
                    "platlib": f"{site}/{inner}",
                    "data": inner,
                    "scripts": f"bin/{inner}",
                    "headers": f"include/{inner}",
                }[kind]
                if kind == "scripts":
                    mode = 0o755
            else:
                target = f"{site}/{path}"
            if top.endswith(".dist-info"):
                base = rest
                if base == "METADATA":
                    metadata = data.decode("utf-8", "replace")
                if base == "RECORD" and not keep_record:
                    continue
                if base == "INSTALLER":
                    data = b"conda\n"
            files.append(PkgFile(target, data, mode | 0o644))
            if target.endswith(".py") and target.startswith(site) and python is None:  # bytecode: the host's only
                pyc = _bytecode(target, data)
                if pyc is not None:
                    files.append(pyc)
    dist_info = next(f.path.rsplit("/", 1)[0] for f in files if f.path.endswith(".dist-info/METADATA"))
    if not any(f.path == f"{dist_info}/INSTALLER" for f in files):
        files.append(PkgFile(f"{dist_info}/INSTALLER", b"conda\n"))
        if keep_record:  # as pip writes it, listing INSTALLER too
            record = next(f for f in files if f.path == f"{dist_info}/RECORD")
            files[files.index(record)] = PkgFile(
                record.path, record.data + f"{dist_info.rsplit('/', 1)[1]}/INSTALLER,,\n".encode(), record.mode
            )
    tag = next(iter(tags))
    if python:
        meta = PkgMeta(conda_name, _conda_version(str(version)), f"py{python.replace('.', '')}_0", depends=[f"python {python}.*"])
        return write_conda(channel, meta, files)
    meta = PkgMeta(conda_name, _conda_version(str(version)), f"pypi_{tag.interpreter}_0", depends=_wheel_depends(metadata, tag.interpreter))
    return write_conda(channel, meta, files)


def host_interpreter() -> Path:
    base = Path(sys.base_prefix) / "bin" / f"python{PY_VER}"
    return base.resolve() if base.exists() else Path(os.path.realpath(sys.executable))


def python_shim(channel: Path, interpreter: tuple[Path, str] | None = None) -> Path:
    """A `python` package whose bin/python is a real interpreter (the host's, or `interpreter`:
    its path and full version) in a venv-style prefix."""
    real, full = interpreter or (host_interpreter(), ".".join(map(str, sys.version_info[:3])))
    version = ".".join(full.split(".")[:2])
    files = [
        PkgFile("pyvenv.cfg", f"home = {real.parent}\ninclude-system-site-packages = false\nversion = {full}\n".encode()),
        PkgFile(f"bin/python{version}", link_target=str(real)),
        PkgFile("bin/python3", link_target=f"python{version}"),
        PkgFile("bin/python", link_target=f"python{version}"),
        PkgFile(
            f"lib/python{version}/site-packages/README.envkit-shim", b"site-packages of a venv-style python shim over a real interpreter\n"
        ),
    ]
    meta = PkgMeta("python", full, "0_envkit_shim", depends=[])
    return write_conda(channel, meta, files)


def cpython(minor: int) -> tuple[Path, str]:
    """The interpreter binary of CPython 3.`minor` (the host's, or pyenv's beside it) and its full
    version; one that is not here is an error, as the tests that ask for it are about that version."""
    if (3, minor) == sys.version_info[:2]:
        return host_interpreter(), ".".join(map(str, sys.version_info[:3]))
    for binary in sorted(host_interpreter().parents[2].glob(f"3.{minor}.*/bin/python3.{minor}")):
        return binary.resolve(), binary.parents[1].name
    raise RuntimeError(f"no CPython 3.{minor} here (pyenv's versions beside {host_interpreter()})")


def python_plain(channel: Path, minor: int = sys.version_info[1]) -> Path:
    """A `python` package that is no venv, as conda's own python is not: a copy of CPython
    3.`minor`'s interpreter binary (its libpython is found by its absolute run path) over that
    Python's standard library, linked entry by entry, with a site-packages of its own. Python finds
    its prefix from the binary's place, so the env is sys.prefix, and the user site (`pip install
    --user`) is on sys.path ahead of the env's site-packages, as in a conda env."""
    real, full = cpython(minor)
    version = f"3.{minor}"
    stdlib = real.parents[1] / "lib" / f"python{version}"
    files = [
        PkgFile(f"bin/python{version}", real.read_bytes(), mode=0o755),
        PkgFile("bin/python", link_target=f"python{version}"),
        *(
            PkgFile(f"lib/python{version}/{entry.name}", link_target=str(entry))
            for entry in sorted(stdlib.iterdir())
            if entry.name != "site-packages"
        ),
        PkgFile(f"lib/python{version}/site-packages/README.envkit-plain", b"site-packages of a python that is no venv\n"),
    ]
    return write_conda(channel, PkgMeta("python", full, "0_envkit_plain", depends=[]), files)


def build_wheel_channel() -> Path:
    """Download (once), convert (once per wheel set) and index; returns the channel directory."""
    wheels = download_wheels(cache_root() / "wheels")
    key = hashlib.sha256()
    key.update(CONVERTER_VERSION.encode())
    key.update(str(host_interpreter()).encode())
    for wheel in wheels:
        key.update(wheel.name.encode())
        key.update(hashlib.sha256(wheel.read_bytes()).digest())
    channel = cache_root() / "channels" / key.hexdigest()[:16]
    if (channel / ".complete").exists():
        return channel
    staging = channel.with_name(channel.name + f".tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    python_shim(staging)
    seen = set()
    for wheel in wheels:
        name = canonicalize_name(parse_wheel_filename(wheel.name)[0])
        if name in seen or re.match(r"^(pip|wheel)$", name):
            continue
        seen.add(name)
        convert_wheel(wheel, staging)
    index_channel(staging)
    (staging / ".complete").write_text("ok")
    shutil.rmtree(channel, ignore_errors=True)
    staging.rename(channel)
    return channel


def python_install(channel: Path) -> Path:
    """A `python` package laid out as conda's is, no venv: the host's interpreter binary copied
    into bin (it loads the host's libpython through its own rpath) and the standard library
    linked in entry by entry, so the env is its own prefix and `sys.prefix == sys.base_prefix`.
    pip run by such a python is what runs in a conda env (PIP_REQUIRE_VIRTUALENV refuses it)."""
    real = host_interpreter()
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    stdlib = Path(sys.base_prefix) / "lib" / f"python{version}"
    files = [
        PkgFile(f"bin/python{version}", real.read_bytes(), mode=0o755),
        PkgFile("bin/python3", link_target=f"python{version}"),
        PkgFile("bin/python", link_target=f"python{version}"),
        PkgFile(f"lib/python{version}/site-packages/README.envkit-python", b"site-packages of a conda-style python over the host's\n"),
        *(
            PkgFile(f"lib/python{version}/{entry.name}", link_target=str(entry))
            for entry in sorted(stdlib.iterdir())
            if entry.name != "site-packages"
        ),
    ]
    full = ".".join(map(str, sys.version_info[:3]))
    return write_conda(channel, PkgMeta("python", full, "0_envkit_install", depends=[]), files)
