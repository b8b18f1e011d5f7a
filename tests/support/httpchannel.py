"""A folder (a conda channel, a pip index) served over HTTP on localhost, as private servers serve
them where asked: behind a conda token in the path (anaconda.org, quetz: `/t/<token>/...`) or
behind HTTP basic auth (Artifactory, Nexus). Requests without the credentials get what such
servers answer: 404 for a path without the token, 401 without the user and password."""

from __future__ import annotations

import base64
import contextlib
import functools
import io
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import BinaryIO

HOST = "127.0.0.1"


@dataclass
class Tally:
    """The most requests a server had in hand at once: what a client asks in parallel."""

    now: int = 0
    most: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.now -= 1


class PrivateHandler(SimpleHTTPRequestHandler):
    """Quiet, and for what `token` and `basic` ask: every request without them is refused."""

    token: str | None = None
    basic: tuple[str, str] | None = None
    stall: float = 0  # seconds before each answer
    tally: Tally | None = None

    def log_message(self, format: str, *args: object) -> None:
        pass

    def send_head(self) -> io.BytesIO | BinaryIO | None:
        with self.tally or contextlib.nullcontext():
            time.sleep(self.stall)
        if self.basic is not None:
            wanted = "Basic " + base64.b64encode(":".join(self.basic).encode()).decode()
            if self.headers.get("Authorization") != wanted:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="channel"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
        if self.token is not None:
            prefix = f"/t/{self.token}/"
            if not self.path.startswith(prefix):
                self.send_error(404)
                return None
            self.path = "/" + self.path[len(prefix) :]
        return super().send_head()


@contextmanager
def served(
    folder: Path, *, token: str | None = None, basic: tuple[str, str] | None = None, stall: float = 0, tally: Tally | None = None
) -> Iterator[str]:
    """Serve `folder` (a channel, an index) until the block ends; yields its URL as a recipe or pip
    names it (no credentials). `tally` counts the requests in hand at once (each held `stall`)."""
    handler = type("Handler", (PrivateHandler,), {"token": token, "basic": basic, "stall": stall, "tally": tally})
    server = ThreadingHTTPServer((HOST, 0), functools.partial(handler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{HOST}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def auth_file(path: Path, *, token: str | None = None, basic: tuple[str, str] | None = None) -> Path:
    """rattler's credentials file (RATTLER_AUTH_FILE, the format of ~/.rattler/credentials.json),
    keyed by host, as `pixi auth login` writes it."""
    entry: dict[str, object] = (
        {"CondaToken": token} if token else {"BasicHTTP": {"username": basic[0], "password": basic[1]}} if basic else {}
    )
    path.write_text(json.dumps({HOST: entry}))
    return path
