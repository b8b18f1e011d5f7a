"""Values from recipes, locks and sources files that reach another program's argument list.

A value such a file supplies is data, never an option: each one is checked for its kind here and
passed after `--` where the program takes options (git, pip). docs/security.md lists every place
envkit starts a program and what reaches it.
"""

from __future__ import annotations

import re

from envkit.core.errors import UsageError

_HEX_COMMIT = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")  # SHA-1 or SHA-256 object names
_SHORT_HEX = re.compile(r"^[0-9a-f]{7,64}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# PEP 508's name: letters and digits, with '.', '_' and '-' inside
_DIST_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")


def is_commit(value: str) -> bool:
    """A full git object name: 40 hex digits (SHA-1) or 64 (SHA-256 repositories)."""
    return _HEX_COMMIT.match(value) is not None


def is_ref_name(value: str) -> bool:
    """A branch, tag or abbreviated commit git accepts (git-check-ref-format's rules, with one
    level allowed), never one that begins with '-' and so could be read as an option."""
    if not value or value.startswith(("-", "/", ".")) or value.endswith(("/", ".", ".lock")) or value == "@":
        return False
    if any(ch in value for ch in " ~^:?*[\\") or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return False
    if ".." in value or "//" in value or "@{" in value or "/." in value:
        return False
    return all(part and not part.endswith(".lock") for part in value.split("/"))


def git_revision(value: str, what: str) -> str:
    """`value` as a revision to hand git: a commit or a ref name; a clear error otherwise."""
    if is_commit(value) or _SHORT_HEX.match(value) or is_ref_name(value):
        return value
    raise UsageError(f"{what}: {value!r} is not a git commit or ref name", hint="a commit is 40 hex digits; a ref is a branch or tag name")


def is_dist_name(value: str) -> bool:
    """A Python distribution's name as PEP 508 allows it (so never an option or a path)."""
    return _DIST_NAME.match(value) is not None


def is_sha256(value: str) -> bool:
    return _SHA256.match(value) is not None
