"""Load YAML safely and remember where every value sits, so errors can say file:line:col, and how
each number was written, so a hint can quote it (`3.10`, which YAML reads as the float 3.1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from envkit.core.errors import Location, Problem, RecipeError

if TYPE_CHECKING:
    import yaml

PathKey = tuple[str | int, ...]

STR_TAG = "tag:yaml.org,2002:str"
INT_TAG = "tag:yaml.org,2002:int"
FLOAT_TAG = "tag:yaml.org,2002:float"
# Recipes are small; a document whose node walk passes this is an alias bomb or junk.
MAX_NODES = 20_000
MAX_BYTES = 1_000_000


@dataclass(frozen=True)
class YamlDocument:
    """Plain data plus a side table of positions keyed by the path to each value."""

    file: str
    data: Any
    positions: dict[PathKey, Location]
    numbers: dict[PathKey, str] = field(default_factory=dict)  # each number's text as written

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
    return _parse(text, file)


def _parse(text: str, file: str) -> YamlDocument:
    import yaml

    try:
        from envkit.core.yamlload import BoundedSafeLoader

        loader = BoundedSafeLoader(text)
    except yaml.YAMLError as exc:
        raise RecipeError([Problem(Location(file, 1, 1), "", f"invalid YAML: {str(exc).splitlines()[0]}")]) from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise RecipeError([Problem(Location(file, 1, 1), "", "empty document: expected a mapping")])
        positions: dict[PathKey, Location] = {}
        numbers: dict[PathKey, str] = {}
        _walk(node, (), file, positions, [0], numbers=numbers)
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
    return YamlDocument(file, data, positions, numbers)


def _lone_surrogate(text: str) -> str | None:
    """The first U+D800..U+DFFF in `text`: a YAML escape can give one, UTF-8 cannot encode it."""
    return next((c for c in text if "\ud800" <= c <= "\udfff"), None)


def _walk(
    node: yaml.Node, path: PathKey, file: str, out: dict[PathKey, Location], budget: list[int], *, numbers: dict[PathKey, str]
) -> None:
    import yaml  # loaded by _parse already

    budget[0] += 1
    if budget[0] > MAX_NODES:
        raise RecipeError([Problem(_loc(file, node), "", f"document expands to more than {MAX_NODES} values")])
    if len(path) > 50:
        raise RecipeError([Problem(_loc(file, node), "", "document is nested too deeply")])
    out.setdefault(path, _loc(file, node))
    if isinstance(node, yaml.ScalarNode) and node.tag in (INT_TAG, FLOAT_TAG):
        numbers[path] = node.value
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
            _walk(value_node, (*path, key), file, out, budget, numbers=numbers)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), file, out, budget, numbers=numbers)


def dotted(path: PathKey) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
