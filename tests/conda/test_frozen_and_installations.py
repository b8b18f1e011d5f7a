"""What conda protects, envkit protects too: an env frozen under CEP 22 (`conda-meta/frozen`, which
conda 26 honours) is changed by no envkit command unless it is told to for that command, and a
conda installation is never deleted whole by `envkit remove` or `create --force`, which deleted
one that was not the conda in use, with the envs inside it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.conftest import run_envkit
from tests.support.conda import Conda
from tests.support.tiny import tiny_channel, tiny_recipe

SHARED_CONDA = Path(__file__).resolve().parents[2].parent / "shared" / "conda" / "install.sh"


def activation_script(prefix: Path) -> Path:
    return prefix / "etc" / "conda" / "activate.d" / "envkit-tiny.sh"


def test_a_frozen_env_is_left_as_conda_leaves_it_unless_overridden(conda: Conda, tmp_path: Path) -> None:
    channel = tiny_channel(tmp_path)
    recipe = tiny_recipe(tmp_path, channel)
    prefix = tmp_path / "envs" / "tiny"
    assert run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    marker = prefix / "conda-meta" / "frozen"
    marker.write_text(json.dumps({"message": "the nightly training job runs from it"}))
    # the real client's reading of the marker: it refuses, and names the same flag envkit takes
    refused = conda.run("install", "-y", "-q", "-p", str(prefix), "--override-channels", "-c", channel.as_uri(), "helper")
    assert refused.returncode != 0 and "--override-frozen" in refused.stdout + refused.stderr
    record = (prefix / "etc" / "envkit" / "record.json").read_bytes()
    activation_script(prefix).unlink()  # something for audit --fix and conda doctor --fix to fix
    said = "is frozen (conda-meta/frozen): the nightly training job runs from it; envkit does not"

    recipe.write_text(recipe.read_text().replace("omp_num_threads: 2", "omp_num_threads: 3"))  # something to sync
    for args, doing in (
        (("sync", "-p", str(prefix), "--yes", "--no-probe"), "sync"),
        (("create", str(recipe), "-p", str(prefix), "--force", "--yes", "--no-probe"), "replace"),
        (("remove", "-p", str(prefix), "--yes"), "remove"),
    ):
        proc = run_envkit(*args)
        assert proc.returncode == 2 and f"{prefix} {said} {doing} it" in proc.stderr, (args, proc.stderr)
        assert "--override-frozen" in proc.stderr and "Traceback" not in proc.stderr
    fixed = run_envkit("audit", "-p", str(prefix), "--fix", "--yes")
    assert fixed.returncode == 1 and f"--fix: {prefix} {said} fix it" in fixed.stdout + fixed.stderr
    doctor = conda.run("doctor", "-p", str(prefix), "--fix", "--yes")
    assert f"envkit: error: {prefix} {said} fix it" in doctor.stderr, doctor.stderr
    assert not activation_script(prefix).exists() and (prefix / "etc" / "envkit" / "record.json").read_bytes() == record
    assert run_envkit("sync", "-p", str(prefix), "--dry-run").returncode == 0  # looking changes nothing
    listed = json.loads(run_envkit("list", "--json").stdout)["data"]
    assert [e["frozen"] for e in listed if e["prefix"] == str(prefix)] == ["the nightly training job runs from it"]
    assert "tiny is frozen (conda-meta/frozen): the nightly training job runs from it" in run_envkit("list").stdout

    # told to, for one command each; the marker stays, so conda still refuses afterwards
    assert run_envkit("audit", "-p", str(prefix), "--fix", "--yes", "--override-frozen").returncode == 0
    assert activation_script(prefix).is_file()
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", "--override-frozen")
    assert synced.returncode == 0, synced.stderr
    assert "OMP_NUM_THREADS='3'" in activation_script(prefix).read_text()
    replaced = run_envkit("create", str(recipe), "-p", str(prefix), "--force", "--yes", "--no-probe", "--override-frozen")
    assert replaced.returncode == 0, replaced.stderr
    assert json.loads(marker.read_text()) == {"message": "the nightly training job runs from it"}
    again = conda.run("install", "-y", "-q", "-p", str(prefix), "--override-channels", "-c", channel.as_uri(), "helper")
    assert again.returncode != 0 and "frozen" in again.stdout + again.stderr
    assert run_envkit("remove", "-p", str(prefix), "--yes", "--override-frozen").returncode == 0
    assert not prefix.exists()


def test_a_second_conda_installation_is_not_removed_or_replaced(conda: Conda, tmp_path: Path) -> None:
    """A conda that is not the one in use (CONDA_EXE names another), with an env its own conda made
    in its envs folder: `envkit remove` deleted all of it."""
    root = tmp_path / "other-conda"
    subprocess.run(["bash", str(SHARED_CONDA), str(root)], check=True, capture_output=True, timeout=600)
    other = Conda(root / "bin" / "conda", conda.pkgs)
    channel = tiny_channel(tmp_path)
    other.ok("create", "-y", "-q", "-n", "inner", "--override-channels", "-c", channel.as_uri(), "tool")
    inner = root / "envs" / "inner"
    assert (inner / "conda-meta").is_dir()
    recipe = tiny_recipe(tmp_path, channel)
    for args, doing in (
        (("remove", "-p", str(root), "--yes"), "remove"),
        (("create", str(recipe), "-p", str(root), "--force", "--yes", "--no-probe"), "replace"),
    ):
        proc = run_envkit(*args)
        assert proc.returncode == 2, proc.stderr
        assert f"{root}: envkit does not {doing} it, it holds other envs in its envs folder (inner)" in proc.stderr
    assert (inner / "conda-meta").is_dir() and (root / "bin" / "conda").is_file()
    # the conda in use: its base by name too, as conda refuses it
    in_use = {**os.environ, "CONDA_EXE": str(root / "bin" / "conda")}
    for removal in (["remove", "-n", "base", "--yes"], ["remove", "-p", str(root), "--yes", "--override-frozen"]):
        proc = run_envkit(*removal, env=in_use)
        assert proc.returncode == 2 and "it is the base env of the conda in use" in proc.stderr, proc.stderr
    # what is inside it goes as any env does, and its conda agrees it is gone
    assert run_envkit("remove", "-p", str(inner), "--yes").returncode == 0
    assert str(inner) not in other.ok("env", "list")

    # with no env left in it, it is still a conda installation: conda is in it (pip put it there,
    # no conda record), with its envs folder, and without that folder, with its own .condarc
    def refused_removal() -> str:
        proc = run_envkit("remove", "-p", str(root), "--yes")
        assert proc.returncode == 2, proc.stderr
        return proc.stderr

    said = f"{root}: envkit does not remove it, it is a conda installation (conda is installed in it, with"
    assert f"{said} its envs folder)" in refused_removal()
    assert not any(p.is_dir() for p in (root / "envs").iterdir())  # only conda's own marks are left in it
    shutil.rmtree(root / "envs")
    assert f"{said} its own .condarc)" in refused_removal()
    assert (root / "bin" / "conda").is_file()
    other.ok("--version")


def test_the_default_activation_env_is_not_removed_as_conda_refuses(conda: Conda, tmp_path: Path) -> None:
    """conda 26's `default_activation_env` (the env `conda activate` with no name activates): conda
    refuses to remove it, by name from .condarc or by path from CONDA_DEFAULT_ACTIVATION_ENV."""
    envs = tmp_path / "envs"
    work = conda.create(envs / "work", [tiny_channel(tmp_path)], ["tool"])
    home = Path(os.environ["HOME"])
    (home / ".condarc").write_text("default_activation_env: work\n")
    by_name = {**os.environ, "CONDA_ENVS_DIRS": str(envs)}
    by_path = {**os.environ, "CONDA_DEFAULT_ACTIVATION_ENV": str(work)}
    theirs = conda.run("env", "remove", "-y", "-p", str(work), env=conda.environ(CONDA_ENVS_DIRS=str(envs)))
    assert theirs.returncode != 0 and "default_activation_env" in theirs.stdout + theirs.stderr
    for removal, env in ((["remove", "-n", "work", "--yes"], by_name), (["remove", "-p", str(work), "--yes"], by_path)):
        proc = run_envkit(*removal, env=env)
        assert proc.returncode == 2, proc.stderr
        assert f"{work} is conda's default_activation_env" in proc.stderr and "conda config --set default_activation_env" in proc.stderr
    assert (work / "conda-meta").is_dir()
    (home / ".condarc").unlink()
    assert run_envkit("remove", "-n", "work", "--yes", env=by_name).returncode == 0
    assert not work.exists()
