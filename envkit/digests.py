"""sha256 of the small things envkit keys and compares (a recipe, a lock, a record, a path), without
loading OpenSSL.

`import hashlib` loads OpenSSL's libcrypto (`_hashlib`): 1.2-2.2 ms measured on the development
machine, where the sha256 module built into Python (the one hashlib itself falls back on) loads in
0.2-0.3 ms. A locked create hashes a few kilobytes and never needs OpenSSL otherwise (envkit's
asyncio leaves `ssl` unloaded: envkit.ownprocess), so its import is the cost. Archives, hundreds of
megabytes, go through hashlib (envkit.pkgcache), whose OpenSSL is several times faster on them.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

if TYPE_CHECKING:  # the same interface: update, digest, hexdigest
    from hashlib import sha256
else:
    try:
        if sys.version_info >= (3, 12):
            from _sha2 import sha256
        else:
            from _sha256 import sha256
    except ImportError:  # an interpreter built without them: hashlib has sha256 all the same
        from hashlib import sha256

__all__ = ["file_sha256", "sha256"]


def file_sha256(path: Path) -> str:
    """The hex digest of a small file's bytes (a lock, a record, an activation script); OSError as
    reading it raises."""
    return sha256(path.read_bytes()).hexdigest()
