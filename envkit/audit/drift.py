"""What changed in an env since envkit installed it (conda install, pip install, a removal), one line each."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.core.changes import diff_packages
from envkit.pip.repair import moved_commits, pip_wheels, recorded_pip
from envkit.prefix.pipurls import commit_shown, url_commit

if TYPE_CHECKING:
    from envkit.prefix.envrecord import EnvRecord
    from envkit.prefix.installed import CondaPackage, PipDist


def drift(record: EnvRecord, packages: dict[str, CondaPackage], pip: dict[str, PipDist]) -> list[str]:
    """What changed since envkit installed the env (conda install, pip install, a removal), one line
    each, from conda-meta's packages and the env's pip dists. An env envkit only fixed (audit --fix)
    has no package list to drift from."""
    if record.packages is None:
        return []
    recorded = {p.name: f"{p.version} {p.build}" for p in record.packages}
    installed = {name: f"{p.version} {p.build}" for name, p in packages.items()}
    pip_installed = pip_wheels(pip)
    lines = []
    for change in diff_packages(recorded, installed):
        if change.kind == "added":
            lines.append(f"+ {change.name} {change.new} (added since envkit installed the env)")
        elif change.kind == "removed":
            lines.append(f"- {change.name} {change.old} (removed since)")
        else:
            lines.append(f"~ {change.name} {change.old} -> {change.new} (changed since)")
    for name, version in sorted(pip_installed - recorded_pip(record)):
        lines.append(f"+ pip {name} {version} (pip-installed since)")
    for name, version in sorted(recorded_pip(record) - pip_installed):
        lines.append(f"- pip {name} {version} (removed or changed since)")
    for name, version, url, now in moved_commits(record, pip):
        lines.append(f"~ pip {name} {commit_shown(version, url_commit(url))} -> {commit_shown(version, now)} (changed since)")
    return lines
