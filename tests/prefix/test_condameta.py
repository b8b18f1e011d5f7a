"""Package records as conda writes them: the mode open() gives a new file under the umask, where
rattler leaves 0600 (prefix-dev/pixi#4284), so the others who share an env can read it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envkit.prefix.condameta import as_conda_writes
from tests.support.condapkg import PkgMeta
from tests.support.tiny import tiny_channel, tiny_recipe


def envkit_under(mask: int, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process whose umask is `mask`, as a shell with `umask` set runs it."""
    return subprocess.run(
        [sys.executable, "-m", "envkit", *args], capture_output=True, text=True, timeout=600, check=False, preexec_fn=lambda: os.umask(mask)
    )


def written(prefix: Path) -> dict[str, int]:
    """The modes of what the install and envkit wrote about the env (not the packages' own files)."""
    paths = [*(prefix / "conda-meta").glob("*.json"), prefix / "conda-meta" / "history", prefix / "etc" / "envkit" / "record.json"]
    return {str(p.relative_to(prefix)): p.stat().st_mode & 0o777 for p in paths}


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_create_lock_and_sync_write_as_open_would(tmp_path: Path, shared_dir: Path, mask: int, mode: int) -> None:
    channel = tiny_channel(tmp_path, extra=(PkgMeta("extra", "1.0", "0"),))
    recipe = tiny_recipe(tmp_path, channel)
    prefix = shared_dir / "env"
    made = envkit_under(mask, "create", str(recipe), "-p", str(prefix), "--yes", "--no-probe")
    assert made.returncode == 0, made.stderr
    assert set(written(prefix).values()) == {mode}, written(prefix)
    locked = envkit_under(mask, "lock", str(recipe))
    assert locked.returncode == 0, locked.stderr
    assert recipe.with_suffix(".lock").stat().st_mode & 0o777 == mode  # a lock is for the team
    # a sync's install runs in its child: the record it adds is fixed there
    recipe.write_text(recipe.read_text().replace("packages: [tool]", "packages: [tool, extra]"))
    synced = envkit_under(mask, "sync", "-p", str(prefix), "--yes", "--no-probe")
    assert synced.returncode == 0, synced.stderr
    modes = written(prefix)
    assert "conda-meta/extra-1.0-0.json" in modes and set(modes.values()) == {mode}, modes
    if mask == 0o022 and os.geteuid() == 0:  # another user, for real: nobody reads every record
        for rel in modes:
            read = subprocess.run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", str(prefix / rel)], capture_output=True, check=False
            )
            assert read.returncode == 0, f"{rel}: {read.stderr.decode()}"


def test_read_bits_are_added_never_taken(tmp_path: Path) -> None:
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    for name, mode in (("a-1-0.json", 0o600), ("b-1-0.json", 0o644), ("c-1-0.json", 0o664)):
        (meta / name).write_text('{"name": "x"}\n')
        (meta / name).chmod(mode)
    before = (meta / "b-1-0.json").stat().st_mtime_ns
    old = os.umask(0o027)
    try:
        assert as_conda_writes(tmp_path) == []  # no softlinks: nothing rewritten, only modes widened
    finally:
        os.umask(old)
    assert {p.name: p.stat().st_mode & 0o777 for p in meta.iterdir()} == {"a-1-0.json": 0o640, "b-1-0.json": 0o644, "c-1-0.json": 0o664}
    assert (meta / "b-1-0.json").stat().st_mtime_ns == before


def test_softlink_hashes_are_dropped_and_what_is_no_record_is_left_alone(tmp_path: Path) -> None:
    """The records that hold a softlink lose its two fields (conda records neither); an empty
    file, a torn record that names a softlink, and a folder named like a record are not records:
    left as they are, for the audit to report (EK022)."""
    import json

    meta = tmp_path / "conda-meta"
    meta.mkdir()
    link = {"_path": "bin/python", "path_type": "softlink", "sha256_in_prefix": "ab" * 32, "size_in_bytes": 9}
    hard = {"_path": "bin/python3.11", "path_type": "hardlink", "sha256_in_prefix": "cd" * 32, "size_in_bytes": 90}
    (meta / "python-3.11-0.json").write_text(json.dumps({"name": "python", "paths_data": {"paths": [link, hard]}}))
    (meta / "plain-1-0.json").write_text(json.dumps({"name": "plain", "paths_data": {"paths": [hard]}}))
    (meta / "empty-1-0.json").write_bytes(b"")
    (meta / "torn-1-0.json").write_text('{"paths_data": {"paths": [{"path_type": "softlink"')
    (meta / "folder-1-0.json").mkdir()
    assert as_conda_writes(tmp_path) == [meta / "python-3.11-0.json"]
    paths = json.loads((meta / "python-3.11-0.json").read_text())["paths_data"]["paths"]
    assert paths == [{"_path": "bin/python", "path_type": "softlink"}, hard]
    assert (meta / "empty-1-0.json").read_bytes() == b"" and (meta / "torn-1-0.json").read_text().endswith('"softlink"')


def _linked_env(tmp_path: Path, name: str) -> tuple[Path, dict[str, str]]:
    """A real env from a channel with one package holding a softlink (`linky`) and one without
    (`tool` and its `helper`), made by envkit's create; and each package's archive sha256."""
    import json

    from tests.support.condapkg import PkgFile, index_channel, write_tar_bz2

    channel = tmp_path / "links"
    if not channel.exists():
        write_tar_bz2(channel, PkgMeta("tool", "1.0", "0", depends=["helper", "linky"]), [PkgFile("share/tool/version.txt", b"v1\n")])
        write_tar_bz2(channel, PkgMeta("helper", "1.0", "0"), [PkgFile("share/helper/data.txt", b"helper\n")])
        files = [PkgFile("lib/liblinky.so.1", b"ELF?\n"), PkgFile("lib/liblinky.so", link_target="liblinky.so.1")]
        write_tar_bz2(channel, PkgMeta("linky", "1.0", "0"), files)
        index_channel(channel)
    recipe = tiny_recipe(tmp_path, channel)
    prefix = tmp_path / name
    made = subprocess.run(
        [sys.executable, "-m", "envkit", "create", str(recipe), "-p", str(prefix), "--yes", "--no-probe"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    sha256: dict[str, str] = {}
    for subdir in ("noarch", "linux-64"):
        index = json.loads((channel / subdir / "repodata.json").read_text())
        sha256 |= {meta["name"]: meta["sha256"] for meta in [*index["packages"].values(), *index["packages.conda"].values()]}
    return prefix, sha256


def _softlink_entry(prefix: Path) -> dict[str, object]:
    import json

    paths = json.loads((prefix / "conda-meta" / "linky-1.0-0.json").read_text())["paths_data"]["paths"]
    return next(p for p in paths if p["_path"] == "lib/liblinky.so")


def test_an_archive_found_free_of_softlinks_is_not_searched_again(tmp_path: Path) -> None:
    """After a create, the archives whose records hold no softlink are marked by their sha256 in
    envkit's cache, the one with a softlink is not; and the mark is what a later install goes by:
    the softlink package's archive marked by hand keeps rattler's fields in the next env."""
    first, sha256 = _linked_env(tmp_path, "first")
    marks = Path(os.environ["XDG_CACHE_HOME"]) / "envkit" / "no-softlinks"
    assert sorted(p.name for p in marks.iterdir()) == sorted((sha256["tool"], sha256["helper"]))
    assert _softlink_entry(first) == {"_path": "lib/liblinky.so", "path_type": "softlink"}  # as conda writes it
    (marks / sha256["linky"]).touch()
    second, _ = _linked_env(tmp_path, "second")
    assert "sha256_in_prefix" in _softlink_entry(second)  # rattler's record, not searched


def test_a_staging_envs_records_are_written_as_in_place_without_a_flush(tmp_path: Path, flushed: list[int]) -> None:
    """In a staging env (`staged`, as create calls it) the record rewritten is the same bytes and
    mode as the atomic write gives an env in place, with no temporary file left and no fsync: the
    rename of the whole staging env into place is what makes it appear whole (an fsync right after
    rattler linked thousands of files waits for the journal to commit them)."""
    import json

    link = {"_path": "bin/python", "path_type": "softlink", "sha256_in_prefix": "ab" * 32, "size_in_bytes": 9}
    results = {}
    for staged in (False, True):
        meta = tmp_path / str(staged) / "conda-meta"
        meta.mkdir(parents=True)
        (meta / "python-3.11-0.json").write_text(json.dumps({"name": "python", "paths_data": {"paths": [link]}}))
        (meta / "python-3.11-0.json").chmod(0o600)  # as rattler leaves it
        flushed.clear()
        old = os.umask(0o027)
        try:
            assert as_conda_writes(meta.parent, staged=staged) == [meta / "python-3.11-0.json"]
        finally:
            os.umask(old)
        results[staged] = ((meta / "python-3.11-0.json").read_bytes(), (meta / "python-3.11-0.json").stat().st_mode & 0o777, len(flushed))
        assert sorted(p.name for p in meta.iterdir()) == ["python-3.11-0.json"]
    assert results[True][:2] == results[False][:2] and results[True][1] == 0o640
    assert results[False][2] == 1 and results[True][2] == 0
