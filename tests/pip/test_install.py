"""pip inside envs with the real pip: its most precise error line, and locked wheels that travel.
A lock (or a record) keeps the URL each wheel came from on the machine that resolved it; another
machine that cannot reach that URL gets the very same file, by hash, through its own pip settings."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from envkit.pip.install import by_hash, pip_reason
from envkit.team.lock import read_lock
from tests.conftest import run_envkit, write_recipe
from tests.support.pipchannel import conda_style_pip_channel, homemade_wheel, index_pip_env, offline_pip_env, pip_channel, simple_index
from tests.team.test_sync import recorded_pip


def test_a_pip_failure_is_told_by_pips_most_precise_error_line() -> None:
    """pip's last line is not always its reason ("Got <hex>" after a hash mismatch, advice after
    a failed resolve); its last ERROR: line is (real pip, no index, nothing installed)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-input", "--no-index", "envkit-no-such-dist==9"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert pip_reason(proc.stderr) == "No matching distribution found for envkit-no-such-dist==9"
    assert pip_reason("") == "no output" and pip_reason("just one line\n") == "just one line"


def test_a_locked_file_is_named_by_version_and_hash_for_any_index() -> None:
    sha = "ab" * 32
    wheel = f"https://mirror.example/files/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl#sha256={sha}"
    assert by_hash("torch", wheel) == f"torch==2.13.0+cpu --hash=sha256:{sha}"
    assert by_hash("pkg", f"file:///srv/wheels/pkg-1.0.tar.gz#sha256={sha}") == f"pkg==1.0 --hash=sha256:{sha}"
    assert by_hash("pkg", f"https://x/download?id=7#sha256={sha}", "2.0") == f"pkg==2.0 --hash=sha256:{sha}"
    # no hash: nothing says which file is the right one; no version in the name: nothing to ask for
    assert by_hash("pkg", "https://x/pkg-1.0-py3-none-any.whl") is None
    assert by_hash("pkg", f"https://x/download?id=7#sha256={sha}") is None


def test_a_lock_made_through_one_mirror_installs_through_another(tmp_path: Path) -> None:
    """The lock is written behind the office's PyPI mirror; the GPU node reaches another one. The
    lock's URLs fail there, so the same files come through the node's own index, checked by hash;
    a mirror that serves other bytes under the same file name is refused, and nothing is left."""
    channel, links = pip_channel(tmp_path)
    wheels = sorted(links.glob("*.whl"))
    recipe = write_recipe(
        tmp_path / "r",
        "mirrored",
        f'envkit: 1\nname: mirrored\nchannels: [{channel.as_uri()}]\npython: "3.11"\npackages: [pip]\npip: [threadpoolctl, mpmath]\n',
    )
    quick = {**os.environ, "PIP_RETRIES": "0"}  # a refused connection fails at once instead of after pip's backoff
    with simple_index(tmp_path / "office", wheels) as office:
        locked = run_envkit("lock", str(recipe), env=index_pip_env(quick, office))
        assert locked.returncode == 0, locked.stderr
    linux = read_lock(recipe.parent / "mirrored.lock").for_platform("linux-64")
    assert linux is not None and [p.name for p in linux.pip] == ["mpmath", "threadpoolctl"]
    assert all(p.url.startswith(office.removesuffix("/simple") + "/files/") for p in linux.pip)

    with simple_index(tmp_path / "node", wheels) as node:
        created = run_envkit("create", str(recipe), "--locked", "--yes", "--no-probe", "--json", env=index_pip_env(quick, node))
    assert created.returncode == 0, created.stderr
    said = json.loads(created.stdout)["messages"]
    assert any("2 wheel(s) could not be installed from the URLs recorded for them" in m and "sha256-checked" in m for m in said), said
    prefix = tmp_path / "envs" / "mirrored"
    site = prefix / "lib" / "python3.11" / "site-packages"
    assert (site / "mpmath-1.3.0.dist-info").is_dir() and (site / "threadpoolctl-3.8.0.dist-info").is_dir()
    record = json.loads((prefix / "etc" / "envkit" / "record.json").read_text())
    # the record keeps where this env's files came from, with the lock's hashes
    assert [(p["name"], p["url"].split("#")[0].startswith(node.removesuffix("/simple"))) for p in record["pip_installed"]] == [
        ("mpmath", True),
        ("threadpoolctl", True),
    ]
    assert sorted(p["url"].split("#sha256=")[1] for p in record["pip_installed"]) == sorted(str(p.sha256) for p in linux.pip)
    # and the env is its lock: the same files are no change, wherever they came from (a conda-meta
    # record touched since makes sync take its full look instead of answering from the record)
    touched = next((prefix / "conda-meta").glob("pip-*.json"))
    os.utime(touched, (touched.stat().st_atime, touched.stat().st_mtime + 5))
    with simple_index(tmp_path / "node", wheels) as node:
        again = run_envkit("sync", "-p", str(prefix), "--locked", "--dry-run", "--json", env=index_pip_env(quick, node))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["data"]["pip"] == [], again.stdout

    # another mirror with other bytes under mpmath's file name: refused by the lock's hash
    other = tmp_path / "other-wheels"
    shutil.copytree(links, other)
    homemade_wheel(other, "mpmath", "1.3.0", {"mpmath/__init__.py": "raise SystemExit('not the locked mpmath')\n"})
    with simple_index(tmp_path / "rogue", sorted(other.glob("*.whl"))) as rogue:
        refused = run_envkit("create", str(recipe), "-n", "rogue", "--locked", "--yes", "--no-probe", env=index_pip_env(quick, rogue))
    assert refused.returncode == 4 and "Traceback" not in refused.stderr, refused.stderr
    first, _, rest = refused.stderr.partition("; nor did this machine's pip settings offer the same files: ")
    assert first.startswith("envkit: error: pip install failed: ") and rest, refused.stderr
    assert "PIP_INDEX_URL, PIP_FIND_LINKS or pip.conf" in refused.stderr
    assert not (tmp_path / "envs" / "rogue").exists()


def test_sync_puts_back_a_recorded_wheel_whose_file_moved(tmp_path: Path) -> None:
    """The env was made from a wheelhouse that has since moved (a new share, a cleaned laptop):
    a wheel pip uninstalled by hand comes back from where this machine's pip settings now point,
    the very file the record names by hash."""
    channel, links = pip_channel(tmp_path)
    recipe = write_recipe(
        tmp_path / "r",
        "moved",
        f'envkit: 1\nname: moved\nchannels: [{channel.as_uri()}]\npython: "3.11"\npackages: [pip]\npip: [mpmath]\n',
    )
    made = run_envkit("create", str(recipe), "--yes", "--no-probe", env=offline_pip_env(dict(os.environ), links))
    assert made.returncode == 0, made.stderr
    prefix = tmp_path / "envs" / "moved"
    wheel = links / "mpmath-1.3.0-py3-none-any.whl"
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    moved = tmp_path / "new-share"
    links.rename(moved)
    env = offline_pip_env(dict(os.environ), moved)
    subprocess.run([str(prefix / "bin" / "python"), "-m", "pip", "uninstall", "-q", "--yes", "mpmath"], check=True, env=env)

    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert synced.returncode == 0, synced.stderr
    assert "pip + mpmath 1.3.0 (as envkit installed it)" in synced.stdout
    assert "1 wheel(s) could not be installed from the URLs recorded for them" in synced.stdout + synced.stderr
    assert (prefix / "lib" / "python3.11" / "site-packages" / "mpmath-1.3.0.dist-info").is_dir()
    audited = run_envkit("audit", "-p", str(prefix), "--json")
    assert [f for f in json.loads(audited.stdout)["data"]["audits"][0]["findings"] if f["rule_id"] == "EK024"] == []
    record = json.loads((prefix / "etc" / "envkit" / "record.json").read_text())
    # the record names where this machine found it, so the next put-back or export goes there first
    assert [p["url"] for p in record["pip_installed"]] == [f"{(moved / wheel.name).as_uri()}#sha256={digest}"]


def test_pip_installs_into_a_conda_python_whatever_pip_require_virtualenv_says(tmp_path: Path) -> None:
    """Many developers set PIP_REQUIRE_VIRTUALENV=1 so that pip never installs into a system python
    by accident. A conda env's python is no venv, so pip refused every install envkit asked of it
    ("Could not find an activated virtualenv"), and the create failed. envkit installs into the env
    it made, on purpose; the test suite's other envs are venv-style shims, which pip accepts."""
    channel, links = conda_style_pip_channel(tmp_path)
    recipe = write_recipe(
        tmp_path / "r",
        "novenv",
        f'envkit: 1\nname: novenv\nchannels: [{channel.as_uri()}]\npython: "3.11"\npackages: [pip]\npip: [mpmath]\n',
    )
    env = {**offline_pip_env(dict(os.environ), links), "PIP_REQUIRE_VIRTUALENV": "1"}
    prefix = tmp_path / "envs" / "novenv"
    made = run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert made.returncode == 0, made.stderr
    python = str(prefix / "bin" / "python")
    where = "import sys, mpmath; print(sys.prefix == sys.base_prefix, mpmath.__file__.startswith(sys.prefix))"
    assert subprocess.run([python, "-c", where], capture_output=True, text=True, check=True).stdout.split() == ["True", "True"]
    refused = subprocess.run([python, "-m", "pip", "uninstall", "--yes", "mpmath"], capture_output=True, text=True, env=env, check=False)
    assert refused.returncode != 0 and "virtualenv" in refused.stderr  # what the user's setting does to pip run by hand
    subprocess.run([python, "-m", "pip", "uninstall", "--yes", "--quiet", "mpmath"], check=True, env={**env, "PIP_REQUIRE_VIRTUALENV": "0"})
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)  # the put-back
    assert synced.returncode == 0, synced.stderr
    assert subprocess.run([python, "-c", where], capture_output=True, text=True, check=True).stdout.split() == ["True", "True"]


def test_a_wheel_in_the_user_site_is_still_installed_into_the_env(tmp_path: Path) -> None:
    """A conda env's python puts the user site (~/.local/lib/pythonX.Y/site-packages) on sys.path:
    pip found mpmath there from an earlier `pip install --user`, said "already satisfied" and
    installed nothing into the env; the record named no wheel and the audit found the env clean,
    an env that worked only for that user on that machine."""
    channel, links = conda_style_pip_channel(tmp_path)
    recipe = write_recipe(
        tmp_path / "r",
        "usersite",
        f'envkit: 1\nname: usersite\nchannels: [{channel.as_uri()}]\npython: "3.11"\npackages: [pip]\npip: [mpmath]\n',
    )
    env = {**offline_pip_env(dict(os.environ), links), "HOME": str(tmp_path / "home")}
    env.pop("PYTHONNOUSERSITE", None)
    first = tmp_path / "envs" / "first"
    assert run_envkit("create", str(recipe), "-p", str(first), "--yes", "--no-probe", env=env).returncode == 0
    python = str(first / "bin" / "python")
    user = ["install", "--user", "--ignore-installed", "--quiet", "--root-user-action=ignore", "--no-warn-script-location", "mpmath"]
    subprocess.run([python, "-m", "pip", *user], check=True, env=env)
    user_site = subprocess.run(
        [python, "-c", "import site; print(site.getusersitepackages())"], env=env, capture_output=True, text=True, check=True
    )
    assert (Path(user_site.stdout.strip()) / "mpmath").is_dir()
    second = tmp_path / "envs" / "second"
    made = run_envkit("create", str(recipe), "-p", str(second), "--yes", "--no-probe", env=env)
    assert made.returncode == 0, made.stderr
    site = second / "lib" / "python3.11" / "site-packages"
    assert (site / "mpmath").is_dir()
    assert list(recorded_pip(second)) == ["mpmath"]
    # a wheel pip-installed by hand into the env, which the user site has too: sync takes the env's
    # copy away and leaves the user's alone
    by_hand = ["install", "--quiet", "--root-user-action=ignore", "threadpoolctl"]
    subprocess.run([str(second / "bin" / "python"), "-m", "pip", *by_hand], check=True, env={**env, "PYTHONNOUSERSITE": "1"})
    subprocess.run([python, "-m", "pip", *user[:-1], "threadpoolctl"], check=True, env=env)
    assert (site / "threadpoolctl.py").is_file() and (Path(user_site.stdout.strip()) / "threadpoolctl.py").is_file()
    synced = run_envkit("sync", "-p", str(second), "--yes", "--no-probe", env=env)
    assert synced.returncode == 0, synced.stderr
    assert not (site / "threadpoolctl.py").exists() and (Path(user_site.stdout.strip()) / "threadpoolctl.py").is_file()


def test_pip_settings_that_install_elsewhere_do_not_send_the_wheels_out_of_the_env(tmp_path: Path) -> None:
    """`user = true` in pip.conf (here PIP_USER=1) made pip install the recipe's wheels into
    ~/.local, not the env, and a target set for pip (PIP_TARGET) into that folder: the create
    succeeded and the env's own audit then found them missing. A lock (pip --target) failed
    outright with PIP_USER: pip cannot combine --user and --target."""
    channel, links = conda_style_pip_channel(tmp_path)
    recipe = write_recipe(
        tmp_path / "r",
        "piproot",
        f'envkit: 1\nname: piproot\nchannels: [{channel.as_uri()}]\npython: "3.11"\npackages: [pip]\npip: [mpmath]\n',
    )
    elsewhere = tmp_path / "elsewhere"
    env = {**offline_pip_env(dict(os.environ), links), "HOME": str(tmp_path / "home"), "PIP_USER": "1", "PIP_TARGET": str(elsewhere)}
    prefix = tmp_path / "envs" / "piproot"
    made = run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert made.returncode == 0, made.stderr
    assert (prefix / "lib" / "python3.11" / "site-packages" / "mpmath").is_dir()
    assert not (tmp_path / "home" / ".local").exists() and not elsewhere.exists()
    assert run_envkit("audit", "-p", str(prefix), env=env).returncode == 0
    assert run_envkit("lock", str(recipe), env=env).returncode == 0
