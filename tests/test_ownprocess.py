"""envkit.ownprocess: what envkit changes in an interpreter only when the process is its own. Each
case runs a fresh interpreter, as the module's point is what a process has loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_envkit
from tests.support.tiny import tiny_channel, tiny_recipe


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)


def _imported(stderr: str) -> set[str]:
    """The modules a run tried to load, from PYTHONPROFILEIMPORTTIME's lines."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:") and "|" in line}


def test_envkits_own_process_creates_an_env_without_loading_ssl(tmp_path: Path) -> None:
    """`envkit create` solves and installs through rattler under asyncio, with OpenSSL's module
    never loaded: rattler's HTTP is its own."""
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    prefix = tmp_path / "env"
    done = run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe", env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert (prefix / "share" / "tool" / "version.txt").read_text() == "v1\n"
    loaded = _imported(done.stderr)
    assert {"asyncio", "rattler", "envkit.backend"} <= loaded
    assert "_ssl" not in loaded  # the extension that loads libssl (asyncio's refused tries at `ssl` are listed too)


def test_ssl_stays_importable_after_asyncio_loaded_without_it() -> None:
    """Only asyncio's own modules went without it: anything that asks for ssl later gets it."""
    done = _python(
        "import sys\n"
        "from envkit import ownprocess\n"
        "ownprocess.claim()\n"
        "aio = ownprocess.asyncio_for_rattler()\n"
        "assert 'ssl' not in sys.modules, 'ssl loaded'\n"
        "assert aio.run(aio.sleep(0, result=7)) == 7\n"
        "import ssl\n"
        "ssl.create_default_context()\n"
        "print('ok')\n"
    )
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr


def test_a_program_that_imports_envkit_keeps_its_asyncio_whole() -> None:
    """envkit imported into another program (conda, as its plugin; a notebook) leaves asyncio as
    that program would have it: with TLS."""
    done = _python(
        "import sys\n"
        "import envkit.backend\n"
        "import asyncio.sslproto, asyncio.base_events\n"
        "assert asyncio.sslproto.ssl is not None and asyncio.base_events.ssl is not None\n"
        "print('ok')\n"
    )
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr


def test_an_asyncio_loaded_before_envkits_claim_is_left_as_it_is() -> None:
    done = _python(
        "import asyncio, sys\n"
        "from envkit import ownprocess\n"
        "ownprocess.claim()\n"
        "assert ownprocess.asyncio_for_rattler() is asyncio\n"
        "import asyncio.sslproto\n"
        "assert asyncio.sslproto.ssl is not None and 'ssl' in sys.modules\n"
        "print('ok')\n"
    )
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr
