"""The checks every recipe field is made of: a type, a choice, a range, a spec, each failing into
the list of problems with the field's line, so that one run reports them all."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import rattler

from envkit.core.errors import Problem
from envkit.recipe.model import (
    Spec,
)
from envkit.recipe.yamlsource import PathKey, YamlDocument, dotted

MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
VERSIONISH_RE = re.compile(r"^[0-9][0-9A-Za-z.*_+!-]*$")

Layer = dict[str, Any]


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "mapping"}.get(
        type(value), type(value).__name__
    )


def lowered(value: object) -> object:
    """MKL reads MKL_THREADING_LAYER without regard to case; so does the recipe (GNU as in the variable)."""
    return value.lower() if isinstance(value, str) else value


def found(value: object) -> str:
    text = repr(value) if isinstance(value, str | int | float | bool) else _type_name(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Checker:
    """Checks values of one YAML document (or one per_platform entry of it), collecting problems."""

    def __init__(self, doc: YamlDocument, label: PathKey = (), problems: list[Problem] | None = None) -> None:
        self.doc = doc
        self.label = label  # where `doc` sits in the file (per_platform.osx-arm64), for messages
        self.problems: list[Problem] = problems if problems is not None else []

    def within(self, path: PathKey, value: object) -> Checker:
        """A checker for one sub-mapping (a per_platform entry): paths relative to it, problems
        shared, positions and messages those of the whole file."""
        n = len(path)
        positions = {p[n:]: loc for p, loc in self.doc.positions.items() if p[:n] == path}
        positions.setdefault((), self.doc.where(path))
        numbers = {p[n:]: text for p, text in self.doc.numbers.items() if p[:n] == path}
        return Checker(YamlDocument(self.doc.file, value, positions, numbers), (*self.label, *path), self.problems)

    def fail(self, path: PathKey, message: str) -> None:
        self.problems.append(Problem(self.doc.where(path), dotted((*self.label, *path)), message))

    def expect(self, path: PathKey, expected: str, value: object) -> None:
        self.fail(path, f"expected {expected}, found {found(value)}")

    def mapping(self, path: PathKey, value: object, allowed: tuple[str, ...]) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.expect(path, "a mapping", value)
            return None
        for key in value:
            if key not in allowed:
                import difflib  # a suggestion: only for a name that is wrong

                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else f" (allowed: {', '.join(allowed)})"
                self.fail((*path, key), f"unknown key '{key}'{hint}")
        return value

    def spec_text(self, path: PathKey, value: object) -> str | None:
        """A package requirement: text only. A number in a package list is a slip (`- 1.26` under
        numpy, or 3.10 that YAML reads as 3.1), never a package name."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            self.fail(
                path, f'expected a requirement string, found number {value!r} (a version belongs in its package\'s spec: "numpy 1.26")'
            )
            return None
        return self.string(path, value)

    def string(self, path: PathKey, value: object) -> str | None:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            self.expect(path, "a string", value)
            return None
        if isinstance(value, float) and path[-1] in ("python", "mkl", "version", "cuda", "cuda_arch"):
            # 3.10 read as a float becomes 3.1: refuse rather than silently change the meaning.
            written = self.doc.numbers.get(path, repr(value))
            read = "" if written == repr(value) else f", which YAML reads as {value!r}"
            self.fail(path, f'expected a quoted string, found number {written}{read} (write it as "{written}")')
            return None
        return str(value)

    def choice(self, path: PathKey, value: object, choices: tuple[str, ...]) -> str | None:
        if not isinstance(value, str) or value not in choices:
            import difflib  # a suggestion: only for a name that is wrong

            close = difflib.get_close_matches(str(value), choices, n=1) if isinstance(value, str) else []
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            self.fail(path, f"expected one of {'|'.join(choices)}, found {found(value)}{hint}")
            return None
        return value

    def integer(self, path: PathKey, value: object, low: int, high: int, expected: str) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.expect(path, expected, value)
            return None
        return value

    def version_spec(self, path: PathKey, value: object) -> str | None:
        """A conda version spec such as "<2024.1" or "2.5.*"."""
        text = self.string(path, value)
        if text is None:
            return None
        try:
            rattler.VersionSpec(text)
        except Exception as exc:  # rattler raises its own exception types
            self.fail(path, f"invalid version spec {text!r}: {first_line(exc)}")
            return None
        return text

    def str_list(self, path: PathKey, value: object, item: Callable[[PathKey, object], Any]) -> list[Any] | None:
        if isinstance(value, str):
            value = [value]
            single = True
        else:
            single = False
        if not isinstance(value, list):
            self.expect(path, "a list", value)
            return None
        out = []
        for index, entry in enumerate(value):
            checked = item(path if single else (*path, index), entry)
            if checked is not None:
                out.append(checked)
        return out

    def count(self, path: PathKey, value: object) -> int | str | None:
        if value == "physical-cores":
            return "physical-cores"
        return self.integer(path, value, 1, 4096, "a positive integer or 'physical-cores'")


def spec_name(match: rattler.MatchSpec) -> str:
    """The package a MatchSpec names ("" or a pattern when it names none exactly)."""
    return getattr(match.name, "normalized", None) or str(match.name)


def conda_spec(text: str) -> Spec:
    """Parse a conda MatchSpec the lenient way users write them and return its strict form."""
    match = rattler.MatchSpec(text, strict=False)
    name = spec_name(match)
    if not name or any(ch in name for ch in "*?[]"):
        raise ValueError("a package spec must name one package exactly")
    normalized = str(match)
    rattler.MatchSpec(normalized, strict=True)
    return Spec(text=text, name=name, normalized=normalized)


def pip_spec(text: str) -> Spec:
    """Raises packaging's InvalidRequirement (a ValueError) for a bad one."""
    from packaging.requirements import Requirement  # costs ~50 ms: loaded for recipes with pip lists only
    from packaging.utils import canonicalize_name

    req = Requirement(text)
    return Spec(text=text, name=canonicalize_name(req.name), normalized=str(req))


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def python_spec(py: str) -> str:
    text = f"python={py}" if VERSIONISH_RE.match(py) else f"python {py}"
    return str(rattler.MatchSpec(text, strict=False))
