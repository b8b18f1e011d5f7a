"""conda-meta/history in conda's own format, so conda knows what the user asked for.

conda takes an env's requested specs from the `# update specs: [...]` lines of this file
(`History.get_requested_specs_map`) and keeps them through every later `conda install` and
`conda remove`. rattler leaves the file empty, and to conda an env with an empty history requested
nothing: `conda install blis` then `conda remove blis` pruned every other package. envkit writes
one block per change: the packages linked (+) and unlinked (-), and the specs it solved for,
toolchain pins included, so conda keeps honouring `mkl <2024.1` or `libblas * *mkl` afterwards.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from envkit import __version__

DEFAULT_ALIAS = "https://conda.anaconda.org/"


@dataclass(frozen=True)
class Linked:
    """A package as the history names it: channel/subdir::name-version-build."""

    channel: str
    subdir: str
    name: str
    version: str
    build: str

    def dist(self) -> str:
        channel = self.channel.rstrip("/")
        if channel.startswith(DEFAULT_ALIAS):  # conda writes anaconda.org channels by name
            channel = channel[len(DEFAULT_ALIAS) :]
        if not channel.endswith("/" + self.subdir):
            channel = f"{channel}/{self.subdir}"
        return f"{channel}::{self.name}-{self.version}-{self.build}"


def history_path(prefix: Path) -> Path:
    return prefix / "conda-meta" / "history"


def block(argv: list[str], added: Iterable[Linked], removed: Iterable[Linked], specs: Iterable[str], when: float | None = None) -> str:
    lines = [
        f"==> {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(when))} <==",
        f"# cmd: {shlex.join(argv)}",
        f"# envkit version: {__version__}",
    ]
    lines += [f"-{d}" for d in sorted(p.dist() for p in removed)]
    lines += [f"+{d}" for d in sorted(p.dist() for p in added)]
    requested = list(dict.fromkeys(specs))
    if requested:
        lines.append(f"# update specs: {requested!r}")
    return "\n".join(lines) + "\n"


def append_block(prefix: Path, text: str) -> None:
    """Appended like conda does; written before the env's record, so a crash leaves no record
    that claims more than the history says."""
    path = history_path(prefix)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)


def mark_created(prefix: Path, when: float | None = None) -> None:
    """conda-meta/created_at, as conda (25.11 and later) writes it with a new env's first history:
    the creation time as seconds since the epoch, which conda reads back for `conda env list
    --json`'s `created` where the filesystem keeps no birth time (Linux, before Python 3.15)."""
    path = prefix / "conda-meta" / "created_at"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(time.time() if when is None else when), encoding="utf-8")


def requested_names(prefix: Path) -> list[str]:
    """The package names the history's `# update specs:` / `# install specs:` lines asked for, in
    order (conda writes them as Python list reprs); none when there is no readable history."""
    try:
        text = history_path(prefix).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    names: list[str] = []
    for line in text.splitlines():
        if line.startswith(("# update specs:", "# install specs:")):
            try:
                specs = json.loads(line.split(":", 1)[1].strip().replace("'", '"'))
            except ValueError:
                continue
            names += [str(s).split()[0].split("=")[0].split("[")[0] for s in specs if str(s).strip()]
    return names
