"""PyYAML's safe loader with integers bounded: every YAML envkit reads (recipes, .condarc) goes
through it. Python refuses to turn more than 4,300 digits into an int (CVE-2020-10735) with a
ValueError that PyYAML does not catch; here such a number is a YAML error at its line, as any
other malformed value is. No setting envkit or conda reads needs more than a few digits."""

from __future__ import annotations

from typing import Any

import yaml

MAX_INT_DIGITS = 100


class BoundedSafeLoader(yaml.SafeLoader):
    """SafeLoader whose integers have at most MAX_INT_DIGITS digits."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> Any:
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of {digits} digits (at most {MAX_INT_DIGITS}); quote it if it is text", node.start_mark
            )
        return super().construct_yaml_int(node)


BoundedSafeLoader.add_constructor("tag:yaml.org,2002:int", BoundedSafeLoader.construct_yaml_int)


def safe_load(text: str) -> Any:
    """yaml.safe_load with bounded integers."""
    return yaml.load(text, Loader=BoundedSafeLoader)  # noqa: S506 - a SafeLoader subclass
