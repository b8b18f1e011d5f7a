"""Which folders of an env a change by rattler's installer can add entries to, so that sync's
journal lists those folders rather than every path in the env. A torch env holds some 24,000
paths; listing them all took longer than anything else in a sync that changes one small package.

rattler links each package's files at the paths its `info/paths.json` names (noarch: python ones
moved under site-packages and bin), writes entry points to bin/ and records to conda-meta/, and
renames a clobbered file beside the file that wins. Unlinking adds nothing: it removes a package's
files, and where one had won a clobber, renames the loser back to the name the removed file had.
envkit runs no link scripts. So every entry a change adds is in the env's root, conda-meta/, bin/,
or a folder on the way to a path of a package it links. Where that cannot be known beforehand (a
package rattler has not extracted into the cache yet, a python that changes, which relinks every
noarch package), the answer is None: list it all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from envkit.install.pkgcache import cached_sha256

ALWAYS = ("", "conda-meta", "bin", "Scripts")  # the root, records, entry points (Scripts: Windows)


def change_folders(
    prefix: Path, cache: Path, installed: dict[str, str], installed_sha256: dict[str, str | None], target: list[Any]
) -> tuple[str, ...] | None:
    """The folders (relative, '' the root) a change from `installed` (name -> "version build",
    and each archive's sha256, as the env's records say) to `target` (rattler records) can add
    entries to; None when that cannot be known. A package rebuilt under the same version and build
    is relinked by rattler (its sha256 differs)."""
    rebuilt = {
        r.name.normalized
        for r in target
        if r.sha256 is not None and installed_sha256.get(r.name.normalized) not in (None, bytes(r.sha256).hex())
    }
    wanted = {r.name.normalized: f"{r.version} {r.build}" for r in target}
    linked = [r for r in target if r.name.normalized in rebuilt or installed.get(r.name.normalized) != wanted[r.name.normalized]]
    if ("python" in installed and installed["python"] != wanted.get("python", "")) or "python" in rebuilt:
        # a python that changes or goes: rattler relinks every noarch package
        return None
    site_packages = site_packages_of(target)
    folders = set(ALWAYS)
    for record in linked:
        if record.sha256 is not None and cached_sha256(cache, record) != bytes(record.sha256):
            return None  # not extracted yet, or another archive of that name is: rattler extracts it afresh
        paths = cached_paths(cache / f"{record.name.normalized}-{record.version}-{record.build}", site_packages)
        if paths is None:
            return None
        folders |= _ancestors(paths)
    return tuple(sorted(folders))


def _ancestors(paths: Iterable[str]) -> set[str]:
    """The folders on the way to each path (the root left out). String work: pathlib takes 30 us a
    path here, and a package can have tens of thousands."""
    out: set[str] = set()
    for path in paths:
        cut = path.rfind("/")
        while cut > 0 and (folder := path[:cut]) not in out:  # a folder in already brought its own
            out.add(folder)
            cut = path.rfind("/", 0, cut)
    return out


def site_packages_of(target: list[Any]) -> str | None:
    """Where rattler puts noarch: python packages' site-packages: the python record's own answer
    (CEP 17), else the layout for its version."""
    python = next((r for r in target if r.name.normalized == "python"), None)
    if python is None:
        return None
    if getattr(python, "python_site_packages_path", None):
        return str(python.python_site_packages_path)
    if str(python.subdir).startswith("win-"):
        return "Lib/site-packages"
    major, minor = [*str(python.version).split("."), "", ""][:2]
    return f"lib/python{major}.{minor}/site-packages" if major.isdigit() and minor.isdigit() else None


def cached_paths(extracted: Path, site_packages: str | None) -> list[str] | None:
    """The package's paths as rattler will link them, from its extracted copy in the cache."""
    try:
        index = json.loads((extracted / "info" / "index.json").read_text(encoding="utf-8"))
        listed = json.loads((extracted / "info" / "paths.json").read_text(encoding="utf-8"))["paths"]
        paths = [str(entry["_path"]) for entry in listed]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if index.get("noarch") != "python":
        return paths
    if site_packages is None:
        return None
    return [_moved(path, site_packages) for path in paths]


def _moved(path: str, site_packages: str) -> str:
    """Where rattler links a noarch: python package's path (bin/ for scripts: Scripts/ on Windows
    is listed always)."""
    head, _, rest = path.partition("/")
    if head == "site-packages":
        return f"{site_packages}/{rest}"
    if head == "python-scripts":
        return f"bin/{rest}"
    return path
