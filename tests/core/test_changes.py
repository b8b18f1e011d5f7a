"""The one comparison behind a sync's difference, drift and a re-lock's changes."""

from __future__ import annotations

from envkit.core.changes import MARKS, change_text, differences


def test_differences_name_each_added_removed_and_changed_package_in_name_order() -> None:
    old = {"numpy": "1.26 0", "helper": "1.0 0", "same": "1 0"}
    new = {"numpy": "2.0 0", "tqdm": "4.0 0", "same": "1 0"}
    assert differences(old, new) == [
        ("helper", "removed", "1.0 0", None),
        ("numpy", "changed", "1.26 0", "2.0 0"),
        ("tqdm", "added", None, "4.0 0"),
    ]
    assert [f"{MARKS[k]} {n} {change_text(k, o, v)}" for n, k, o, v in differences(old, new)] == [
        "- helper 1.0 0",
        "~ numpy 1.26 0 -> 2.0 0",
        "+ tqdm 4.0 0",
    ]
    assert differences(old, dict(old)) == []
