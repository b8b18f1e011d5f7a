"""`extends` composition, child over parent: each field merged by its rule in the recipe's field
table (envkit.recipe.fields.TABLE, whose `merge` says how; docs/reference/recipe.md lists them).
Where each field was set (`origins`) is the child's over the parent's, the name's never inherited.
"""

from __future__ import annotations

from typing import Any

from envkit.recipe.checker import Layer
from envkit.recipe.fields import BY_PATH, TOP_KEYS, Merge, keys_of
from envkit.recipe.model import Spec

_ABSENT: Any = object()  # a field the layer does not set (None is a value a layer can hold)


def _union(first: list[Any], then: list[Any]) -> list[Any]:
    """Items of `first`, then those of `then` not yet there (items may be unhashable lists)."""
    out = list(first)
    for item in then:
        if item not in out:
            out.append(item)
    return out


def _by_name(parent: list[Spec], child: list[Spec]) -> list[Spec]:
    out = list(parent)
    index = {spec.name: i for i, spec in enumerate(out)}
    for spec in child:
        if spec.name in index:
            out[index[spec.name]] = spec
        else:
            index[spec.name] = len(out)
            out.append(spec)
    return out


def _deep(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    out = dict(parent)
    for key, value in child.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep(out[key], value)
        else:
            out[key] = value
    return out


def _merged(rule: Merge, parent: Any, child: Any, path: str) -> Any:
    """One field's value in the merged layer; _ABSENT where it has none."""
    if rule == "not merged":
        return _ABSENT
    if rule == "never inherited":
        return child
    if rule == "child wins":
        return parent if child is _ABSENT else child
    if rule == "child first":
        return _union(_or(child, []), _or(parent, []))
    if rule == "parent first":
        return _union(_or(parent, []), _or(child, []))
    if rule == "by name":
        return _by_name(_or(parent, []), _or(child, []))
    if rule == "per platform":
        platforms: dict[str, Layer] = dict(_or(parent, {}))
        for platform, entry in _or(child, {}).items():
            platforms[platform] = merge_layers(platforms[platform], entry) if platform in platforms else entry
        return platforms
    p, c = _or(parent, {}), _or(child, {})
    out = _deep(p, c)  # key by key; within it, the lists merged as their own fields say
    for key in keys_of(path):
        rule_of = BY_PATH[f"{path}.{key}"].merge
        if rule_of == "parent first" and (key in p or key in c):
            out[key] = _union(p.get(key, []), c.get(key, []))
    return out


def _or(value: Any, empty: Any) -> Any:
    return empty if value is _ABSENT else value


def merge_layers(parent: Layer, child: Layer) -> Layer:
    """Return the layer `child` would be if it extended `parent`."""
    out: Layer = {}
    for key in TOP_KEYS:
        if key in child or key in parent:
            value = _merged(BY_PATH[key].merge, parent.get(key, _ABSENT), child.get(key, _ABSENT), key)
            if value is not _ABSENT:
                out[key] = value
    origins = {k: v for k, v in parent.get("origins", {}).items() if k != "name"}
    out["origins"] = {**origins, **child.get("origins", {})}
    return out
