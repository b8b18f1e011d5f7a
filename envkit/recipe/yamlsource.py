"""Load YAML safely and remember where every value sits, so errors can say file:line:col.

A document parsed once is kept (envkit.yamlcache) and PyYAML is not imported again until a recipe
changes; a change to what a parse yields here (the positions, the checks) must bump
yamlcache.FORMAT."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envkit import yamlcache
from envkit.errors import Location, Problem, RecipeError

if TYPE_CHECKING:
    import yaml

PathKey = tuple[str | int, ...]

STR_TAG = "tag:yaml.org,2002:str"
# Recipes are small; a document whose node walk passes this is an alias bomb or junk.
MAX_NODES = 20_000
MAX_BYTES = 1_000_000


@dataclass(frozen=True)
class YamlDocument:
    """Plain data plus a side table of positions keyed by the path to each value."""

    file: str
    data: Any
    positions: dict[PathKey, Location]

    def where(self, path: PathKey) -> Location:
        """The position of `path`, or of its nearest ancestor that has one."""
        probe = tuple(path)
        while probe:
            if probe in self.positions:
                return self.positions[probe]
            probe = probe[:-1]
        return self.positions.get((), Location(self.file, 1, 1))


def _loc(file: str, node: yaml.Node) -> Location:
    return Location(file, node.start_mark.line + 1, node.start_mark.column + 1)


def load_yaml(text: str, file: str) -> YamlDocument:
    """Parse one YAML document with the safe loader; every failure is a RecipeError."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise RecipeError([Problem(Location(file, 1, 1), "", f"file is larger than {MAX_BYTES} bytes")])
    kept = yamlcache.recall("recipe", text)
    document = _from_kept(kept[0], file) if kept else None
    if document is not None:
        return document
    document = _parse(text, file)
    positions = [[list(path), where.line, where.col] for path, where in document.positions.items()]
    yamlcache.keep("recipe", text, {"data": document.data, "positions": positions})
    return document


def _from_kept(kept: Any, file: str) -> YamlDocument | None:
    """A kept parse as the parser gave it, with this file's name in its positions; None if it is not
    exactly what `load_yaml` keeps."""
    if not isinstance(kept, dict) or "data" not in kept or not isinstance(kept.get("positions"), list):
        return None
    positions: dict[PathKey, Location] = {}
    for entry in kept["positions"]:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], list)):
            return None
        path, line, col = entry
        if not all(isinstance(p, (str, int)) and not isinstance(p, bool) for p in path):
            return None
        if not (type(line) is int and type(col) is int):
            return None
        positions[tuple(path)] = Location(file, line, col)
    return YamlDocument(file, kept["data"], positions)


def _parse(text: str, file: str) -> YamlDocument:
    import yaml  # ~15 ms: only for text no earlier command parsed (envkit.yamlcache)

    try:
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError as exc:
        raise RecipeError([Problem(Location(file, 1, 1), "", f"invalid YAML: {str(exc).splitlines()[0]}")]) from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise RecipeError([Problem(Location(file, 1, 1), "", "empty document: expected a mapping")])
        positions: dict[PathKey, Location] = {}
        _walk(node, (), file, positions, [0])
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = Location(file, mark.line + 1, mark.column + 1) if mark else Location(file, 1, 1)
        reason = (exc.problem or exc.context or "invalid YAML").strip()
        raise RecipeError([Problem(loc, "", f"invalid YAML: {reason}")]) from None
    except yaml.YAMLError as exc:
        raise RecipeError([Problem(Location(file, 1, 1), "", f"invalid YAML: {exc}")]) from None
    except RecursionError:
        raise RecipeError([Problem(Location(file, 1, 1), "", "document is nested too deeply")]) from None
    finally:
        loader.dispose()
    return YamlDocument(file, data, positions)


def _lone_surrogate(text: str) -> str | None:
    """The first U+D800..U+DFFF in `text`: a YAML escape can give one, UTF-8 cannot encode it."""
    return next((c for c in text if "\ud800" <= c <= "\udfff"), None)


def _walk(node: yaml.Node, path: PathKey, file: str, out: dict[PathKey, Location], budget: list[int]) -> None:
    import yaml  # loaded by _parse already

    budget[0] += 1
    if budget[0] > MAX_NODES:
        raise RecipeError([Problem(_loc(file, node), "", f"document expands to more than {MAX_NODES} values")])
    if len(path) > 50:
        raise RecipeError([Problem(_loc(file, node), "", "document is nested too deeply")])
    out.setdefault(path, _loc(file, node))
    if isinstance(node, yaml.ScalarNode) and "\x00" in node.value:
        raise RecipeError([Problem(_loc(file, node), dotted(path), "contains a NUL byte (\\0): no shell can hold one in a variable")])
    if isinstance(node, yaml.ScalarNode) and (lone := _lone_surrogate(node.value)):
        # YAML's "\ud800" escape: no UTF-8 file (a script, the record) and no environment can hold it
        raise RecipeError(
            [
                Problem(
                    _loc(file, node), dotted(path), f"contains the lone surrogate \\u{ord(lone):04x}, which no file or environment can hold"
                )
            ]
        )
    if isinstance(node, yaml.MappingNode):
        seen: dict[object, Location] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise RecipeError([Problem(_loc(file, key_node), dotted(path), "mapping keys must be plain strings")])
            key = key_node.value
            if key == "<<":
                raise RecipeError([Problem(_loc(file, key_node), dotted(path), "YAML merge keys ('<<') are not supported; use extends")])
            if key_node.tag != STR_TAG:
                kind = key_node.tag.rsplit(":", 1)[-1]
                raise RecipeError(
                    [
                        Problem(
                            _loc(file, key_node),
                            dotted(path),
                            f'the key {key_node.value!r} is read as a {kind}, not a name: quote it ("{key_node.value}")',
                        )
                    ]
                )
            if key in seen:
                raise RecipeError(
                    [Problem(_loc(file, key_node), dotted((*path, key)), f"duplicate key (first defined at line {seen[key].line})")]
                )
            seen[key] = _loc(file, key_node)
            # Scalars are reported where the value is; collections where their key is.
            anchor = value_node if isinstance(value_node, yaml.ScalarNode) else key_node
            out[(*path, key)] = _loc(file, anchor)
            _walk(value_node, (*path, key), file, out, budget)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), file, out, budget)


def dotted(path: PathKey) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
