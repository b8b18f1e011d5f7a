"""A recipe channel that .condarc's custom_multichannels expands: envkit solves against every
channel it stands for, as conda does, instead of looking the name up under the channel alias."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import run_envkit, write_recipe
from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_tar_bz2


def test_a_multichannel_in_a_recipe_reaches_each_of_its_channels(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write_tar_bz2(first, PkgMeta("tool", "1.0", "0", depends=["helper"]), [PkgFile("share/tool", b"1")])
    write_tar_bz2(second, PkgMeta("helper", "1.0", "0"), [PkgFile("share/helper", b"1")])
    index_channel(first)
    index_channel(second)
    home = Path(os.environ["HOME"])
    (home / ".condarc").write_text(f"custom_multichannels:\n  team: [{first.as_uri()}, {second.as_uri()}]\n")
    recipe = write_recipe(tmp_path / "r", "multi", "envkit: 1\nname: multi\nchannels: [team]\npackages: [tool]\n")
    prefix = tmp_path / "envs" / "multi"
    made = run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe")
    assert made.returncode == 0, made.stderr
    assert (prefix / "share" / "tool").is_file() and (prefix / "share" / "helper").is_file()
