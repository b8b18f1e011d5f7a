"""What puts an env's pip wheels back to the ones envkit recorded: the wheels pip installed, changed or removed since, and the conda packages a wheel wrote over."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.prefix.envrecord import EnvRecord, InstalledWheel
from envkit.prefix.installed import dist_files, pip_dists, requires
from envkit.prefix.pipurls import commit_shown, url_commit

if TYPE_CHECKING:
    from envkit.prefix.installed import PipDist


def pip_wheels(dists: dict[str, PipDist]) -> set[tuple[str, str]]:
    """(name, version) of what pip installed (conda's own python packages and editable installs
    left out: see PipDist.managed)."""
    return {(d.name, d.version) for d in dists.values() if d.managed}


def pip_state(prefix: Path) -> set[tuple[str, str]]:
    return pip_wheels(pip_dists(prefix))


def recorded_wheels(wheels: tuple[InstalledWheel, ...]) -> dict[tuple[str, str], str]:
    """(name, version) -> the file URL envkit installed it from ("" where unknown)."""
    return {(w.name, w.version): w.url for w in wheels}


def recorded_pip(record: EnvRecord) -> set[tuple[str, str]]:
    return set(recorded_wheels(record.pip_installed))


def moved_commits(record: EnvRecord, dists: dict[str, PipDist]) -> tuple[tuple[str, str, str, str | None], ...]:
    """(name, version, recorded URL, the commit there now; None for a wheel not from git): the
    recorded git wheels pip put at another commit since, the version the same (`pip install
    git+URL@OTHER`). A branch moves without a new version, so name and version cannot show it."""
    out = []
    for (name, version), url in sorted(recorded_wheels(record.pip_installed).items()):
        dist, commit = dists.get(name), url_commit(url)
        if commit and dist is not None and dist.managed and dist.version == version and dist.commit != commit:
            out.append((name, version, url, dist.commit))
    return tuple(out)


@dataclass(frozen=True)
class PipRepair:
    """What puts pip's wheels back to the ones envkit installed: a `pip install` or `pip uninstall`
    since is undone before the recipe's own pip changes are made, as conda packages are. A wheel
    pip installed over a conda package's files takes those files with it, so that package is
    linked again (the fix EK006 gives by hand)."""

    extra: tuple[tuple[str, str], ...] = ()  # (name, version): pip-installed since, or a recorded one changed
    missing: tuple[tuple[str, str, str], ...] = ()  # (name, version, url; "" where unknown): recorded, now gone or changed
    over: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (extra wheel, the conda packages whose files it overwrote)
    # (name, version): unrecorded wheels the recipe's pip list needs, kept and recorded now (an older
    # envkit's sync recorded only what pip newly installed when the list grew)
    adopt: tuple[tuple[str, str], ...] = ()
    # (name, version, recorded URL, commit there now): git wheels moved to another commit since,
    # each in `extra` (out) and in `missing` (back at the recorded commit) too
    moved: tuple[tuple[str, str, str, str | None], ...] = ()

    @property
    def needed(self) -> bool:
        return bool(self.extra or self.missing)

    @property
    def relink(self) -> tuple[str, ...]:
        """The conda packages to link again once the wheels over them are gone."""
        return tuple(sorted({conda for _, condas in self.over for conda in condas}))

    def lines(self) -> tuple[str, ...]:
        over = dict(self.over)
        back = {name for name, _, _ in self.missing}
        moved = {name: (version, url, now) for name, version, url, now in self.moved if name in back}
        return tuple(
            [
                f"- {name} {version} (pip-installed since"
                + (f"; over conda's {', '.join(over[name])}, linked again)" if over.get(name) else ")")
                for name, version in self.extra
                if name not in moved
            ]
            + [
                f"~ {name} {commit_shown(version, moved[name][2])} -> {commit_shown(version, url_commit(url))} (as envkit installed it)"
                if name in moved
                else f"+ {name} {version} (as envkit installed it)"
                for name, version, url in self.missing
            ]
            + [f"= {name} {version} (the recipe's pip list needs it; recorded now)" for name, version in self.adopt]
        )


def pip_repair(prefix: Path, record: EnvRecord, named: Callable[[], set[str]] | None = None) -> PipRepair:
    """From the env's dists and the record's `pip_installed`: recorded wheels come back from their
    exact URLs (hash included), or by name and version where the record kept no URL. `named`: the
    names the recipe's pip list gives (asked only when a wheel is unrecorded); an unrecorded wheel
    they need, by name or as a dependency, is the recipe's, not one pip-installed since."""
    wanted = recorded_wheels(record.pip_installed)
    recorded = {name for name, _ in wanted}
    dists = pip_dists(prefix)
    unrecorded = sorted((d.name, d.version) for d in dists.values() if d.managed and (d.name, d.version) not in wanted)
    needed = needed_wheels(prefix, dists, named()) if named and any(name not in recorded for name, _ in unrecorded) else set()
    adopt = [(name, version) for name, version in unrecorded if name not in recorded and name in needed]
    extra = [entry for entry in unrecorded if entry not in adopt]
    have = pip_wheels(dists)
    moved = moved_commits(record, dists)
    missing = [(name, version, url) for (name, version), url in sorted(wanted.items()) if (name, version) not in have]
    return PipRepair(
        extra=tuple(extra + [(name, version) for name, version, _, _ in moved]),
        missing=tuple(sorted(missing + [(name, version, url) for name, version, url, _ in moved])),
        over=_over_conda(prefix, [dists[name] for name, _ in extra]) if extra else (),
        adopt=tuple(adopt),
        moved=moved,
    )


def needed_wheels(prefix: Path, dists: dict[str, PipDist], named: set[str]) -> set[str]:
    """`named` and what their wheels require, transitively, among the env's pip-installed wheels."""
    seen: set[str] = set()
    todo = list(named)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in dists and dists[name].managed:
            todo.extend(requires(prefix, dists[name]))
    return seen


def _over_conda(prefix: Path, wheels: list[PipDist]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each wheel with the conda packages that list any of its files (conda-meta read once)."""
    import json

    owned = []
    for meta in (prefix / "conda-meta").glob("*.json"):
        try:
            data = json.loads(meta.read_bytes())
        except (OSError, ValueError):
            continue  # a record nobody can read is refused before this (sync) or named by EK022 (audit)
        files = data.get("files") if isinstance(data, dict) else None
        if isinstance(files, list) and isinstance(data.get("name"), str):
            owned.append((data["name"], set(files)))
    out = []
    for wheel in wheels:
        paths = set(dist_files(prefix, wheel))
        if owners := tuple(sorted(name for name, files in owned if not paths.isdisjoint(files))):
            out.append((wheel.name, owners))
    return tuple(out)
