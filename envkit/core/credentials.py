"""Credentials in channel URLs: what a URL gives away, and the URL as it may be published."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from envkit.core.errors import UsageError

CONDA_TOKEN = re.compile(r"^/t/[^/]+/")  # anaconda.org's and quetz's token in a channel's path


def credentials_in(channel: str) -> str | None:
    """What a channel URL gives away: credentials before its host, or a conda token in its path."""
    parts = urlsplit(channel)
    if parts.scheme not in ("http", "https"):
        return None
    if parts.password is not None:
        return "a user name and password"
    if parts.username:
        return "a user name (or a token in its place)"
    if CONDA_TOKEN.match(parts.path):
        return "a conda token (/t/...)"
    return None


def without_credentials(url: str) -> str:
    """`url` as it may be published (an export, a lock): without a user or password before its
    host, and without a conda token in its path, which conda writes into conda-meta as
    `/t/<TOKEN>/` and rattler as the token itself. The machine that installs it brings its own."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return url
    host = parts.netloc.rpartition("@")[2]
    path = CONDA_TOKEN.sub("/", parts.path, count=1)
    return parts._replace(netloc=host, path=path).geturl()


def where_credentials_go(channel: str) -> str:
    host = urlsplit(channel).hostname or "HOST"
    return (
        f"name the channel without them and store the credentials with 'pixi auth login {host} ...' (or in "
        "~/.rattler/credentials.json, a file named by RATTLER_AUTH_FILE, or ~/.netrc), where envkit reads them"
    )


def refuse_credentials(channel: str, given_as: str) -> None:
    """A channel given on the command line is written into the env's record, a lock and every export."""
    if held := credentials_in(channel):
        raise UsageError(
            f"{given_as}: the channel URL holds {held}, which the env's record, a lock and every export would publish",
            hint=where_credentials_go(channel),
        )
