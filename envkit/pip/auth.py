"""The credentials pip would send to a host, for envkit's own requests to files a lock names (a
private index's wheels): from the index URLs pip is given (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL,
pip.conf through `pip config list`) and from ~/.netrc, as pip takes them. Asked only after a
server answered 401, so a public index costs nothing."""

from __future__ import annotations

import netrc
import os
import re
import subprocess
import sys
from urllib.parse import unquote, urlsplit

# `pip config list` lines: global.index-url='https://...'
CONFIG_LINE = re.compile(r"^[\w.-]+\.(?:extra-)?index-url='(.*)'$")


def _index_urls() -> list[str]:
    urls = [*os.environ.get("PIP_INDEX_URL", "").split(), *os.environ.get("PIP_EXTRA_INDEX_URL", "").split()]
    try:
        listed = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        listed = ""
    for line in listed.splitlines():
        if found := CONFIG_LINE.match(line.strip()):
            urls += found.group(1).split()
    return urls


def credentials(url: str) -> tuple[str, str] | None:
    """(user, password) pip would send with a request to `url`'s host: an index URL's on the same
    host and port first, then ~/.netrc's entry for the host."""
    target = urlsplit(url)
    for index in _index_urls():
        parts = urlsplit(index)
        if parts.hostname == target.hostname and parts.port == target.port and parts.username:
            return unquote(parts.username), unquote(parts.password or "")
    try:
        found = netrc.netrc().authenticators(target.hostname or "")
    except (OSError, netrc.NetrcParseError):
        return None
    return (found[0], found[2]) if found else None
