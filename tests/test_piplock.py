"""Which pins of the lock being replaced a re-lock hands pip (the end-to-end runs are in test_lock.py)."""

from __future__ import annotations

from typing import Any

from envkit.piplock import needed_by_new, still_allowed


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
