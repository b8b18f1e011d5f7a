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
import os
import shlex
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from envkit import __version__
from envkit.prefix.envrecord import EnvRecord

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


def block(
    argv: list[str],
    added: Iterable[Linked],
    removed: Iterable[Linked],
    specs: Iterable[str],
    when: float | None = None,
    *,
    dropped: Iterable[str] = (),
) -> str:
    """One revision as conda writes it: the packages unlinked (-) and linked (+), the names whose
    request ends (`# remove specs:`) and the specs requested now (`# update specs:`). conda reads a
    block without a single +/- line as a complete list of the env's packages (an empty one here):
    callers write no block for a change that linked nothing."""
    lines = [
        f"==> {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(when))} <==",
        f"# cmd: {shlex.join(argv)}",
        f"# envkit version: {__version__}",
    ]
    lines += [f"-{d}" for d in sorted(p.dist() for p in removed)]
    lines += [f"+{d}" for d in sorted(p.dist() for p in added)]
    ending = list(dict.fromkeys(dropped))
    if ending:
        lines.append(f"# remove specs: {ending!r}")
    requested = list(dict.fromkeys(specs))
    if requested:
        lines.append(f"# update specs: {requested!r}")
    return "\n".join(lines) + "\n"


def spec_name(spec: str) -> str:
    """The package name a conda spec asks for (`mkl=2024.1.0`, `conda-forge::numpy >=2`, `libblas * *mkl`)."""
    head = spec.strip().split("::")[-1]
    for stop in " =<>!~[;":
        head = head.split(stop, 1)[0]
    return head.lower()


def linked_in(prefix: Path) -> set[Linked]:
    """The packages conda-meta's records say are linked, as the history names them."""
    out = set()
    for path in (prefix / "conda-meta").glob("*.json"):
        try:
            data = json.loads(path.read_bytes())
            out.add(Linked(str(data["channel"]), str(data["subdir"]), str(data["name"]), str(data["version"]), str(data["build"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a package record: the audit says so
    return out


def requested_specs(prefix: Path) -> dict[str, str]:
    """name -> spec, as conda works out an env's requested specs from its history
    (History.get_requested_specs_map): each block's `# remove specs:` names end their request,
    its `# update specs:` (and the older `# install specs:`) replace a name's spec."""
    try:
        text = history_path(prefix).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        kind = next((k for k in ("remove", "update", "install") if line.startswith(f"# {k} specs:")), None)
        if kind is None:
            continue
        specs = _spec_list(line.split(":", 1)[1])
        for spec in specs:
            if kind == "remove":
                out.pop(spec_name(spec), None)
            else:
                out[spec_name(spec)] = spec
    return out


def _spec_list(text: str) -> list[str]:
    """A `# ... specs:` line's list, as conda writes it (a Python list repr of strings)."""
    import ast

    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return []
    return [str(s) for s in value if str(s).strip()] if isinstance(value, list) else []


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
            names += [spec_name(s) for s in _spec_list(line.split(":", 1)[1])]
    return names


def unmet(asked: dict[str, str], specs: Iterable[str]) -> list[tuple[str, str | None]]:
    """(the request, the spec `specs` has for that name or None) for each of `asked` (name ->
    spec, requested_specs) that `specs` does not make as it is."""
    wanted = {spec_name(spec): spec for spec in specs}
    return [(spec, wanted.get(name)) for name, spec in sorted(asked.items()) if spec != wanted.get(name)]


def stale_requests(prefix: Path, record: EnvRecord) -> list[tuple[str, str | None]]:
    """unmet for the requests the history holds against the recipe's specs as the record keeps them."""
    if record.specs is None:
        return []
    return unmet(requested_specs(prefix), [s.spec for s in record.specs])


def not_an_env(prefix: Path) -> str | None:
    """Why conda does not take `prefix` for an env, or None where it does: conda's mark of an env
    is conda-meta/history (PREFIX_MAGIC_FILE), and an env with no package record has nothing in it."""
    from envkit.prefix.record import sync_journal_path

    meta = prefix / "conda-meta"
    if sync_journal_path(prefix).is_dir():
        return None  # a sync was interrupted halfway: the env is what its rollback makes of it
    if not (meta / "history").is_file():
        return "conda-meta/history is missing: conda says it is not a conda environment and its commands refuse it"
    try:
        if not any(name.endswith(".json") for name in os.listdir(meta)):
            return "conda-meta holds no package record: nothing is installed in it"
    except OSError:
        return None  # unreadable: the audit says so (EK030)
    return None


def created_at(prefix: Path) -> str | None:
    """When conda (or envkit) made the env, as an ISO date and time: conda-meta/created_at where
    conda 25.11+ wrote it, else the first revision of its history."""
    import datetime

    try:
        stamp = float((prefix / "conda-meta" / "created_at").read_text(encoding="utf-8").strip())
        return datetime.datetime.fromtimestamp(stamp, datetime.UTC).isoformat(timespec="seconds")
    except (OSError, ValueError, OverflowError):
        pass
    try:
        with history_path(prefix).open(encoding="utf-8", errors="replace") as handle:
            first = handle.readline().strip()
    except OSError:
        return None
    if first.startswith("==> ") and first.endswith(" <=="):
        try:
            when = datetime.datetime.strptime(first[4:-4], "%Y-%m-%d %H:%M:%S")
        except ValueError:
            return None
        return when.astimezone(datetime.UTC).isoformat(timespec="seconds")
    return None
