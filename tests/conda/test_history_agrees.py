"""conda and envkit agree about an env's history and requests, with the real conda: after a conda
request that moves a package, `envkit sync` puts the package back, ends the request, and writes a
revision conda reads as the change it was; a later unrelated `conda install` keeps the recipe's
version, and `conda env export --from-history` is the recipe."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from envkit.prefix.history import requested_specs
from tests.conftest import run_envkit, write_recipe
from tests.support.conda import Conda
from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_tar_bz2


def _channel(root: Path) -> Path:
    channel = root / "mklch"
    write_tar_bz2(channel, PkgMeta("mkl", "2024.1.0", "0"), [PkgFile("lib/libmkl_rt.so.2", b"2024.1\n")])
    write_tar_bz2(channel, PkgMeta("mkl", "2024.2.0", "0"), [PkgFile("lib/libmkl_rt.so.2", b"2024.2\n")])
    write_tar_bz2(channel, PkgMeta("tool", "1.0", "0", depends=["mkl"]), [PkgFile("share/tool/v", b"1\n")])
    write_tar_bz2(channel, PkgMeta("tqdm", "4.0", "0"), [PkgFile("share/tqdm/v", b"4\n")])
    index_channel(channel)
    return channel


def _versions(conda: Conda, prefix: Path) -> dict[str, str]:
    listed = json.loads(conda.ok("list", "-p", str(prefix), "--json"))
    return {p["name"]: p["version"] for p in listed}


def _states(conda: Conda, prefix: Path) -> list[set[str]]:
    """Each revision's packages as conda's own History reconstructs them."""
    python = Path(conda.exe).parent.parent / "bin" / "python"
    code = (
        "import json, sys; from conda.history import History; "
        "print(json.dumps([sorted(s) for _, s in History(sys.argv[1]).construct_states()]))"
    )
    out = subprocess.run([str(python), "-c", code, str(prefix)], capture_output=True, text=True, check=True).stdout
    return [set(s) for s in json.loads(out)]


def test_a_sync_after_a_conda_request_ends_it_and_conda_keeps_the_recipes_version(conda: Conda, tmp_path: Path) -> None:
    channel = _channel(tmp_path)
    recipe = write_recipe(tmp_path / "r", "mkly", f"envkit: 1\nname: mkly\nchannels: [{channel.as_uri()}]\npackages: [tool]\n")
    prefix = tmp_path / "envs" / "mkly"
    made = run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe")
    assert made.returncode == 0, made.stderr
    assert _versions(conda, prefix)["mkl"] == "2024.2.0"
    on = ("-y", "-q", "-p", str(prefix), "--override-channels", "-c", channel.as_uri())

    conda.ok("install", *on, "mkl=2024.1.0")
    assert _versions(conda, prefix)["mkl"] == "2024.1.0"
    assert "mkl" in requested_specs(prefix)
    audit = json.loads(run_envkit("audit", "-p", str(prefix), "--json").stdout)
    stale = [f["evidence"] for f in audit["data"]["audits"][0]["findings"] if f["rule_id"] == "EK041"]
    assert stale == ["conda-meta/history requests mkl=2024.1.0, which the recipe does not ask for"], stale

    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe")
    assert synced.returncode == 0, synced.stderr
    assert "conda's request mkl=2024.1.0 gave way to the recipe's specs" in synced.stdout
    assert _versions(conda, prefix)["mkl"] == "2024.2.0"
    assert requested_specs(prefix) == {"tool": "tool"}

    # every revision as conda reconstructs it holds packages; the last is what is installed
    states = _states(conda, prefix)
    assert all(states), states
    installed = {f"{p['channel']}::{p['dist_name']}" for p in json.loads(conda.ok("list", "-p", str(prefix), "--json"))}
    assert {s.rsplit("::", 1)[-1] for s in states[-1]} == {s.rsplit("::", 1)[-1] for s in installed}
    revisions = conda.ok("list", "--revisions", "-p", str(prefix))
    last = revisions.rsplit("(rev ", 1)[1]
    assert last.startswith("2)") and re.search(r"mkl  \{2024\.1\.0 \(\S+\) -> 2024\.2\.0 \(", last), revisions

    exported = conda.ok("env", "export", "--from-history", "-p", str(prefix))
    dependencies = exported.split("dependencies:", 1)[1].split("\n")
    assert [d.strip(" -") for d in dependencies if d.strip().startswith("-")] == ["tool"], exported

    conda.ok("install", *on, "tqdm")
    after = _versions(conda, prefix)
    assert after["mkl"] == "2024.2.0" and after["tqdm"] == "4.0"
    assert (prefix / "lib" / "libmkl_rt.so.2").read_text() == "2024.2\n"


def test_the_guard_names_a_kept_request_that_moves_the_env_away_from_its_recipe(conda: Conda, tmp_path: Path) -> None:
    channel = _channel(tmp_path)
    recipe = write_recipe(tmp_path / "r", "mkly", f"envkit: 1\nname: mkly\nchannels: [{channel.as_uri()}]\npackages: [tool]\n")
    prefix = tmp_path / "envs" / "mkly"
    assert run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    on = ("-y", "-p", str(prefix), "--override-channels", "-c", channel.as_uri())
    conda.ok("install", *on, "mkl=2024.1.0")
    # a sync by an envkit that kept the request would leave it: put the recipe's mkl back by hand
    conda.ok("install", *on, "mkl=2024.2.0", "--no-update-deps")
    history = (prefix / "conda-meta" / "history").read_text()
    (prefix / "conda-meta" / "history").write_text(history.replace("'mkl=2024.2.0'", "'tool'"))
    assert requested_specs(prefix).get("mkl") == "mkl=2024.1.0"
    moved = conda.run("install", *on, "tqdm")
    assert moved.returncode == 0, moved.stderr
    assert "EK041 warning: mkl 2024.2.0 -> 2024.1.0, held by conda's request mkl=2024.1.0" in moved.stderr, moved.stderr
