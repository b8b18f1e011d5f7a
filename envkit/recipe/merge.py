"""`extends` composition: one explicit merge rule per field, child over parent.

| field                        | rule                                              |
|------------------------------|---------------------------------------------------|
| name, description, python    | scalar: child wins                                |
| extends                      | not inherited                                     |
| channels                     | child's order first, then parents' not yet listed |
| platforms                    | child replaces                                    |
| packages, pip                | keyed by package name: child replaces in place, new ones appended |
| toolchain, threading, probe  | mappings merge key by key (deep), scalars child wins |
| threading.env                | keyed by variable name: child's operation wins    |
| probe.imports, import_orders, force | union, first occurrence kept             |
| origins (where each field was set)  | child's over the parent's, name never inherited |
| per_platform                 | per platform, the child's entry merged over the parent's by these same rules |
"""

from __future__ import annotations

from typing import Any

from envkit.recipe.model import Spec
from envkit.recipe.schema import Layer


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


# radon cc 27: one merge rule per recipe field (replace, union, per-key), stated where it applies
def merge_layers(parent: Layer, child: Layer) -> Layer:
    """Return the layer `child` would be if it extended `parent`."""
    out: Layer = {}
    for key in ("name", "description", "python", "platforms"):
        if key in child:
            out[key] = child[key]
        elif key in parent and key != "name":
            out[key] = parent[key]
    if "channels" in child or "channels" in parent:
        out["channels"] = _union(child.get("channels", []), parent.get("channels", []))
    for key in ("packages", "pip"):
        if key in child or key in parent:
            out[key] = _by_name(parent.get(key, []), child.get(key, []))
    if "toolchain" in child or "toolchain" in parent:
        out["toolchain"] = _deep(parent.get("toolchain", {}), child.get("toolchain", {}))
    if "threading" in child or "threading" in parent:
        out["threading"] = _deep(parent.get("threading", {}), child.get("threading", {}))
    if "probe" in child or "probe" in parent:
        p, c = parent.get("probe", {}), child.get("probe", {})
        probe = _deep(p, c)
        for key in ("imports", "import_orders"):
            if key in p or key in c:
                probe[key] = _union(p.get(key, []), c.get(key, []))
        out["probe"] = probe
    if "force" in child or "force" in parent:
        out["force"] = _union(parent.get("force", []), child.get("force", []))
    if "per_platform" in child or "per_platform" in parent:
        platforms: dict[str, Layer] = dict(parent.get("per_platform", {}))
        for platform, entry in child.get("per_platform", {}).items():
            platforms[platform] = merge_layers(platforms[platform], entry) if platform in platforms else entry
        out["per_platform"] = platforms
    origins = {k: v for k, v in parent.get("origins", {}).items() if k != "name"}
    out["origins"] = {**origins, **child.get("origins", {})}
    return out
