"""YAML written as text, without a YAML library (the exports, the recipe conda's exporter writes):
scalars that read back as exactly what was written, and comment lines that stay on their line."""

from __future__ import annotations


def quoted(value: str) -> str:
    """A YAML double-quoted scalar that reads back as `value`. Not JSON's: JSON writes a character
    beyond U+FFFF as a surrogate pair, which YAML reads as two characters."""
    return '"' + "".join("\\" + ch if ch in '"\\' else printable(ch) for ch in value) + '"'


def printable(ch: str) -> str:
    """`ch` as it may stand in a YAML stream, on one line: itself, or escaped (control characters,
    line and paragraph separators, and whatever else YAML's reader refuses)."""
    code = ord(ch)
    kept = (
        0x20 <= code <= 0x7E
        or (0xA0 <= code <= 0xD7FF and code not in (0x2028, 0x2029))
        or (0xE000 <= code <= 0xFFFD and code != 0xFEFF)
        or code >= 0x10000
    )
    if kept:
        return ch
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def text(lines: list[str]) -> str:
    """Lines as a file: each comment kept on its line whatever a path or a name in it holds."""
    return "\n".join("".join(map(printable, line)) if line.startswith("#") else line for line in lines) + "\n"
