"""envkit.core.ownprocess: what envkit changes in an interpreter only when the process is its own. Each
case runs a fresh interpreter, as the module's point is what a process has loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import run_envkit
from tests.support.importtime import imported, profiled
from tests.support.tiny import tiny_channel, tiny_recipe


def _holds(*lines: str) -> None:
    """`lines` run as a fresh interpreter's program, every assert in them holding."""
    done = subprocess.run(
        [sys.executable, "-c", "\n".join([*lines, "print('ok')"])], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr


def test_envkits_own_process_creates_an_env_without_loading_ssl(tmp_path: Path) -> None:
    """`envkit create` solves and installs through rattler under asyncio, with OpenSSL's module
    never loaded: rattler's HTTP is its own."""
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    prefix = tmp_path / "env"
    done = run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe", env=profiled())
    assert done.returncode == 0, done.stderr[-2000:]
    assert (prefix / "share" / "tool" / "version.txt").read_text() == "v1\n"
    loaded = imported(done.stderr)
    assert {"asyncio", "rattler", "envkit.solve.backend"} <= loaded
    assert "_ssl" not in loaded  # the extension that loads libssl (asyncio's refused tries at `ssl` are listed too)


def test_ssl_stays_importable_after_asyncio_loaded_without_it() -> None:
    """Only asyncio's own modules went without it: anything that asks for ssl later gets it."""
    _holds(
        "import sys",
        "from envkit.core import ownprocess",
        "ownprocess.claim()",
        "aio = ownprocess.asyncio_for_rattler()",
        "assert 'ssl' not in sys.modules, 'ssl loaded'",
        "assert aio.run(aio.sleep(0, result=7)) == 7",
        "import ssl",
        "ssl.create_default_context()",
    )


def test_a_program_that_imports_envkit_keeps_its_asyncio_whole() -> None:
    """envkit imported into another program (conda, as its plugin; a notebook) leaves asyncio as
    that program would have it: with TLS."""
    _holds(
        "import envkit.solve.backend",
        "import asyncio.sslproto, asyncio.base_events",
        "assert None not in (asyncio.sslproto.ssl, asyncio.base_events.ssl)",
    )


def test_an_asyncio_loaded_before_envkits_claim_is_left_as_it_is() -> None:
    _holds(
        "import asyncio, sys",
        "from envkit.core import ownprocess",
        "ownprocess.claim()",
        "assert ownprocess.asyncio_for_rattler() is asyncio",
        "import asyncio.sslproto",
        "assert asyncio.sslproto.ssl is not None and 'ssl' in sys.modules",
    )


def test_a_program_that_imports_envkit_keeps_its_collector() -> None:
    """conda with envkit's plugin, a notebook: their collector is theirs."""
    _holds(
        "import contextlib, gc, io",
        "from envkit.solve import backend; from envkit.cli import main as cli",
        "with contextlib.redirect_stdout(io.StringIO()):",
        "    assert cli.main(['recipes', 'list', '--json']) == 0",
        "assert gc.isenabled()",
    )
