"""The folders sync's journal lists: every entry rattler's real installer adds to an env in a change
must sit in one of them (or under a new folder that does), or a rollback would leave it behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from envkit.install.inplace import change_env
from envkit.install.linkscope import change_folders
from tests.install.test_inplace import _records
from tests.install.test_journal import walked
from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_tar_bz2


def _channel(root: Path) -> Path:
    """Two versions of a package whose files move between folders and clobber another's, a
    noarch: python package (site-packages and python-scripts are moved when linked), a python for
    it, and a package rebuilt under the same version and build."""
    ch = root / "channel"
    write_tar_bz2(ch, PkgMeta("python", "3.11.7", "0"), [PkgFile("lib/python3.11/site-packages/README.txt", b"site\n")])
    write_tar_bz2(ch, PkgMeta("python", "3.12.1", "0"), [PkgFile("lib/python3.12/site-packages/README.txt", b"site\n")])
    write_tar_bz2(ch, PkgMeta("other", "1.0", "0"), [PkgFile("share/common.txt", b"other\n")])
    write_tar_bz2(ch, PkgMeta("mover", "1.0", "0"), [PkgFile("share/mover/a.txt", b"1\n"), PkgFile("lib/deep/x/1.txt", b"1\n")])
    write_tar_bz2(
        ch,
        PkgMeta("mover", "2.0", "0"),
        [
            PkgFile("share/mover/a.txt", b"2\n"),
            PkgFile("share/mover/new/b.txt", b"2\n"),
            PkgFile("lib/deep/y/z/2.txt", b"2\n"),
            PkgFile("bin/mover", b"#!/bin/sh\n", 0o755),
            PkgFile("share/common.txt", b"mover\n"),  # clobbers other's: rattler renames one beside it
        ],
    )
    for version, extra in (("1.0", []), ("2.0", [PkgFile("site-packages/nap/sub/m.py", b"")])):
        write_tar_bz2(
            ch,
            PkgMeta("nap", version, "py_0", subdir="noarch", noarch="python", depends=["python"]),
            [PkgFile("site-packages/nap/__init__.py", version.encode()), PkgFile(f"python-scripts/nap-{version}", b""), *extra],
        )
    index_channel(ch)
    return ch


def _installed(prefix: Path) -> tuple[dict[str, str], dict[str, str | None]]:
    import rattler

    records = [rattler.PrefixRecord.from_path(p) for p in (prefix / "conda-meta").glob("*.json")]
    return (
        {r.name.normalized: f"{r.version} {r.build}" for r in records},
        {r.name.normalized: bytes(r.sha256).hex() if r.sha256 is not None else None for r in records},
    )


def _covered(added: set[str], folders: tuple[str, ...]) -> list[str]:
    """The added entries a rollback listing `folders` would miss: an entry is found when the folder
    holding its topmost new ancestor (itself, if its folder is old) is listed."""
    missed = []
    for entry in added:
        parts = entry.split("/")
        top = next("/".join(parts[: n + 1]) for n in range(len(parts)) if "/".join(parts[: n + 1]) in added)
        if top.rpartition("/")[0] not in folders:
            missed.append(entry)
    return missed


def _change(tmp_path: Path, before: list[str], after: list[str]) -> tuple[Path, Path, list[Any]]:
    channel = _channel(tmp_path)
    cache = tmp_path / "cache"
    target = _records(channel, after)
    change_env(target, tmp_path / "warm", cache, after)  # the new packages extracted, as after a solve that found them cached
    prefix = tmp_path / "env"
    change_env(_records(channel, before), prefix, cache, before)
    return prefix, cache, target


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (["python 3.11.*", "mover ==1.0", "other", "nap ==1.0"], ["python 3.11.*", "mover ==2.0", "other", "nap ==2.0"]),
        (["python 3.11.*", "mover ==2.0", "other", "nap ==2.0"], ["python 3.11.*", "mover ==1.0", "nap ==1.0"]),
        (["python 3.11.*", "other"], ["python 3.11.*", "other", "mover ==2.0", "nap ==2.0"]),
        (["python 3.11.*", "other", "mover ==2.0"], ["python 3.11.*", "other"]),
    ],
    ids=["upgrade", "downgrade-and-remove", "add", "remove-a-clobber-winner"],
)
def test_every_entry_the_installer_adds_is_in_a_listed_folder(tmp_path: Path, before: list[str], after: list[str]) -> None:
    prefix, cache, target = _change(tmp_path, before, after)
    installed, sha256 = _installed(prefix)
    folders = change_folders(prefix, cache, installed, sha256, target)
    assert folders is not None
    assert "lib/python3.11/site-packages/nap" in folders or "nap ==2.0" not in after  # noarch paths moved, as rattler moves them
    if after == ["python 3.11.*", "other"]:
        assert (prefix / "share" / "common.txt").read_bytes() == b"mover\n"  # mover won the clobber
    was = walked(prefix)
    change_env(target, prefix, cache, after)
    added = walked(prefix) - was
    assert added or after == ["python 3.11.*", "other"], "the change added nothing: the case proves nothing"
    assert _covered(added, folders) == []
    if after == ["python 3.11.*", "other"]:  # unlinking the winner put other's file back under its name
        assert (prefix / "share" / "common.txt").read_bytes() == b"other\n"


def test_a_package_rebuilt_under_the_same_version_and_build_counts_as_changed(tmp_path: Path) -> None:
    """A channel rebuilt mover 1.0 0 with other files: rattler relinks it (its sha256 differs)."""
    prefix, cache, target = _change(tmp_path, ["python 3.11.*", "mover ==1.0"], ["python 3.11.*", "mover ==1.0"])
    installed, sha256 = _installed(prefix)
    assert change_folders(prefix, cache, installed, sha256, target) == ("", "Scripts", "bin", "conda-meta")  # nothing changes
    rebuilt = tmp_path / "rebuilt"
    write_tar_bz2(
        rebuilt,
        PkgMeta("mover", "1.0", "0"),
        [PkgFile("share/mover/a.txt", b"1\n"), PkgFile("lib/python3.11/site-packages/rebuilt.txt", b"")],
    )
    index_channel(rebuilt)
    again = [r for r in target if r.name.normalized == "python"] + _records(rebuilt, ["mover ==1.0"])
    change_env(again, tmp_path / "warm-rebuilt", cache, [])
    folders = change_folders(prefix, cache, installed, sha256, again)
    assert folders is not None and "lib/python3.11/site-packages" in folders
    was = walked(prefix)
    change_env(again, prefix, cache, [])
    added = walked(prefix) - was
    assert "lib/python3.11/site-packages/rebuilt.txt" in added and _covered(added, folders) == []


def test_what_cannot_be_known_beforehand_lists_everything(tmp_path: Path) -> None:
    """A package not extracted in the cache yet (rattler fetches it during the install), a new
    python (rattler relinks every noarch package)."""
    channel = _channel(tmp_path)
    cache, prefix = tmp_path / "cache", tmp_path / "env"
    change_env(_records(channel, ["python 3.11.*", "nap ==1.0"]), prefix, cache, [])
    installed, sha256 = _installed(prefix)
    assert change_folders(prefix, cache, installed, sha256, _records(channel, ["python 3.11.*", "nap ==2.0"])) is None  # not cached
    newer = _records(channel, ["python 3.12.*", "nap ==1.0"])
    change_env(newer, tmp_path / "warm", cache, [])
    assert change_folders(prefix, cache, installed, sha256, newer) is None  # python changes
    other = tmp_path / "other-build"  # the cache holds another archive under nap 2.0's name: rattler extracts afresh
    write_tar_bz2(other, PkgMeta("nap", "2.0", "py_0", subdir="noarch", noarch="python"), [PkgFile("site-packages/elsewhere.py", b"")])
    index_channel(other)
    change_env(_records(channel, ["python 3.11.*"]) + _records(other, ["nap ==2.0"]), tmp_path / "warm-other", cache, [])
    assert (cache / "nap-2.0-py_0" / "info" / "paths.json").is_file()
    assert change_folders(prefix, cache, installed, sha256, _records(channel, ["python 3.11.*", "nap ==2.0"])) is None
