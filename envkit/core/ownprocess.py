"""What envkit may change in the interpreter only where the process is its own (the console
script, `python -m envkit`, the installer child it spawns): never where envkit is imported into
another program (conda, as its plugin; a notebook), whose modules are not envkit's to shape."""

from __future__ import annotations

import sys
from types import ModuleType


class _This:
    own = False  # set by claim(), never unset


def claim() -> None:
    """Called first thing by envkit's entry points (envkit.__main__, envkit.install.inplace)."""
    _This.own = True


def asyncio_for_rattler() -> ModuleType:
    """asyncio, which envkit loads only to drive py-rattler's futures (rattler's HTTP and TLS are
    its own, in Rust). asyncio asks for `ssl` as it loads and does without it where it is missing;
    in envkit's own process it is kept from loading it, since OpenSSL's libraries and the ssl
    module are some 5 ms of every solve, install and sync, and nothing in that process ever makes
    a TLS connection through asyncio. `ssl` stays importable for anything that asks for it later."""
    if _This.own and "asyncio" not in sys.modules and "ssl" not in sys.modules:
        sys.modules["ssl"] = None  # type: ignore[assignment]  # import's own "not available" marker
        try:
            import asyncio
        finally:
            if "ssl" in sys.modules and sys.modules["ssl"] is None:
                del sys.modules["ssl"]
    import asyncio

    return asyncio
