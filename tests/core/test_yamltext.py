"""YAML written as text reads back with PyYAML (conda-lock's reader) as it was written."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from envkit.core.yamltext import quoted, text

ANY_TEXT = st.text(st.characters(codec="utf-8"))  # UTF-8: no lone surrogates, every other character


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT)
def test_a_quoted_scalar_reads_back_as_itself(value: str) -> None:
    assert yaml.safe_load(f"key: {quoted(value)}\n") == {"key": value}


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT)
def test_a_comment_stays_on_its_line(value: str) -> None:
    assert yaml.safe_load(text([f"# made from {value}", "key: 1"])) == {"key": 1}


def test_what_json_escaped_wrongly_and_what_yaml_refuses() -> None:
    assert quoted("\U0001f600") == '"\U0001f600"'  # JSON: "\ud83d\ude00", two characters to YAML
    assert quoted("a\u2028b\x85c\x1e\ufeff") == '"a\\u2028b\\x85c\\x1e\\ufeff"'
    assert quoted('say "\\no"') == '"say \\"\\\\no\\""'
