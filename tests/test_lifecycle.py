"""`envkit list` and `envkit remove` over real envs: envkit's, and ones another tool made."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from envkit.prefix import envs
from envkit.solve import backend
from tests.conftest import run_envkit
from tests.support.terminal import converse
from tests.support.tiny import tiny_channel, tiny_recipe


def plain_env(tmp_path: Path, channel: Path) -> Path:
    """An env made by plain rattler and registered as conda registers envs: no envkit record."""
    prefix = tmp_path / "envs" / "plain"
    records = backend.solve([channel.as_uri()], ["helper"], "linux-64", backend.virtual_packages("linux-64"))
    backend.install(records, prefix, tmp_path / "pkgs", ["helper"], None)
    envs.register(prefix)
    return prefix


def test_list_shows_recipe_health_and_drift(tmp_path: Path) -> None:
    channel = tiny_channel(tmp_path)
    recipe = tiny_recipe(tmp_path, channel)
    assert run_envkit("create", str(recipe), "--yes", "--no-probe").returncode == 0
    plain = plain_env(tmp_path, channel)
    made = tmp_path / "envs" / "tiny"
    # a package removed behind envkit's back
    (made / "conda-meta" / "helper-1.0-0.json").unlink()
    proc = run_envkit("list", "--json")
    assert proc.returncode == 0, proc.stderr
    listed = {e["prefix"]: e for e in json.loads(proc.stdout)["data"]}
    assert listed[str(made)]["envkit"] is True and listed[str(made)]["recipe"] == "tiny"
    assert listed[str(made)]["health"] == "not probed" and listed[str(made)]["created"]
    assert listed[str(made)]["drift"] == ["- helper 1.0 0 (removed since)"]
    assert listed[str(plain)]["envkit"] is False and listed[str(plain)]["recipe"] is None
    assert listed[str(made)]["recipe_files"] == "unchanged" and listed[str(plain)]["recipe_files"] is None
    human = run_envkit("list")
    assert human.returncode == 0 and "tiny" in human.stdout and str(plain) in human.stdout
    assert "changed since" not in human.stdout
    # a narrow terminal or log: a path too long for its column folds onto the next lines, never "…"
    narrow = run_envkit("list", env={**os.environ, "COLUMNS": "50"}).stdout.splitlines()
    header = narrow[0]
    env_column = header.index("recipe")
    assert not any("…" in line for line in narrow)
    assert str(made) in "".join(line[:env_column].strip() for line in narrow[1:])

    # the recipe edited (or its source updated): the env has something to sync to, and list says so
    recipe.write_text(recipe.read_text() + "# a comment is an edit too: sync --dry-run tells what it changes\n")
    listed = {e["prefix"]: e for e in json.loads(run_envkit("list", "--json").stdout)["data"]}
    assert listed[str(made)]["recipe_files"] == "changed"
    human = run_envkit("list")
    assert "tiny (changed since)" in human.stdout and "envkit sync --dry-run -n NAME" in human.stdout
    recipe.unlink()
    assert "tiny (its file is gone)" in run_envkit("list").stdout


def test_remove_an_envkit_env_and_a_plain_one(tmp_path: Path, isolated: Path) -> None:
    channel = tiny_channel(tmp_path)
    assert run_envkit("create", str(tiny_recipe(tmp_path, channel)), "--yes", "--no-probe").returncode == 0
    plain = plain_env(tmp_path, channel)
    made = tmp_path / "envs" / "tiny"
    registry = isolated / ".conda" / "environments.txt"
    assert registry.read_text().splitlines() == [str(made), str(plain)]

    off_tty = run_envkit("remove", "-n", "tiny")
    assert off_tty.returncode == 2 and "--yes" in off_tty.stderr and made.is_dir()
    declined, screen = converse([sys.executable, "-m", "envkit", "remove", "-n", "tiny"], b"n", question=b"everything in it? [y/N]")
    assert declined == 0 and "aborted: nothing was removed" in screen and made.is_dir()
    # Ctrl-D at the question (the end of input) is a no, as the default is; it was a traceback
    ended, screen = converse([sys.executable, "-m", "envkit", "remove", "-n", "tiny"], b"\x04", question=b"everything in it? [y/N]")
    assert ended == 0 and "aborted: nothing was removed" in screen and "Traceback" not in screen and made.is_dir()

    gone = run_envkit("remove", "-n", "tiny", "--yes", "--json")
    assert gone.returncode == 0, gone.stderr
    assert json.loads(gone.stdout)["data"] == {"prefix": str(made), "envkit": True, "kernels": []}
    assert not made.exists() and registry.read_text().splitlines() == [str(plain)]
    # no renamed-aside copy left, nor the env's lock file (envkit.core.fsutil.discard_lock)
    assert sorted(made.parent.iterdir()) == [plain]

    other = run_envkit("remove", "-p", str(plain), "--yes")
    assert other.returncode == 0, other.stderr
    assert not plain.exists() and registry.read_text() == ""

    missing = run_envkit("remove", "-n", "tiny", "--yes")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr and missing.stderr.count("\n") == 1


def test_remove_refuses_the_active_env(tmp_path: Path) -> None:
    channel = tiny_channel(tmp_path)
    assert run_envkit("create", str(tiny_recipe(tmp_path, channel)), "--yes", "--no-probe").returncode == 0
    made = tmp_path / "envs" / "tiny"
    proc = run_envkit("remove", "-n", "tiny", "--yes", env={**os.environ, "CONDA_PREFIX": str(made)})
    assert proc.returncode == 2 and "is the active env" in proc.stderr and made.is_dir()


def test_an_env_reached_through_a_link_is_the_env_where_it_points(tmp_path: Path) -> None:
    """~/envs/x -> /scratch/envs/x, where home is small. A create through the link makes (or
    replaces) the env where it points and keeps the link; the link and the directory share one lock;
    list shows the env once; remove takes the env and then the link. Before, remove renamed the link
    aside, failed to delete it (rmtree refuses a link), said "removed" and left the env whole; a
    create --force left the old env behind under a new name."""
    from envkit.install.transaction import env_lock

    channel = tiny_channel(tmp_path)
    recipe = tiny_recipe(tmp_path, channel)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    real = scratch / "tiny"
    link = tmp_path / "envs" / "tiny"  # in the envs dir, so -n tiny finds it too
    link.parent.mkdir()
    link.symlink_to(real)

    made = run_envkit("create", str(recipe), "-p", str(link), "--yes", "--no-probe")
    assert made.returncode == 0, made.stderr
    assert link.is_symlink() and (real / "conda-meta" / "tool-1.0-0.json").is_file()
    again = run_envkit("create", str(recipe), "-n", "tiny", "--force", "--yes", "--no-probe")
    assert again.returncode == 0, again.stderr
    assert link.is_symlink() and (real / "etc" / "envkit" / "record.json").is_file()
    assert sorted(p.name for p in scratch.iterdir()) == [".tiny.envkit-lock", "tiny"]  # no old env left aside
    assert sorted(p.name for p in link.parent.iterdir()) == ["tiny"]

    listed = json.loads(run_envkit("list", "--json").stdout)["data"]
    assert [e["prefix"] for e in listed if e["recipe"] == "tiny"] == [str(real)]  # registered by its own path, once

    recipe.write_text(recipe.read_text().replace("omp_num_threads: 2", "omp_num_threads: 1"))  # a change: sync takes the lock
    with env_lock(real):  # another envkit working on the env by its own path
        busy = run_envkit("sync", "-p", str(link), "--yes", "--no-probe")
    assert busy.returncode == 2 and "is locked by another envkit process" in busy.stderr, busy.stderr
    synced = run_envkit("sync", "-p", str(link), "--yes", "--no-probe")
    assert synced.returncode == 0 and "OMP_NUM_THREADS='1'" in (real / "etc" / "conda" / "activate.d" / "envkit-tiny.sh").read_text()

    removed = run_envkit("remove", "-p", str(link), "--yes")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.strip() == f"removed {real} and the link {link} to it"
    assert not link.is_symlink() and not real.exists()
    assert sorted(p.name for p in scratch.iterdir()) == []
    assert str(real) not in envs.environments_txt().read_text()
