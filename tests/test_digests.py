"""envkit.digests: sha256 without OpenSSL for what envkit keys and compares; archives keep hashlib."""

from __future__ import annotations

import hashlib
from pathlib import Path

from envkit.digests import file_sha256, sha256
from tests.conftest import run_envkit
from tests.support.importtime import imported, profiled
from tests.support.tiny import tiny_channel, tiny_recipe


def test_the_digest_is_hashlibs_whole_and_in_parts(tmp_path: Path) -> None:
    for size in (0, 1, 55, 56, 64, 1000, 300_000):
        data = bytes(range(256)) * (size // 256) + bytes(size % 256)
        assert sha256(data).hexdigest() == hashlib.sha256(data).hexdigest(), size
        parts = sha256()
        for start in range(0, size, 4093):
            parts.update(data[start : start + 4093])
        assert parts.digest() == hashlib.sha256(data).digest(), size
        (tmp_path / "file").write_bytes(data)
        assert file_sha256(tmp_path / "file") == hashlib.sha256(data).hexdigest(), size


def test_a_locked_create_from_a_warm_cache_loads_no_openssl(tmp_path: Path) -> None:
    """The first create reads the channel's archives to check them against its index (OpenSSL's
    sha256, through hashlib); a locked create whose archives the cache already holds, checked,
    hashes only kilobytes (the lock, the recipe, the record) and loads no `_hashlib`."""
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    first = run_envkit("create", str(recipe), "-p", str(tmp_path / "first"), "--yes", "--no-probe", env=profiled())
    assert first.returncode == 0, first.stderr[-2000:]
    assert "_hashlib" in imported(first.stderr)
    assert run_envkit("lock", str(recipe)).returncode == 0
    locked = run_envkit("create", str(recipe), "-p", str(tmp_path / "locked"), "--locked", "--yes", "--no-probe", env=profiled())
    assert locked.returncode == 0, locked.stderr[-2000:]
    assert (tmp_path / "locked" / "share" / "tool" / "version.txt").read_text() == "v1\n"
    loaded = imported(locked.stderr)
    assert {"envkit.digests", "envkit.lock", "rattler"} <= loaded
    assert "_hashlib" not in loaded and "hashlib" not in loaded
