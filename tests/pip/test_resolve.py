"""Which pins of the lock being replaced a re-lock hands pip (the end-to-end runs are in test_lock.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from envkit.pip.pinned import LockedPip
from envkit.pip.resolve import PIP_FOR_TARGET, at_locked_commits, marker_environment, needed_by_new, still_allowed, vcs_source


def test_a_pin_is_let_go_only_where_a_spec_of_its_name_rules_it_out() -> None:
    specs = ("mpmath <2", "alpha", 'beta[x] >=2; python_version > "3"', "gamma @ file:///wheels/gamma-1-py3-none-any.whl", "-e ./local")
    keep = (("mpmath", "9.9"), ("alpha", "1.0"), ("beta", "1.5"), ("Beta", "2.1"), ("gamma", "1"), ("delta", "3"), ("mpmath", "1.3rc1"))
    # delta: a dependency no spec names, kept; gamma: taken from its URL, whatever the pin; a
    # pre-release pin stays where the range holds it
    assert still_allowed(specs, keep) == (("alpha", "1.0"), ("Beta", "2.1"), ("delta", "3"), ("mpmath", "1.3rc1"))
    assert still_allowed((), keep) == keep


def _item(name: str, *requires: str) -> dict[str, Any]:
    """An entry of pip's --report as pip writes it (the fields this reads)."""
    return {"metadata": {"name": name, "version": "1", "requires_dist": list(requires)}}


def test_the_pins_a_new_requirement_needs_are_followed_down_its_requirements() -> None:
    fresh = [
        _item("newcomer", "common >=2", "speedup; extra == 'fast'", 'docs-theme; extra == "docs"'),
        _item("common", "base"),
        _item("base"),
        _item("speedup", "cffi"),
        _item("cffi"),
        _item("alpha", "base"),
        _item("docs-theme"),
    ]
    keep = (("alpha", "1"), ("common", "1"), ("base", "1"), ("cffi", "1"), ("docs-theme", "1"))
    # alpha is pinned and its spec is not new: what it needs is reached only through newcomer
    assert needed_by_new(("alpha", "newcomer"), keep, fresh) == {"newcomer", "common", "base"}
    assert needed_by_new(("alpha", "newcomer[Fast]"), keep, fresh) == {"newcomer", "common", "base", "speedup", "cffi"}
    assert needed_by_new(("alpha",), keep, fresh) == set()


def test_a_git_reference_is_held_at_the_commit_the_lock_has_from_that_repository() -> None:
    sha = "4a4a99ba1801e0e40cd85c54c9f58942ddf6508c"
    locked = (
        LockedPip("proj", "0.1", f"git+https://git.example/team/proj@{sha}"),
        LockedPip("tool", "2.0", f"git+ssh://git@git.example/team/mono@{sha}#subdirectory=tool"),
        LockedPip("other", "1.0", f"git+https://git.example/team/other@{sha}"),
        LockedPip("mpmath", "1.3.0", "https://files.example/mpmath-1.3.0-py3-none-any.whl#sha256=ab"),
    )
    specs = (
        'Proj[cli] @ git+https://git.example/team/proj@main ; python_version >= "3"',
        "tool @ git+ssh://git@git.example/team/mono@v2#subdirectory=tool",
        "other @ git+https://git.example/team/fork-of-other@main",  # another repository: resolved afresh
        "mpmath",
        "-e ./local",
    )
    assert at_locked_commits(specs, locked) == (
        f'Proj[cli] @ git+https://git.example/team/proj@{sha} ; python_version >= "3"',
        f"tool @ git+ssh://git@git.example/team/mono@{sha}#subdirectory=tool",
        "other @ git+https://git.example/team/fork-of-other@main",
        "mpmath",
        "-e ./local",
    )
    assert vcs_source("git+ssh://git@host/r@abc#subdirectory=s") == ("git+ssh://git@host/r", "s")
    assert vcs_source("https://host/r@abc") is None


def test_a_pip_that_cannot_take_a_targets_markers_fails_rather_than_resolve_for_this_machine() -> None:
    """No pip importable (`-S`: no site-packages): one line saying why, never a resolve that
    quietly evaluates markers for this machine."""
    ran = subprocess.run(
        [sys.executable, "-S", "-c", PIP_FOR_TARGET, json.dumps(marker_environment("win-64", "3.12.4")), "install", "x"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 1
    assert ran.stderr.startswith("this pip cannot resolve for another platform's environment markers"), ran.stderr
    assert marker_environment("osx-arm64", "3.12") == marker_environment("osx-arm64", "3.12.0")
    assert marker_environment("win-64", "3.12.4")["platform_machine"] == "AMD64"
