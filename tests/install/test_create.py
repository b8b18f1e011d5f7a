"""`envkit create` as a user runs it: real solves, real envs on disk, real signals and locks."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envkit.core.fsutil import exclusive_lock
from envkit.install.transaction import lock_for
from tests.conftest import run_envkit, write_recipe
from tests.support.importtime import imported, profiled
from tests.support.tiny import tiny_channel, tiny_recipe


def mirrors(replica: dict[str, Path]) -> list[str]:
    return [f"--mirror={n}={p.as_uri()}" for n, p in replica.items()]


def test_dry_run_writes_nothing_and_json_plan(replica: dict[str, Path], tmp_path: Path) -> None:
    proc = run_envkit("create", "pytorch-base", "--dry-run", "--json", *mirrors(replica))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["envkit_json"] == 1 and doc["command"] == "create" and doc["data"]["dry_run"] is True
    plan = doc["data"]["plan"]
    roles = {p["name"]: p["role"] for p in plan["packages"]}
    assert roles["libblas"] == "blas" and roles["pytorch"] == "pytorch" and roles["llvm-openmp"] == "openmp"
    assert {
        "name": "MKL_THREADING_LAYER",
        "action": "set",
        "value": "GNU",
        "entries": [],
        "separator": ":",
        "origin": None,
        "computed": None,
    } in plan["activation"]
    assert not (tmp_path / "envs").exists()


def test_human_plan_highlights_toolchain(replica: dict[str, Path]) -> None:
    proc = run_envkit("create", "pytorch-cpu-openblas", "--dry-run", *mirrors(replica))
    assert proc.returncode == 0
    assert "libopenblas" in proc.stdout and "openmp" in proc.stdout and "dry run: nothing was written" in proc.stdout


def test_unsatisfiable_exit_3_nothing_on_disk(replica: dict[str, Path], tmp_path: Path) -> None:
    # linux-64 alone: on the ARM platforms pytorch-base declares, an MKL spec beside OpenBLAS is refused before any solve (RC006)
    recipe = write_recipe(
        tmp_path / "r", "bad", "envkit: 1\nname: bad\nextends: [pytorch-base]\nplatforms: [linux-64]\npackages: [mkl >=2026]\n"
    )
    proc = run_envkit("create", str(recipe), "--yes", *mirrors(replica))
    assert proc.returncode == 3 and "cannot be solved" in proc.stderr and "Traceback" not in proc.stderr
    assert "'mkl >=2026' from" in proc.stderr
    assert not (tmp_path / "envs").exists()


def test_happy_path_registers_and_records(tmp_path: Path, isolated: Path) -> None:
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    proc = run_envkit("create", str(recipe), "--yes", "--no-probe")
    assert proc.returncode == 0, proc.stderr
    prefix = tmp_path / "envs" / "tiny"
    assert (prefix / "share" / "tool" / "version.txt").read_text() == "v1\n"
    # conda reads every conda-meta/*.json as a package record: envkit's own record is not one of them.
    assert sorted(p.name for p in (prefix / "conda-meta").glob("*.json")) == ["helper-1.0-0.json", "tool-1.0-0.json"]
    record = json.loads((prefix / "etc" / "envkit" / "record.json").read_text())
    assert record["envkit_record_version"] == 2 and record["recipe"]["name"] == "tiny"
    assert {"name": "OMP_NUM_THREADS", "action": "set", "value": "2", "entries": [], "separator": ":"} in record["activation"]["ops"]
    assert (prefix / "etc" / "conda" / "activate.d" / "envkit-tiny.sh").exists()
    registry = isolated / ".conda" / "environments.txt"
    assert registry.read_text().splitlines() == [str(prefix)]
    again = run_envkit("create", str(recipe), "--yes", "--no-probe")
    assert again.returncode == 2 and "already exists" in again.stderr and "--force" in again.stderr
    forced = run_envkit("create", str(recipe), "--yes", "--no-probe", "--force")
    assert forced.returncode == 0, forced.stderr
    assert registry.read_text().splitlines() == [str(prefix)]


def test_the_commands_it_prints_to_activate_can_be_pasted(tmp_path: Path) -> None:
    """conda takes "x$y" as an env name; printed bare, the pasted command activated "x"."""
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    proc = run_envkit("create", str(recipe), "-n", "x$y", "--yes", "--no-probe")
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("activate with: "))
    pasted = line.split("or run: ", 1)[1].replace(" -- CMD", " -- printenv CONDA_PREFIX")
    ran = subprocess.run(
        ["bash", "-c", pasted.replace("envkit ", f"{sys.executable} -m envkit ", 1)], capture_output=True, text=True, check=False
    )
    assert ran.returncode == 0 and ran.stdout.strip() == str(tmp_path / "envs" / "x$y"), (pasted, ran.stdout, ran.stderr)


def test_a_dry_run_says_what_the_create_itself_would_refuse(tmp_path: Path) -> None:
    """The plan all the same (as conda's dry run), and the refusal the real run would stop at: an
    existing env without --force, and a folder that is no env, which --force does not help."""
    channel = tiny_channel(tmp_path)
    recipe = tiny_recipe(tmp_path, channel)
    assert run_envkit("create", str(recipe), "--yes", "--no-probe").returncode == 0
    dry = run_envkit("create", str(recipe), "--dry-run")
    assert dry.returncode == 0 and "tool" in dry.stdout
    assert f"channels: {channel.as_uri()}\n" in dry.stdout  # a channel given as a URL is shown once
    assert f"the create itself would stop here: {tmp_path / 'envs' / 'tiny'} already exists (pass --force" in dry.stdout
    assert "would stop here" not in run_envkit("create", str(recipe), "--dry-run", "--force").stdout
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "sub" / "results.csv").write_text("precious\n")
    for extra in ((), ("--force",)):
        refused = run_envkit("create", str(recipe), "-p", str(data), "--yes", "--no-probe", *extra)
        assert refused.returncode == 2 and "exists and is not a conda env; refusing to replace it" in refused.stderr
        assert "--force" not in refused.stderr  # it would not help
    assert "would stop here: " in run_envkit("create", str(recipe), "-p", str(data), "--dry-run", "--force").stdout
    assert (data / "sub" / "results.csv").read_text() == "precious\n"


def test_corrupt_package_is_caught_and_nothing_is_left(tmp_path: Path, isolated: Path) -> None:
    channel = tiny_channel(tmp_path)
    recipe = tiny_recipe(tmp_path, channel)
    archive = channel / "linux-64" / "tool-1.0-0.tar.bz2"
    data = bytearray(archive.read_bytes())
    data[-10] ^= 0xFF
    archive.write_bytes(bytes(data))
    proc = run_envkit("create", str(recipe), "--yes", "--no-probe")
    assert proc.returncode == 4, proc.stderr
    assert "does not match its channel index" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "envs" / "tiny").exists()
    assert not (isolated / ".conda" / "environments.txt").exists()


def test_force_restores_the_old_env_when_the_new_one_fails(tmp_path: Path) -> None:
    good = tiny_channel(tmp_path / "good")
    assert run_envkit("create", str(tiny_recipe(tmp_path / "g", good)), "--yes", "--no-probe").returncode == 0
    prefix = tmp_path / "envs" / "tiny"
    before = sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*"))
    bad = tiny_channel(tmp_path / "bad", payload=b"v2\n")
    archive = bad / "linux-64" / "tool-1.0-0.tar.bz2"
    archive.write_bytes(archive.read_bytes()[:-20] + b"\0" * 20)
    proc = run_envkit("create", str(tiny_recipe(tmp_path / "b", bad)), "--yes", "--no-probe", "--force")
    assert proc.returncode == 4, proc.stderr
    assert sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*")) == before
    assert (prefix / "share" / "tool" / "version.txt").read_text() == "v1\n"
    assert not list(prefix.parent.glob(".tiny.envkit-old-*"))


def test_a_held_lock_fails_cleanly(tmp_path: Path) -> None:
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    prefix = tmp_path / "envs" / "tiny"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from envkit.core.fsutil import exclusive_lock\n"
            f"with exclusive_lock(Path({str(lock_for(prefix))!r}), 'x'):\n    print('held', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        proc = run_envkit("create", str(recipe), "--yes", "--no-probe")
        assert proc.returncode == 2 and "locked by another envkit process" in proc.stderr
        assert not prefix.exists()
    finally:
        holder.kill()
        holder.wait()
    with exclusive_lock(lock_for(prefix), "test"):
        pass


def test_concurrent_creates_one_wins(tmp_path: Path) -> None:
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    cmd = [sys.executable, "-m", "envkit", "create", str(recipe), "--yes", "--no-probe"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = [(p.wait(timeout=300), p.stderr.read() if p.stderr else "") for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes.count(0) == 1 and codes.count(2) == 2, results
    assert all(("locked by another" in err or "already exists" in err) for code, err in results if code == 2)


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_ctrl_c_mid_install_rolls_back(wheel_channel: Path, tmp_path: Path, isolated: Path, cache: str) -> None:
    """SIGINT to a real `envkit create` while it installs torch: exit 130, nothing left, registry
    untouched. Cold: while it extracts; warm: every archive cached, while it only links (a second
    or less), signalled as soon as the staging env has its conda-meta."""
    from tests.conftest import payload_recipe

    recipe = payload_recipe(tmp_path / "r", wheel_channel, name="interrupted")
    env = dict(os.environ, ENVKIT_PKGS_DIR=str(tmp_path / f"{cache}-cache"))
    if cache == "warm":
        warm = run_envkit("create", str(recipe), "-p", str(tmp_path / "warm"), "--yes", "--no-probe", env=env)
        assert warm.returncode == 0, warm.stderr
        shutil.rmtree(tmp_path / "warm")
        (isolated / ".conda" / "environments.txt").unlink()
    proc = subprocess.Popen(
        [sys.executable, "-m", "envkit", "create", str(recipe), "--yes", "--no-probe"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    prefix = tmp_path / "envs" / "interrupted"
    deadline = time.monotonic() + 120
    while not list(prefix.parent.glob(".interrupted.envkit-staging-*/conda-meta")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    assert proc.poll() is None, "create finished before it could be interrupted"
    if cache == "cold":
        time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    code = proc.wait(timeout=120)
    stderr = proc.stderr.read() if proc.stderr else ""
    assert code == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    time.sleep(1.0)
    # nothing at all: no staging env, and no lock file for an env that is not there
    assert not prefix.exists() and list(prefix.parent.iterdir()) == []
    assert not (isolated / ".conda" / "environments.txt").exists()


@pytest.mark.parametrize("flag", ["--mirror=conda-forge", "--mirror=="])
def test_bad_mirror_flag(flag: str) -> None:
    proc = run_envkit("create", "pytorch-base", "--dry-run", flag)
    assert proc.returncode == 2 and "expected NAME=URL" in proc.stderr


def test_the_legacy_recipe_passes_its_own_plan_audit(replica: dict[str, Path]) -> None:
    """On pytorch + defaults, the channels its builds were made for: intel-openmp (defaults' MKL) and
    llvm-openmp (<16, pytorch's pin) are both on disk, which the audit reports as a warning that the
    probe settles (only what a process loads can be judged); nothing is an error."""
    proc = run_envkit("create", "pytorch-legacy-channel", "--dry-run", "--json", *mirrors(replica))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)["data"]
    severities = {f["rule_id"]: f["severity"] for f in data["findings"]}
    assert severities["EK004"] == "warning" and "error" not in severities.values()
    channels = {p["channel"].rstrip("/").rsplit("/", 1)[-1] for p in data["plan"]["packages"]}
    assert channels == {"pytorch", "defaults"}
    evidence = next(f["evidence"] for f in data["findings"] if f["rule_id"] == "EK004")
    assert "on disk, not proven loaded" in evidence


def test_a_probe_s_verdict_is_kept_only_for_the_record_it_started_from(tmp_path: Path) -> None:
    """The probe runs outside the env's lock (seconds, a torch import, a DDP job). A sync or a fix
    that changes the env meanwhile makes its verdict about an env that is gone: it is not written
    over theirs. A short holder of the lock is waited for."""
    from dataclasses import replace

    from envkit.install.create import keep_verdict
    from envkit.prefix.record import read_record, record_digest, write_record

    prefix = tmp_path / "envs" / "tiny"
    assert run_envkit("create", str(tiny_recipe(tmp_path, tiny_channel(tmp_path))), "--yes", "--no-probe").returncode == 0
    basis = record_digest(prefix)
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import time\nfrom pathlib import Path\nfrom envkit.core.fsutil import exclusive_lock\n"
         f"with exclusive_lock(Path({str(lock_for(prefix))!r}), 'x'):\n    print('held', flush=True); time.sleep(1)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    assert keep_verdict(prefix, {"status": "pass"}, True, basis) is None  # waited for the holder
    holder.wait()
    record = read_record(prefix)
    assert record is not None and record.healthy is True and record.probe is not None
    assert {k: v for k, v in record.probe.items() if k != "at"} == {"status": "pass"} and "T" in str(record.probe["at"])

    basis = record_digest(prefix)
    write_record(prefix, replace(record, updated="a sync ran meanwhile"))
    changed = record_digest(prefix)
    assert keep_verdict(prefix, {"status": "fail"}, False, basis) == (
        "the env changed while it was probed: its record keeps no verdict from this probe"
    )
    after = read_record(prefix)
    assert record_digest(prefix) == changed and after is not None and after.healthy is True


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_a_create_on_a_full_disk_says_so_and_leaves_nothing(tmp_path: Path, cache: str) -> None:
    """On a real full filesystem: one line with the OS error and what to do (exit 74, as every
    write the filesystem refuses), and no staging directory left beside the env; with the package
    extracted in the cache already (warm) as when it must be extracted first (cold)."""
    from tests.support.fullfs import run_in_small_fs

    channel = tiny_channel(tmp_path, payload=b"x" * 400_000)  # tool's one file: more than the filesystem holds
    recipe = tiny_recipe(tmp_path, channel)
    if cache == "warm":
        assert run_envkit("create", str(recipe), "-p", str(tmp_path / "warm"), "--yes", "--no-probe").returncode == 0
    mount = tmp_path / "small"
    script = f"""
import json, os, subprocess, sys
out = subprocess.run([sys.executable, "-m", "envkit", "create", {str(recipe)!r}, "-p", {str(mount / "env")!r}, "--yes", "--no-probe"],
                     capture_output=True, text=True)
print(json.dumps({{"code": out.returncode, "stderr": out.stderr, "left": sorted(n for n in os.listdir({str(mount)!r}) if not n.startswith(".filler"))}}))
"""
    seen = run_in_small_fs(mount, 256, script, dict(os.environ))
    assert seen["code"] == 74 and "Traceback" not in seen["stderr"], seen["stderr"]
    assert "failed to link tool-1.0-0" in seen["stderr"] and "No space left on device (os error 28)" in seen["stderr"], seen["stderr"]
    assert "(free space there (df -h)" in seen["stderr"]
    assert seen["left"] == [], seen["left"]


def test_a_locked_create_loads_no_pip_machinery(tmp_path: Path) -> None:
    """A locked create of a recipe with no pip list needs none of pip's machinery."""
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    assert run_envkit("lock", str(recipe)).returncode == 0
    assert run_envkit("create", str(recipe), "-p", str(tmp_path / "warm"), "--locked", "--yes", "--no-probe").returncode == 0
    prefix = tmp_path / "env"
    done = run_envkit("create", str(recipe), "-p", str(prefix), "--locked", "--yes", "--no-probe", env=profiled())
    assert done.returncode == 0, done.stderr[-2000:]
    assert (prefix / "share" / "tool" / "version.txt").read_text() == "v1\n"
    loaded = imported(done.stderr)
    assert {"rattler", "envkit.install.create", "envkit.prefix.record"} <= loaded
    assert "envkit.pip.install" not in loaded


FLUSHES = """
import json, os, sys
flushed = []
real_fsync = os.fsync
def spy(fd):
    flushed.append(os.readlink(f"/proc/self/fd/{fd}"))
    return real_fsync(fd)
os.fsync = spy
from envkit.cli.main import main
code = main(sys.argv[1:])
print(json.dumps(flushed))
sys.stdout.flush()
os._exit(code)
"""


def test_a_create_flushes_the_registry_and_nothing_it_stages(tmp_path: Path, isolated: Path) -> None:
    """What create writes into its staging env (the record, conda-meta records rewritten) appears
    whole through the staging env's rename into place, as rattler's thousands of linked files do:
    an fsync there, right after the install, waits for the journal to commit all of them (a few ms
    of every create). The registry, a file other envs share, is still written atomically and flushed."""
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    prefix = tmp_path / "env"
    proc = subprocess.run(
        [sys.executable, "-c", FLUSHES, "create", str(recipe), "-p", str(prefix), "--yes", "--no-probe"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    flushed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [Path(p).parent for p in flushed] == [isolated / ".conda"], flushed
    assert (prefix / "etc" / "envkit" / "record.json").is_file()
    assert (isolated / ".conda" / "environments.txt").read_text().splitlines() == [str(prefix)]
