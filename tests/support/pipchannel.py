"""A channel with a python that has pip (the venv-style shim plus pip converted from its wheel), and a
find-links folder of pure-Python wheels, so recipes with a `pip:` list lock and install offline:
PIP_NO_INDEX=1 and PIP_FIND_LINKS point pip at the folder, as a team's wheelhouse would."""

from __future__ import annotations

import base64
import hashlib
import html
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from packaging.utils import canonicalize_name, parse_wheel_filename

from tests.support.condapkg import index_channel
from tests.support.wheelchannel import cache_root, convert_wheel, host_interpreter, python_shim

if TYPE_CHECKING:
    from tests.support.httpchannel import Tally

PIP_WHEELS = ("pip", "threadpoolctl==3.8.0", "mpmath==1.3.0")


def wheelhouse() -> Path:
    """pip's own wheel and two small pure-Python ones, downloaded once per machine."""
    return _downloaded(cache_root() / "wheelhouse", *PIP_WHEELS)


def _downloaded(dest: Path, *requirements: str) -> Path:
    """`dest`, holding the wheels of `requirements` from PyPI (no dependencies), downloaded once."""
    marker = dest / ".complete"
    if not marker.exists():
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest", str(dest), *requirements],
            check=True,
            timeout=600,
        )
        marker.write_text("ok")
    return dest


def pip_channel(root: Path) -> tuple[Path, Path]:
    """(channel, find-links folder): the channel holds `python` and `pip`; the folder the wheels."""
    house = wheelhouse()
    channel = root / "pipchannel"
    python_shim(channel)
    convert_wheel(next(house.glob("pip-*.whl")), channel)
    index_channel(channel)
    return channel, find_links(root)


def find_links(root: Path) -> Path:
    """A find-links folder of the wheelhouse's wheels but pip's own (the channel has pip)."""
    links = root / "links"
    links.mkdir(parents=True, exist_ok=True)
    for wheel in wheelhouse().glob("*.whl"):
        if not wheel.name.startswith("pip-"):
            (links / wheel.name).write_bytes(wheel.read_bytes())
    return links


def other_python() -> tuple[Path, str]:
    """A CPython of another minor version than the host's (its path, full version), for an env whose
    python moves: pyenv's beside the host interpreter, or one on PATH."""
    host = sys.version_info[:2]
    versions = host_interpreter().parents[2]  # .../versions/3.11.7/bin/python3.11 -> .../versions
    for minor in (12, 10, 13, 9):  # pip 26 runs on 3.9 and later
        if (3, minor) == host:
            continue
        on_path = shutil.which(f"python3.{minor}")
        found = [*sorted(versions.glob(f"3.{minor}.*/bin/python3.{minor}")), *([Path(on_path)] if on_path else [])]
        for candidate in found:
            proc = subprocess.run(
                [candidate, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"], capture_output=True, text=True, check=False
            )
            if proc.returncode == 0:
                return Path(candidate).resolve(), proc.stdout.strip()
    raise RuntimeError(
        f"no CPython 3.9+ other than {host[0]}.{host[1]} here (pyenv's versions or python3.N on PATH): the python-move test needs one"
    )


def two_pythons_pip_channel(root: Path) -> tuple[Path, Path, str]:
    """(channel, find-links folder, the other python's X.Y): the host's python and another, each as
    a venv-style `python` package over the real interpreter, with `pip` built for each; the folder
    holds the pure-Python wheels (both pythons take them)."""
    house = wheelhouse()
    channel = root / "twopythons"
    real, full = other_python()
    for interpreter, version in ((None, f"{sys.version_info[0]}.{sys.version_info[1]}"), ((real, full), ".".join(full.split(".")[:2]))):
        python_shim(channel, interpreter)
        convert_wheel(next(house.glob("pip-*.whl")), channel, python=version)
    index_channel(channel)
    return channel, find_links(root), ".".join(full.split(".")[:2])


def offline_pip_env(base: dict[str, str], links: Path) -> dict[str, str]:
    return {**base, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def index_pip_env(base: dict[str, str], index_url: str) -> dict[str, str]:
    """pip pointed at one index (a mirror, in the tests) and nothing else."""
    return {**base, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": index_url, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@contextmanager
def simple_index(
    root: Path, wheels: list[Path], basic: tuple[str, str] | None = None, stall: float = 0, tally: Tally | None = None
) -> Iterator[str]:
    """A PEP 503 index of `wheels` served over HTTP on localhost, as a PyPI mirror serves its files
    (links with #sha256=); yields its `.../simple` URL and stops serving on exit. With `basic`, a
    private index: every request without that user and password gets 401. With `stall`, each
    answer waits that many seconds: an index far away, or stuck; `tally` counts the requests in
    hand at once."""
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    by_name: dict[str, list[Path]] = {}
    for wheel in wheels:
        (files / wheel.name).write_bytes(wheel.read_bytes())
        by_name.setdefault(canonicalize_name(parse_wheel_filename(wheel.name)[0]), []).append(files / wheel.name)
    for name, copies in by_name.items():
        page = root / "simple" / name / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        links = "".join(
            f'<a href="../../files/{html.escape(w.name)}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{html.escape(w.name)}</a>\n'
            for w in copies
        )
        page.write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")

    from tests.support.httpchannel import served

    with served(root, basic=basic, stall=stall, tally=tally) as url:
        yield f"{url}/simple"


# the tag of a compiled wheel built for the host's python alone (no file for another python)
HOST_ONLY = f"cp{sys.version_info[0]}{sys.version_info[1]}-cp{sys.version_info[0]}{sys.version_info[1]}-manylinux_2_17_x86_64"


def homemade_wheel(
    folder: Path, name: str, version: str, modules: dict[str, str], requires: tuple[str, ...] = (), tag: str = "py3-none-any"
) -> Path:
    """A wheel written here (`modules`: path inside the wheel -> source), with the RECORD pip checks:
    for a wheel no index has, such as another version of one the channel converts. `tag`: its
    compatibility tag (HOST_ONLY: one pip takes for the host's python alone)."""
    dist_info = f"{name}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        **{path: source.encode() for path, source in modules.items()},
        f"{dist_info}/METADATA": metadata.encode(),
        f"{dist_info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: envkit-tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode(),
    }
    record = [
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for path, data in files.items()
    ]
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
        zf.writestr(f"{dist_info}/RECORD", "\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n")
    return wheel


EDITABLE_BACKEND = '''"""A PEP 517/660 backend in the project itself (requires = []): pip builds offline with it."""
import base64, hashlib, os, zipfile

NAME, VERSION = "{name}", "0.1"


def _wheel(directory, files):
    info = f"{{NAME}}-{{VERSION}}.dist-info"
    requires = open("requires.txt").read().split() if os.path.exists("requires.txt") else []
    metadata = f"Metadata-Version: 2.1\\nName: {{NAME}}\\nVersion: {{VERSION}}\\n" + "".join(f"Requires-Dist: {{r}}\\n" for r in requires)
    files = {{**files, f"{{info}}/METADATA": metadata,
              f"{{info}}/WHEEL": "Wheel-Version: 1.0\\nGenerator: envkit-tests\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}}
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{{path}},sha256={{digest}},{{len(text.encode())}}")
    name = f"{{NAME}}-{{VERSION}}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
        zf.writestr(f"{{info}}/RECORD", "\\n".join([*record, f"{{info}}/RECORD,,"]) + "\\n")
    return name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    source = open(os.path.join("src", NAME, "__init__.py")).read()
    return _wheel(wheel_directory, {{f"{{NAME}}/__init__.py": source}})


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {{f"__editable__.{{NAME}}.pth": os.path.abspath("src") + "\\n"}})
'''


def editable_project(folder: Path, name: str) -> Path:
    """A project a user would `pip install -e`: src layout, its own in-tree build backend."""
    (folder / "src" / name).mkdir(parents=True, exist_ok=True)
    (folder / "src" / name / "__init__.py").write_text("WORKING_COPY = True\n")
    (folder / "backend.py").write_text(EDITABLE_BACKEND.format(name=name))
    (folder / "pyproject.toml").write_text(
        f'[project]\nname = "{name}"\nversion = "0.1"\n\n[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    )
    return folder


class Commit(Protocol):
    """Writes the project's module and what it requires, commits them, returns the commit."""

    def __call__(self, source: str, requires: tuple[str, ...] = ()) -> str: ...


def git_project(folder: Path, name: str) -> Commit:
    """A project in a git repository on branch main (its own build backend, so pip builds it
    offline); the function returned writes the package's module and what it requires (names, no
    spaces), commits them, and returns the commit. pip reaches it as `git+file://localhost/...`:
    pip 23.2 (this checkout's venv) refuses `git+file:///...`, a URL with no host."""
    editable_project(folder, name)
    git = ["git", "-C", str(folder), "-c", "user.name=envkit-tests", "-c", "user.email=tests@envkit.invalid"]
    subprocess.run([*git, "init", "--quiet", "--initial-branch=main"], check=True)

    def commit(source: str, requires: tuple[str, ...] = ()) -> str:
        (folder / "src" / name / "__init__.py").write_text(source)
        (folder / "requires.txt").write_text("".join(f"{r}\n" for r in requires))
        subprocess.run([*git, "add", "--all"], check=True)
        subprocess.run([*git, "commit", "--quiet", "--message", source], check=True)
        return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()

    return commit


OLD_PIP = "pip==21.3.1"  # before pip 22.2's `install --dry-run --report`


def old_pip_wheel() -> Path:
    """pip 21.3.1's wheel from PyPI, downloaded once per machine: the pip a recipe pinned long ago."""
    return next(_downloaded(cache_root() / "old-pip", OLD_PIP).glob("pip-*.whl"))


def conda_style_pip_channel(root: Path) -> tuple[Path, Path]:
    """(channel, find-links folder), as pip_channel's, but its python is laid out as conda's is, no
    venv (wheelchannel.python_install): what pip meets in a real conda env."""
    from tests.support.wheelchannel import python_install

    channel = root / "channel"
    python_install(channel)
    convert_wheel(next(wheelhouse().glob("pip-*.whl")), channel)
    index_channel(channel)
    return channel, find_links(root)


def module_rev(prefix: Path, name: str = "proj") -> str:
    """What the env's copy of a git_project's package says its REV is ("" where it cannot import it)."""
    ran = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", f"import {name}; print({name}.REV)"], check=False, capture_output=True, text=True
    )
    return ran.stdout.strip()
