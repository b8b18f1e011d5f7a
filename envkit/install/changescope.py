"""What an interrupted sync may have written into an env: the only new entries its rollback removes.

A rollback must not take a file the user put into the env after the sync began (notes, a script in
bin/, data under share/). The journal keeps the change's own description (CHANGE): the package
builds it links, where noarch python lands, and the pip wheels it installs. At rollback time an
entry that was not in the env before the sync is removed only when that description accounts for
it: a path of a linked package as rattler links it (its extracted copy in the package cache says
which), the bytecode Python compiled beside such a file, a noarch entry point, a clobber rename,
rattler's symlink and reflink probes, anything new in conda-meta (the records and the installer's
drafts of them), or a file of a wheel the sync installed (its RECORD, its dist-info folder, or the
top-level folder named as the wheel). Everything else stays and is named.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from envkit.install.linkscope import cached_paths

CHANGE = "change.json"  # {"dists": ["name-version-build", ...], "site_packages": str | null, "wheels": [name, ...]}
CLOBBER_MARK = "__clobber-from-"  # rattler's name for the loser of a clobber, beside the winner


@dataclass(frozen=True)
class ChangeScope:
    """The journal's record of what a sync set out to write."""

    dists: tuple[str, ...]  # the package builds the env is linked to, "name-version-build"
    site_packages: str | None  # where noarch: python packages land, relative to the prefix
    wheels: tuple[str, ...]  # the pip wheels the sync may install, canonical names

    def to_json(self) -> str:
        return json.dumps({"dists": list(self.dists), "site_packages": self.site_packages, "wheels": list(self.wheels)})

    @classmethod
    def read(cls, journal: Path) -> ChangeScope | None:
        """The scope a journal keeps; None where it keeps none or a damaged one (nothing is then
        accounted for, so no new entry is removed)."""
        try:
            data = json.loads((journal / CHANGE).read_text(encoding="utf-8"))
            dists = tuple(str(d) for d in data["dists"])
            wheels = tuple(str(w) for w in data["wheels"])
            site = data["site_packages"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return cls(dists, str(site) if isinstance(site, str) else None, wheels)


# rattler's check that the prefix takes symlinks (can_create_symlinks): a link to "./" named
# symtest_<uuid4> at the prefix's top, removed at once unless the installer is killed in between
_SYMLINK_PROBE = re.compile(r"symtest_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
# rattler's check that the prefix takes reflinks (probe_reflink_support): a folder .refprobe-XXXXXX
# at the prefix's top holding `src` (the bytes below, or fewer while being written) and its reflink
# `dst`, removed at once unless the installer is killed in between
_REFLINK_PROBE = re.compile(r"\.refprobe-[A-Za-z0-9]{6}/(src|dst)")
_REFLINK_PROBE_BYTES = b"reflink probe"


class Accounted:
    """Answers whether a path (relative to the prefix) is one the change may have written."""

    def __init__(self, prefix: Path, cache: Path, scope: ChangeScope | None) -> None:
        self._prefix = prefix
        self._paths: set[str] = set()
        self._records: set[str] = set()
        self._wheels: set[str] = set()
        self._site = scope.site_packages if scope else None
        if scope is None:
            return
        self._wheels = {_normal(w) for w in scope.wheels}
        for dist in scope.dists:
            self._records.add(f"conda-meta/{dist}.json")
            extracted = cache / dist
            self._paths.update(cached_paths(extracted, scope.site_packages) or ())
            self._paths.update(_entry_points(extracted))
        if self._site:
            self._paths.update(_wheel_files(prefix, self._site, self._wheels))

    def __contains__(self, rel: str) -> bool:
        if rel in self._paths or rel in self._records or CLOBBER_MARK in rel.rsplit("/", 1)[-1]:
            return True
        if _SYMLINK_PROBE.fullmatch(rel) and _links_to_itself(self._prefix / rel):
            return True
        if _REFLINK_PROBE.fullmatch(rel) and _is_reflink_probe(self._prefix / rel):
            return True
        if rel.startswith("conda-meta/") and "/" not in rel[len("conda-meta/") :]:
            return True  # the package manager's own folder: records and the installer's drafts of them, never a user's file
        folder, _, name = rel.rpartition("/")
        if folder.endswith("__pycache__") and name.endswith(".pyc"):  # bytecode of a file the change linked
            source = folder.rpartition("__pycache__")[0] + name.split(".", 1)[0] + ".py"
            if source in self._paths:
                return True
        if self._site and rel.startswith(self._site + "/"):
            top = rel[len(self._site) + 1 :].split("/", 1)[0]
            return _wheel_folder(top) in self._wheels
        return False


def _entry_points(extracted: Path) -> Iterable[str]:
    """bin/NAME for each entry point a noarch: python package declares (rattler writes them)."""
    try:
        link = json.loads((extracted / "info" / "link.json").read_text(encoding="utf-8"))
        points = link.get("noarch", {}).get("entry_points", [])
    except (OSError, ValueError, AttributeError):
        return ()
    names = [str(p).split("=", 1)[0].strip() for p in points if isinstance(p, str)]
    return [f"bin/{n}" for n in names if n] + [f"Scripts/{n}{ext}" for n in names if n for ext in (".exe", "-script.py")]


def _wheel_folder(top: str) -> str:
    """The distribution name a top-level entry of site-packages stands for: `tqdm`,
    `tqdm-4.66.dist-info`, `tqdm.py`."""
    for suffix in (".dist-info", ".data"):
        if top.endswith(suffix):
            return _normal(top[: -len(suffix)].split("-", 1)[0])
    return _normal(top.removesuffix(".py"))


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _wheel_files(prefix: Path, site: str, wheels: set[str]) -> set[str]:
    """The files the RECORD of each wheel of `wheels` lists (bin/ scripts among them)."""
    out: set[str] = set()
    folder = prefix / site
    try:
        infos = [e for e in os.scandir(folder) if e.name.endswith(".dist-info") and _wheel_folder(e.name) in wheels]
    except OSError:
        return out
    for info in infos:
        try:
            text = Path(info.path, "RECORD").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            rel = line.split(",", 1)[0]
            inside = os.path.normpath(os.path.join(site, rel)) if rel else ""
            if inside and not inside.startswith(("..", "/")):
                out.add(inside)
    return out


def _links_to_itself(path: Path) -> bool:
    try:
        return os.readlink(path) == "./"
    except OSError:
        return False


def _is_reflink_probe(path: Path) -> bool:
    """A file of rattler's reflink probe: a plain file holding a start of its fixed bytes."""
    try:
        if path.is_symlink() or path.stat().st_size > len(_REFLINK_PROBE_BYTES):
            return False
        return _REFLINK_PROBE_BYTES.startswith(path.read_bytes())
    except OSError:
        return False
