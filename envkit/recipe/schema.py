"""Validate one recipe file into a layer of checked values, collecting every problem at once.

A layer is a dict holding only the fields the file sets; merging layers (extends) happens later
with an explicit rule per field, see merge.py.
"""

from __future__ import annotations

import re
from typing import Any

from envkit.core.credentials import credentials_in, where_credentials_go
from envkit.core.errors import Location, Problem
from envkit.core.names import NAME_RE, is_relative_path
from envkit.recipe.checker import Checker, Layer, conda_spec, first_line, found, pip_spec, python_spec
from envkit.recipe.fields import FIELDS, PLATFORM_KEYS, TOP_KEYS
from envkit.recipe.model import (
    KNOWN_PLATFORMS,
    MACHINE_KIND,
    SCHEMA_VERSION,
    Spec,
)
from envkit.recipe.sections import probe_section, threading_section, toolchain_section
from envkit.recipe.yamlsource import PathKey, YamlDocument, dotted

__all__ = ["FIELDS", "TOP_KEYS", "Layer", "validate_layer"]


def validate_layer(doc: YamlDocument) -> tuple[Layer, list[Problem]]:
    """Check every field of one file; return what is valid plus every problem found."""
    c = Checker(doc)
    layer: Layer = {}
    root = c.mapping((), doc.data, TOP_KEYS)
    if root is None:
        return layer, c.problems
    if "envkit" not in root:
        c.fail((), f"missing 'envkit: {SCHEMA_VERSION}' (the recipe schema version)")
    elif type(root["envkit"]) is not int or root["envkit"] != SCHEMA_VERSION:  # 1.0 and true are not 1
        c.fail(("envkit",), f"unsupported schema version {found(root['envkit'])}; this envkit reads version {SCHEMA_VERSION}")
    if "name" not in root:
        c.fail((), "missing 'name'")
    else:
        name = root["name"]
        if not isinstance(name, str) or not NAME_RE.match(name):
            c.expect(("name",), "a lowercase identifier ([a-z0-9][a-z0-9_-]*)", name)
        else:
            layer["name"] = name
    if "description" in root:
        desc = root["description"]
        if isinstance(desc, str):
            layer["description"] = desc.strip()
        else:
            c.expect(("description",), "a string", desc)
    if "extends" in root:

        def _parent(path: PathKey, value: object) -> str | None:
            if not isinstance(value, str) or not NAME_RE.match(value):
                c.expect(path, "a recipe name", value)
                return None
            return value

        parents = c.str_list(("extends",), root["extends"], _parent)
        if parents is not None:
            layer["extends"] = parents
    if "channels" in root:

        def _channel(path: PathKey, value: object) -> str | None:
            if not isinstance(value, str) or not value.strip() or any(ch.isspace() for ch in value):
                c.expect(path, "a channel name or URL", value)
                return None
            if held := credentials_in(value):
                c.fail(
                    path,
                    f"the channel URL holds {held}, which every lock, record and export of this recipe would publish; {where_credentials_go(value)}",
                )
                return None
            if is_relative_path(value):  # rattler took './ch' for the channel named 'ch' on anaconda.org
                c.fail(
                    path,
                    f"'{value}' is a path relative to the working directory or a home folder, so it names another "
                    "channel on each machine; give a channel name, a URL or an absolute path",
                )
                return None
            return value.rstrip("/")

        channels = c.str_list(("channels",), root["channels"], _channel)
        if channels is not None:
            layer["channels"] = channels
    if "platforms" in root:
        platforms = c.str_list(("platforms",), root["platforms"], lambda p, v: c.choice(p, v, KNOWN_PLATFORMS))
        if platforms is not None:
            _each_platform_once(c, root["platforms"])
            layer["platforms"] = platforms
    _platform_fields(c, root, layer)
    if "per_platform" in root:
        layer["per_platform"] = _per_platform(c, root["per_platform"])
    _policy_fields(c, root, layer)
    layer["origins"] = _origins(doc, layer)
    return layer, c.problems


def _policy_fields(c: Checker, root: dict[str, Any], layer: Layer) -> None:
    """What the recipe asks of CI and accepts of the rules: require_proof, force."""
    if "require_proof" in root:
        kinds = c.str_list(("require_proof",), root["require_proof"], lambda p, v: _machine_kind(c, p, v))
        if kinds is not None:
            layer["require_proof"] = kinds
    if "force" in root:

        def _rule(path: PathKey, value: object) -> str | None:
            if not isinstance(value, str) or not re.match(r"^[A-Z]{2,4}\d{3}$", value):
                c.expect(path, "a consistency rule id such as RC004", value)
                return None
            return value

        forced = c.str_list(("force",), root["force"], _rule)
        if forced is not None:
            layer["force"] = forced


def _machine_kind(c: Checker, path: PathKey, value: object) -> str | None:
    found_kind = MACHINE_KIND.fullmatch(value) if isinstance(value, str) else None
    if found_kind is None:
        c.expect(path, "a machine kind such as linux-64, linux-64+cuda or linux-64+cuda_arch=9.0", value)
        return None
    if found_kind.group("platform") not in KNOWN_PLATFORMS:
        return c.choice(path, found_kind.group("platform"), KNOWN_PLATFORMS)
    return str(value)


def _platform_fields(c: Checker, root: dict[str, Any], layer: Layer) -> None:
    """The fields a per_platform entry may also set: python, packages, pip, toolchain, threading, probe."""
    doc = c.doc
    if "python" in root:
        py = c.string(("python",), root["python"])
        if py is not None:
            try:
                python_spec(py)
                layer["python"] = py
            except Exception as exc:  # rattler raises its own exception types
                c.fail(("python",), f"invalid python version {py!r}: {first_line(exc)}")
    if "packages" in root:

        def _conda(path: PathKey, value: object) -> Spec | None:
            text = c.spec_text(path, value)
            if text is None:
                return None
            try:
                spec = conda_spec(text)
            except Exception as exc:
                c.fail(path, f"invalid conda spec {text!r}: {first_line(exc)}")
                return None
            return Spec(spec.text, spec.name, spec.normalized, doc.where(path))

        packages = c.str_list(("packages",), root["packages"], _conda)
        if packages is not None:
            _no_duplicate_names(c, ("packages",), packages)
            layer["packages"] = packages
    if "pip" in root:

        def _pip(path: PathKey, value: object) -> Spec | None:
            text = c.spec_text(path, value)
            if text is None:
                return None
            try:
                spec = pip_spec(text)
            except ValueError as exc:  # packaging's InvalidRequirement
                c.fail(path, f"invalid PEP 508 requirement {text!r}: {first_line(exc)}")
                return None
            return Spec(spec.text, spec.name, spec.normalized, doc.where(path))

        pips = c.str_list(("pip",), root["pip"], _pip)
        if pips is not None:
            _no_duplicate_names(c, ("pip",), pips)
            layer["pip"] = pips
    if "toolchain" in root:
        layer["toolchain"] = toolchain_section(c, root["toolchain"])
    if "threading" in root:
        layer["threading"] = threading_section(c, doc, root["threading"])
    if "probe" in root:
        layer["probe"] = probe_section(c, root["probe"])


def _per_platform(c: Checker, value: object) -> dict[str, Layer]:
    out: dict[str, Layer] = {}
    entries = c.mapping(("per_platform",), value, KNOWN_PLATFORMS)
    for platform, entry in (entries or {}).items():
        if platform not in KNOWN_PLATFORMS:
            continue
        sub = c.within(("per_platform", platform), entry)
        fields = sub.mapping((), entry, PLATFORM_KEYS)
        if fields is None:
            continue
        layer: Layer = {}
        _platform_fields(sub, fields, layer)
        layer["origins"] = _origins(sub.doc, layer)
        out[platform] = layer
    return out


# Fields whose value becomes a spec or a setting: errors and solver hints point at their line.
ORIGIN_FIELDS: tuple[PathKey, ...] = (
    ("name",),
    ("python",),
    ("channels",),
    ("platforms",),
    ("toolchain", "blas"),
    ("toolchain", "mkl"),
    ("toolchain", "openmp"),
    ("toolchain", "pytorch"),
    ("toolchain", "pytorch", "version"),
    ("toolchain", "pytorch", "variant"),
    ("toolchain", "pytorch", "cuda"),
    ("toolchain", "pytorch", "cuda_arch"),
    ("toolchain", "pytorch", "source"),
    ("threading", "mkl_threading_layer"),
    ("threading", "omp_num_threads"),
    ("threading", "mkl_num_threads"),
    ("threading", "openblas_num_threads"),
)


def _origins(doc: YamlDocument, layer: Layer) -> dict[str, Location]:
    out = {}
    for path in ORIGIN_FIELDS:
        value: Any = layer
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None and path in doc.positions:
            out[dotted(path)] = doc.positions[path]
    return out


def _no_duplicate_names(c: Checker, path: PathKey, specs: list[Spec]) -> None:
    seen: dict[str, int] = {}
    for index, spec in enumerate(specs):
        if spec.name in seen:
            c.fail((*path, index), f"'{spec.name}' is listed twice (also item {seen[spec.name]}); keep one spec per package")
        seen[spec.name] = index


def _each_platform_once(c: Checker, value: object) -> None:
    """A platform listed twice is locked and checked twice, and an empty list reads as "none" while
    envkit would take it as "the machine it runs on" (what leaving the key out says): both refused."""
    if value == []:
        c.fail(("platforms",), "an empty list; name the platforms the recipe is for, or leave 'platforms' out for the machine it runs on")
    seen: dict[str, int] = {}
    for index, entry in enumerate(value if isinstance(value, list) else []):
        if isinstance(entry, str) and entry in seen:
            c.fail(("platforms", index), f"'{entry}' is listed twice (also item {seen[entry]}); list each platform once")
        seen.setdefault(str(entry), index)
