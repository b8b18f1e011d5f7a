"""The rules every activation operation meets, whatever file it comes from: a recipe (whose schema
says the same with a file:line), a lock's envkit section, an env's record. Each value ends up in
shell scripts and startup files, so what a shell would read as code or as its own is refused."""

from __future__ import annotations

from envkit.core.names import VAR_RE
from envkit.recipe.reserved import why_reserved

ACTIONS = ("set", "unset", "prepend", "append")


# radon cc 21: one refusal per way a variable operation can reach a shell unsafely; each is a line, read in order
def op_problem(item: object) -> str | None:
    """What is wrong with one operation as JSON keeps it ({"name", "action", "value", "entries",
    "separator"}), or None."""
    if not isinstance(item, dict):
        return "not an operation"
    name, action = item.get("name"), item.get("action")
    if not isinstance(name, str) or not VAR_RE.match(name):
        return f"{str(name)[:60]!r} is not a variable name"
    if (why := why_reserved(name)) is not None:
        return f"{name} cannot be set by activation: it is {why}"
    if action not in ACTIONS:
        return f"{name}: unknown action {str(action)[:20]!r}"
    value, entries, separator = item.get("value"), item.get("entries") or [], item.get("separator", ":")
    if value is not None and (not isinstance(value, str) or "\0" in value):
        return f"{name}: its value is not text a variable can hold"
    if not isinstance(separator, str) or len(separator) != 1 or separator.isalnum() or separator in "\n\r\0\\":
        return f"{name}: {str(separator)[:10]!r} cannot separate entries"
    if not isinstance(entries, list) or not all(
        isinstance(e, str) and e and separator not in e and "\n" not in e and "\0" not in e for e in entries
    ):
        return f"{name}: its entries are not path entries"
    return None
