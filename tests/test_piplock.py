"""Which pins of the lock being replaced a re-lock hands pip (the end-to-end runs are in test_lock.py)."""

from __future__ import annotations

from envkit.piplock import still_allowed


def test_a_pin_is_let_go_only_where_a_spec_of_its_name_rules_it_out() -> None:
    specs = ("mpmath <2", "alpha", 'beta[x] >=2; python_version > "3"', "gamma @ file:///wheels/gamma-1-py3-none-any.whl", "-e ./local")
    keep = (("mpmath", "9.9"), ("alpha", "1.0"), ("beta", "1.5"), ("Beta", "2.1"), ("gamma", "1"), ("delta", "3"), ("mpmath", "1.3rc1"))
    # delta: a dependency no spec names, kept; gamma: taken from its URL, whatever the pin; a
    # pre-release pin stays where the range holds it
    assert still_allowed(specs, keep) == (("alpha", "1.0"), ("Beta", "2.1"), ("delta", "3"), ("mpmath", "1.3rc1"))
    assert still_allowed((), keep) == keep
