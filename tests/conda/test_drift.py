"""EK024 with the real clients: conda install/remove and pip install change an envkit env behind
its back; audit names each difference, list shows it, and sync puts the env back, pip's changes
included (a wheel pip installed over a conda package's files too), all or nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import rattler

from envkit.prefix.record import sync_journal_path
from tests.conftest import run_envkit, write_recipe
from tests.support.conda import Conda
from tests.support.condapkg import PkgMeta, index_channel
from tests.support.fullfs import run_in_small_fs
from tests.support.pipchannel import (
    editable_project,
    homemade_wheel,
    offline_pip_env,
    old_pip_wheel,
    pip_channel,
    two_pythons_pip_channel,
    wheelhouse,
)
from tests.support.tiny import tiny_channel
from tests.support.wheelchannel import convert_wheel
from tests.team.test_sync import made_pip_env, snapshot


def audit(prefix: Path) -> list[dict[str, object]]:
    proc = run_envkit("audit", "-p", str(prefix), "--json")
    return [f for f in json.loads(proc.stdout)["data"]["audits"][0]["findings"] if f["rule_id"] == "EK024"]


def test_conda_changes_are_drift_and_sync_undoes_them(conda: Conda, tmp_path: Path) -> None:
    channel = tiny_channel(tmp_path)
    recipe = write_recipe(tmp_path / "r", "drifty", f"envkit: 1\nname: drifty\nchannels: [{channel.as_uri()}]\npackages: [tool]\n")
    assert run_envkit("create", str(recipe), "--yes", "--no-probe").returncode == 0
    prefix = tmp_path / "envs" / "drifty"
    assert audit(prefix) == []

    more = tiny_channel(tmp_path / "more", extra=(PkgMeta("extra", "1.0", "0"),))
    conda.ok("install", "-y", "-q", "-p", str(prefix), "--override-channels", "-c", more.as_uri(), "extra")
    conda.ok("remove", "-y", "-q", "-p", str(prefix), "--force", "tool")
    found = audit(prefix)  # one finding per difference
    assert {str(f["evidence"]) for f in found} == {"- tool 1.0 0 (removed since)", "+ extra 1.0 0 (added since envkit installed the env)"}
    assert all(f["severity"] == "warning" and "envkit sync" in str(f["fix"]) for f in found)
    # drift is a warning: the exit code counts errors unless CI asks to fail on warnings
    assert run_envkit("audit", "-p", str(prefix)).returncode == 0
    gated = run_envkit("audit", "-p", str(prefix), "--fail-on", "warning", "--json")
    assert gated.returncode == 1 and json.loads(gated.stdout)["exit_code"] == 1
    hidden = run_envkit("audit", "-p", str(prefix), "--fail-on", "warning", "--min-severity", "error")
    assert hidden.returncode == 2 and hidden.stderr.count("\n") == 1 and "does not show" in hidden.stderr
    listed = {e["prefix"]: e for e in json.loads(run_envkit("list", "--json").stdout)["data"]}
    assert "- tool 1.0 0 (removed since)" in listed[str(prefix)]["drift"]

    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe")
    assert synced.returncode == 0, synced.stderr
    assert "+ tool 1.0 0" in synced.stdout and "- extra 1.0 0" in synced.stdout
    assert audit(prefix) == []
    assert run_envkit("audit", "-p", str(prefix), "--fail-on", "warning").returncode == 0
    assert "tool" in conda.ok("list", "-p", str(prefix))


@dataclass(frozen=True)
class PipEnv:
    """An env envkit made from a recipe with pip in it, offline: pip reads the find-links folder."""

    recipe: Path
    body: str
    prefix: Path
    env: dict[str, str]
    links: Path


def pip_env(
    tmp_path: Path, name: str, *, pip_list: str = "", packages: str = "pip", prepare: Callable[[Path, Path], None] | None = None
) -> PipEnv:
    """`prepare(channel, links)` runs before the create (more packages, more wheels)."""
    channel, links = pip_channel(tmp_path)
    if prepare is not None:
        prepare(channel, links)
    body = f'envkit: 1\nname: {name}\nchannels: [{channel.as_uri()}]\npython: "3.11"\npackages: [{packages}]\n'
    body += f"pip: [{pip_list}]\n" if pip_list else ""
    recipe = write_recipe(tmp_path / "r", name, body)
    env = offline_pip_env(dict(os.environ), links)
    made = run_envkit("create", str(recipe), "--yes", "--no-probe", env=env)
    assert made.returncode == 0, made.stderr
    return PipEnv(recipe, body, tmp_path / "envs" / name, env, links)


def test_pip_install_is_drift(tmp_path: Path) -> None:
    made = pip_env(tmp_path, "pipenv")
    prefix, env = made.prefix, made.env
    subprocess.run([str(prefix / "bin" / "python"), "-m", "pip", "install", "-q", "mpmath"], check=True, env=env, capture_output=True)
    found = audit(prefix)
    assert [f["evidence"] for f in found] == ["+ pip mpmath 1.3.0 (pip-installed since)"]
    # sync is the fix the finding gives: it was "nothing to do" while pip's changes stayed
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert synced.returncode == 0, synced.stderr
    assert "pip - mpmath 1.3.0 (pip-installed since)" in synced.stdout
    assert audit(prefix) == []
    assert python(prefix, "import mpmath", env).returncode == 1  # gone whole: no folder left to import as a package


def python(prefix: Path, code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(prefix / "bin" / "python"), "-c", code], env=env, capture_output=True, text=True, check=False)


def pip(prefix: Path, *args: str, env: dict[str, str]) -> None:
    subprocess.run([str(prefix / "bin" / "python"), "-m", "pip", *args], check=True, env=env, capture_output=True)


def test_a_recorded_wheel_pip_removed_or_changed_comes_back_by_its_url(tmp_path: Path) -> None:
    made = pip_env(tmp_path, "pipped", pip_list="threadpoolctl, mpmath")
    prefix, env, links = made.prefix, made.env, made.links
    pip(prefix, "uninstall", "--yes", "threadpoolctl", env=env)
    homemade_wheel(links, "mpmath", "9.9", {"mpmath/__init__.py": "__version__ = '9.9'\n"})
    pip(prefix, "install", "mpmath==9.9", env=env)
    assert {str(f["evidence"]) for f in audit(prefix)} == {
        "- pip threadpoolctl 3.8.0 (removed or changed since)",
        "- pip mpmath 1.3.0 (removed or changed since)",
        "+ pip mpmath 9.9 (pip-installed since)",
    }
    # a recorded file that is gone: one line with the way out, and the env as it was
    wheel = next(links.glob("threadpoolctl-*.whl"))
    wheel.rename(tmp_path / wheel.name)
    before = {rel: data for rel, data in snapshot(prefix).items() if "__pycache__" not in rel}
    failed = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert failed.returncode == 4 and "Traceback" not in failed.stderr, failed.stderr
    assert "envkit: error: pip could not put back mpmath 1.3.0, threadpoolctl 3.8.0 from the files envkit recorded: " in failed.stderr
    by_hand = f"{prefix}/bin/python -m pip install mpmath==1.3.0 threadpoolctl==3.8.0; then sync again"
    assert f"was rolled back to what it was (if those files are gone, install the same versions by hand: {by_hand})\n" in failed.stderr
    assert {rel: data for rel, data in snapshot(prefix).items() if "__pycache__" not in rel} == before
    (tmp_path / wheel.name).rename(wheel)
    # the wheels come back from the URLs the record keeps: no index (and none here: PIP_NO_INDEX)
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env={**env, "PIP_FIND_LINKS": str(tmp_path / "nowhere")})
    assert synced.returncode == 0, synced.stderr
    shown = [line.strip() for line in synced.stdout.splitlines() if line.strip().startswith("pip ")]
    assert shown == [
        "pip - mpmath 9.9 (pip-installed since)",
        "pip + mpmath 1.3.0 (as envkit installed it)",
        "pip + threadpoolctl 3.8.0 (as envkit installed it)",
    ]
    assert audit(prefix) == []
    assert python(prefix, "import mpmath, threadpoolctl; print(mpmath.__version__)", env).stdout.strip() == "1.3.0"


def over_conda_env(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """(recipe, prefix, env): mpmath 1.3.0 from the channel as a conda package, then 9.9 pip-installed
    over it (pip uninstalls the conda package's files to do it, as it does numpy's or torch's)."""

    def conda_mpmath(channel: Path, links: Path) -> None:
        convert_wheel(next(wheelhouse().glob("mpmath-*.whl")), channel, keep_record=True)
        index_channel(channel)

    made = pip_env(tmp_path, "over", packages="pip, mpmath", prepare=conda_mpmath)
    recipe, prefix, env, links = made.recipe, made.prefix, made.env, made.links
    homemade_wheel(links, "mpmath", "9.9", {"mpmath/__init__.py": "__version__ = '9.9'\n"})
    pip(prefix, "install", "mpmath==9.9", env=env)
    assert python(prefix, "import mpmath; print(mpmath.__version__)", env).stdout.strip() == "9.9"
    return recipe, prefix, env


def test_a_wheel_over_a_conda_package_is_removed_and_the_package_linked_again(conda: Conda, tmp_path: Path) -> None:
    """Taking the wheel away alone would leave conda's mpmath without its files (pip removed them):
    sync links the conda package again, the fix EK006 gives by hand."""
    _, prefix, env = over_conda_env(tmp_path)
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert synced.returncode == 0, synced.stderr
    assert "pip - mpmath 9.9 (pip-installed since; over conda's mpmath, linked again)" in synced.stdout
    assert python(prefix, "import mpmath; print(mpmath.__version__, mpmath.mpf(2) ** 10)", env).stdout.split() == ["1.3.0", "1024.0"]
    assert audit(prefix) == []
    listed = [line.split() for line in conda.ok("list", "-p", str(prefix)).splitlines() if line.startswith("mpmath ")]
    assert [entry[:3] for entry in listed] == [["mpmath", "1.3.0", "pypi_py3_0"]], listed  # conda's, not '<pip>'
    assert listed[0][3].endswith("/pipchannel"), listed
    assert run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env).stdout.endswith("nothing to do\n")


def test_a_failed_sync_puts_back_the_wheel_it_had_taken_away(tmp_path: Path) -> None:
    """All or nothing with pip too: the wheel pip-installed by hand was moved aside, not uninstalled,
    so the rollback brings it back as it was, with no index to fetch it from."""
    recipe, prefix, env = over_conda_env(tmp_path)
    recipe.write_text(recipe.read_text() + "pip: [nothing-such==1.0]\n")  # fails after the wheel is gone and mpmath relinked
    meta = {p.name: p.read_bytes() for p in (prefix / "conda-meta").iterdir()}
    before = {rel: data for rel, data in snapshot(prefix).items() if "__pycache__" not in rel}
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert synced.returncode == 4 and "Traceback" not in synced.stderr, synced.stderr
    assert "pip install failed" in synced.stderr and "was rolled back to what it was" in synced.stderr
    assert "pip - mpmath 9.9 (pip-installed since; over conda's mpmath, linked again)" in synced.stdout  # taken away, then put back
    assert {rel: data for rel, data in snapshot(prefix).items() if "__pycache__" not in rel} == before
    assert {p.name: p.read_bytes() for p in (prefix / "conda-meta").iterdir()} == meta
    assert python(prefix, "import mpmath; print(mpmath.__version__)", env).stdout.strip() == "9.9"


def test_a_sync_killed_while_it_moves_a_wheel_aside_is_put_back_by_the_next_run(tmp_path: Path) -> None:
    """kill -9 once the wheel's files are being moved into the journal (some may be moved, some not):
    the next envkit run that touches the env moves them back, and relinks nothing it should not."""
    _, prefix, env = over_conda_env(tmp_path)
    before = {rel: data for rel, data in snapshot(prefix).items() if "__pycache__" not in rel}
    stashed = sync_journal_path(prefix) / "pip-stash"
    proc = subprocess.Popen(
        [sys.executable, "-m", "envkit", "sync", "-p", str(prefix), "--yes", "--no-probe"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 120
    while not stashed.is_dir():
        assert proc.poll() is None, f"sync ended before it could be killed: {proc.stderr.read() if proc.stderr else ''}"
        assert time.monotonic() < deadline, "sync never began moving the wheel aside"
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    pending = run_envkit("sync", "-p", str(prefix), "--dry-run", env=env)
    assert pending.returncode == 0 and "an interrupted sync is pending" in pending.stdout, pending.stderr
    undone = run_envkit("audit", "--fix", "--yes", "-p", str(prefix), env=env)
    assert f"rolled {prefix} back to what it was before an interrupted sync" in undone.stdout, undone.stderr
    dry = run_envkit("sync", "-p", str(prefix), "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "pip - mpmath 9.9 (pip-installed since; over conda's mpmath, linked again)" in dry.stdout
    assert {rel: data for rel, data in snapshot(prefix).items() if "__pycache__" not in rel} == before
    assert python(prefix, "import mpmath; print(mpmath.__version__)", env).stdout.strip() == "9.9"


def test_a_wheel_pip_removed_that_the_recipe_drops_too_is_not_put_back(tmp_path: Path) -> None:
    made = pip_env(tmp_path, "dropped", pip_list="threadpoolctl, mpmath")
    recipe, body, prefix, env, links = made.recipe, made.body, made.prefix, made.env, made.links
    pip(prefix, "uninstall", "--yes", "mpmath", env=env)
    recipe.write_text(body.replace("pip: [threadpoolctl, mpmath]", "pip: [threadpoolctl]"))
    (links / next(links.glob("mpmath-*.whl")).name).unlink()  # it could not come back now
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert synced.returncode == 0, synced.stderr
    assert [line.strip() for line in synced.stdout.splitlines() if line.strip().startswith("pip ")] == ["pip - mpmath"]
    assert [f["evidence"] for f in audit(prefix)] == []


def test_a_pip_list_grown_by_one_keeps_the_wheels_already_there_recorded(tmp_path: Path) -> None:
    """pip's report names only what it installed: the record kept threadpoolctl out, the next audit
    called it drift and the next sync would have taken it away."""
    made = pip_env(tmp_path, "grown", pip_list="threadpoolctl")
    recipe, body, prefix, env = made.recipe, made.body, made.prefix, made.env
    recipe.write_text(body.replace("pip: [threadpoolctl]", "pip: [threadpoolctl, mpmath]"))
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert synced.returncode == 0, synced.stderr
    assert [line.strip() for line in synced.stdout.splitlines() if line.strip().startswith("pip ")] == ["pip + mpmath"]
    assert [f["evidence"] for f in audit(prefix)] == []
    again = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert again.stdout.endswith("nothing to do\n"), again.stdout
    assert python(prefix, "import mpmath, threadpoolctl", env).returncode == 0


def test_an_editable_install_is_the_users_working_copy_not_drift(tmp_path: Path) -> None:
    """`pip install -e .` of one's own project is how an ML repo is worked on in its env: audit does
    not call it drift, sync leaves it in place, and exports say it was left out."""
    made = pip_env(tmp_path, "dev", pip_list="threadpoolctl")
    prefix, env = made.prefix, made.env
    project = editable_project(tmp_path / "myproj", "myproj")
    pip(prefix, "install", "-e", str(project), env=env)
    pip(prefix, "install", "mpmath", env=env)  # a plain pip install still is drift
    assert [f["evidence"] for f in audit(prefix)] == ["+ pip mpmath 1.3.0 (pip-installed since)"]
    locked = tmp_path / "now.lock"
    assert run_envkit("export", "-p", str(prefix), "--format", "lock", "-o", str(locked), env=env).returncode == 0
    assert locked.read_text().endswith(
        "# not kept: mpmath 1.3.0, pip-installed with no file URL envkit knows (put it in the recipe's pip list)\n"
        f"# not kept: myproj 0.1, an editable install of {project.as_uri()}; pip install -e it again\n"
    )
    read_back = rattler.LockFile.from_path(locked).default_environment()  # the comments do not trouble rattler
    assert read_back is not None and len(read_back.pypi_packages()["linux-64"]) == 1  # threadpoolctl alone
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert synced.returncode == 0, synced.stderr
    assert [line.strip() for line in synced.stdout.splitlines() if line.strip().startswith("pip ")] == [
        "pip - mpmath 1.3.0 (pip-installed since)"
    ]
    assert python(prefix, "import myproj; print(myproj.WORKING_COPY)", env).stdout.strip() == "True"
    assert run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env).stdout.endswith("nothing to do\n")
    exported = run_envkit("export", "-p", str(prefix), "--format", "environment-yml", env=env).stdout
    assert f"# not kept: myproj 0.1, an editable install of {project.as_uri()}; pip install -e it again" in exported
    assert "myproj ==" not in exported and "myproj @" not in exported and "myproj==" not in exported


def test_wheels_an_older_sync_left_unrecorded_are_kept_when_the_recipe_needs_them(tmp_path: Path) -> None:
    """When a pip list grew, envkit's sync recorded only what pip newly installed: the wheels
    already there read as 'pip-installed since'. Taking them away would break the recipe's own pip
    list, so a wheel it names, or one such a wheel requires, is recorded instead."""

    def app_wheel(channel: Path, links: Path) -> None:
        homemade_wheel(links, "app", "1.0", {"app/__init__.py": "import mpmath\n"}, requires=("mpmath>=1.0",))

    made = pip_env(tmp_path, "older", pip_list="app, threadpoolctl", prepare=app_wheel)
    prefix, env = made.prefix, made.env
    record_file = prefix / "etc" / "envkit" / "record.json"
    record = json.loads(record_file.read_text())
    assert [p["name"] for p in record["pip_installed"]] == ["app", "mpmath", "threadpoolctl"]
    # the record that sync wrote when `pip: [app]` grew by threadpoolctl
    record["pip_installed"] = [p for p in record["pip_installed"] if p["name"] == "threadpoolctl"]
    record_file.write_text(json.dumps(record))
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert synced.returncode == 0, synced.stderr
    assert [line.strip() for line in synced.stdout.splitlines() if line.strip().startswith("pip ")] == [
        "pip = app 1.0 (the recipe's pip list needs it; recorded now)",
        "pip = mpmath 1.3.0 (the recipe's pip list needs it; recorded now)",
    ]
    assert python(prefix, "import app, threadpoolctl", env).returncode == 0
    assert [f["evidence"] for f in audit(prefix)] == []
    assert run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env).stdout.endswith("nothing to do\n")


def test_pip_changes_are_undone_and_rolled_back_across_filesystems(tmp_path: Path) -> None:
    """lib/ a link to another filesystem (a fast local disk, say): the wheels cannot be renamed
    into the journal, so they are copied there and back, and sync and its rollback still work."""
    made = pip_env(tmp_path, "split")
    script = f"""
import json, os, shutil, subprocess, sys
from pathlib import Path
prefix, recipe, fast = Path({str(made.prefix)!r}), Path({str(made.recipe)!r}), Path({str(tmp_path / "fast")!r})
shutil.move(str(prefix / "lib"), str(fast / "lib"))
(prefix / "lib").symlink_to(fast / "lib")
python = str(prefix / "bin" / "python")
def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True)
out = {{}}
out["pip"] = run(python, "-m", "pip", "install", "mpmath").returncode
synced = run(sys.executable, "-m", "envkit", "sync", "-p", str(prefix), "--yes", "--no-probe")
out["synced"], out["said"] = synced.returncode, synced.stdout + synced.stderr
out["gone"] = run(python, "-c", "import mpmath").returncode
run(python, "-m", "pip", "install", "mpmath")
recipe.write_text(recipe.read_text() + "pip: [nothing-such==1.0]\\n")
failed = run(sys.executable, "-m", "envkit", "sync", "-p", str(prefix), "--yes", "--no-probe")
out["failed"], out["stderr"] = failed.returncode, failed.stderr
out["back"] = run(python, "-c", "import mpmath; print(mpmath.__version__)").stdout.strip()
print(json.dumps(out))
"""
    seen = run_in_small_fs(tmp_path / "fast", 64 * 1024, script, made.env)
    assert seen["synced"] == 0 and seen["gone"] == 1, seen
    assert seen["failed"] == 4 and "was rolled back to what it was" in seen["stderr"], seen
    assert seen["back"] == "1.3.0", seen


def test_conda_moving_python_leaves_the_wheels_behind_and_sync_brings_both_back(conda: Conda, tmp_path: Path) -> None:
    """`conda install python=3.12` in an env with wheels: they stay in lib/python3.11, which the new
    python does not read. envkit saw them there and called the env clean; now the audit names them
    missing, and the sync back to the recipe's python keeps them recorded (the first try recorded
    none: pip had nothing to install, and only what pip installs was recorded)."""
    channel, links, other = two_pythons_pip_channel(tmp_path)
    host = f"{sys.version_info[0]}.{sys.version_info[1]}"
    _, prefix, env = made_pip_env(tmp_path, "back", channel, links, python=host)
    conda.ok("install", "-y", "-q", "-p", str(prefix), "--override-channels", "-c", channel.as_uri(), f"python={other}", "pip")
    assert {str(f["evidence"]) for f in audit(prefix)} >= {
        "- pip mpmath 1.3.0 (removed or changed since)",
        "- pip threadpoolctl 3.8.0 (removed or changed since)",
    }

    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert synced.returncode == 0, synced.stderr
    assert f"installed anew for python {host}" in synced.stdout
    record = json.loads((prefix / "etc" / "envkit" / "record.json").read_text())
    assert {p["name"]: p["version"] for p in record["pip_installed"]} == {"mpmath": "1.3.0", "threadpoolctl": "3.8.0"}
    assert audit(prefix) == []
    assert json.loads(run_envkit("sync", "-p", str(prefix), "--json", env=env).stdout)["data"]["noop"] is True


def test_a_pip_too_old_for_envkits_pip_steps_stops_a_create_and_a_conda_downgrade_is_undone(conda: Conda, tmp_path: Path) -> None:
    """pip before 22.2 has no `install --dry-run --report`, which every one of envkit's pip steps
    runs: a recipe whose pip list met such a pip failed midway with pip's "no such option:
    --report". The plan's audit (EK035) now stops it before anything is written; an envkit env
    whose pip `conda install` took back that far is named, and sync brings its pip back."""
    channel, links = pip_channel(tmp_path)
    convert_wheel(old_pip_wheel(), channel)
    index_channel(channel)
    env = offline_pip_env(dict(os.environ), links)
    pinned = write_recipe(
        tmp_path / "r",
        "oldpip",
        f'envkit: 1\nname: oldpip\nchannels: [{channel.as_uri()}]\npython: "3.11"\npackages: ["pip <22"]\npip: [mpmath]\n',
    )
    refused = run_envkit("create", str(pinned), "--yes", "--no-probe", env=env)
    assert refused.returncode == 1 and "EK035" in refused.stdout + refused.stderr, refused.stdout + refused.stderr
    assert not (tmp_path / "envs" / "oldpip").exists()

    _, prefix, env = made_pip_env(tmp_path, "newpip", channel, links, pip="mpmath")
    conda.ok("install", "-y", "-q", "-p", str(prefix), "--override-channels", "-c", channel.as_uri(), "pip=21.3.1")
    found = json.loads(run_envkit("audit", "-p", str(prefix), "--json", env=env).stdout)["data"]["audits"][0]["findings"]
    assert [f["evidence"] for f in found if f["rule_id"] == "EK035"] == [
        "pip 21.3.1, with the pip wheels mpmath: envkit's pip steps need pip 22.2 or later"
    ]
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert synced.returncode == 0, synced.stderr
    assert "EK035" not in run_envkit("audit", "-p", str(prefix), env=env).stdout
