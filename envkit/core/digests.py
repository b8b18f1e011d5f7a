"""sha256 of the small things envkit keys and compares: a recipe, a lock, a record, a path."""

from __future__ import annotations

from hashlib import sha256
from pathlib import Path

__all__ = ["file_sha256", "sha256"]


def file_sha256(path: Path) -> str:
    """The hex digest of a small file's bytes (a lock, a record, an activation script); OSError as
    reading it raises."""
    return sha256(path.read_bytes()).hexdigest()
