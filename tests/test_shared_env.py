"""An env one user made and another uses (a team's /opt/envs): what the other user, run for real
as uid nobody, can do with it and how they are told what they cannot. Nothing they try may leave a
traceback or change the env."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from envkit.install.transaction import lock_for
from tests.conftest import run_envkit
from tests.support.condapkg import PkgMeta
from tests.support.otheruser import NOBODY, other_user_conda, other_user_envkit, run_as_other
from tests.support.tiny import tiny_channel, tiny_recipe


def one_line_error(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("envkit: error: "), proc.stderr
    return proc.stderr


def test_a_teammate_reads_an_env_they_may_not_change(shared_dir: Path, tmp_path: Path) -> None:
    shared = shared_dir
    channel = tiny_channel(shared, extra=(PkgMeta("extra", "1.0", "0"),))
    recipe = tiny_recipe(shared, channel)
    prefix = shared / "envs" / "tiny"
    assert run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    # the same recipe from a channel only root may read (in pytest's 0700 tmp dir)
    private = tiny_recipe(shared, tiny_channel(tmp_path, extra=(PkgMeta("extra", "1.0", "0"),)), name="private")
    private_env = shared / "envs" / "private"
    assert run_envkit("create", str(private), "-p", str(private_env), "--yes", "--no-probe").returncode == 0
    envkit = other_user_envkit(shared / "home")
    listing = sorted(p.name for p in (prefix / "conda-meta").iterdir())

    audit = run_as_other(envkit, "audit", "-p", str(prefix), "--json")
    assert audit.returncode == 0, audit.stderr
    assert [f["rule_id"] for f in json.loads(audit.stdout)["data"]["audits"][0]["findings"]] == []

    # the recipe gained a package: a dry run shows it to anyone, a sync is refused with the difference shown
    for path in (recipe, private):
        path.write_text(path.read_text().replace("packages: [tool]", "packages: [tool, extra]"))
    dry = run_as_other(envkit, "sync", "-p", str(prefix), "--dry-run")
    assert dry.returncode == 0 and "+ extra 1.0 0" in dry.stdout, dry.stderr
    refused = run_as_other(envkit, "sync", "-p", str(prefix), "--yes", "--no-probe")
    assert "+ extra 1.0 0" in refused.stdout
    assert f"{prefix}: you may not write to it (it belongs to root)" in one_line_error(refused, 2)
    unreadable = run_as_other(envkit, "sync", "-p", str(private_env), "--yes", "--no-probe")
    assert "cannot read" in one_line_error(unreadable, 2) and "(Permission denied)" in unreadable.stderr

    made = run_as_other(envkit, "create", str(recipe), "-p", str(shared / "envs" / "mine"), "--yes", "--no-probe")
    assert f"{shared / 'envs'} is not writable by you" in one_line_error(made, 2)

    script = prefix / "etc" / "conda" / "activate.d" / "envkit-tiny.sh"
    script.write_text(script.read_text() + "# edited\n")  # EK014: --fix would rewrite it
    fixed = run_as_other(envkit, "audit", "-p", str(prefix), "--fix", "--yes")
    assert f"permission denied: {script}" in one_line_error(fixed, 2)

    # records only root may read (as rattler writes them): one finding that says so, not a
    # corrupt record and a removed package per file
    for path in (prefix / "conda-meta").glob("*.json"):
        path.chmod(0o600)
    audit = run_as_other(envkit, "audit", "-p", str(prefix), "--json")
    ids = [f["rule_id"] for f in json.loads(audit.stdout)["data"]["audits"][0]["findings"]]
    assert ids == ["EK014", "EK030"], audit.stdout
    assert sorted(p.name for p in (prefix / "conda-meta").iterdir()) == listing  # nothing the other user ran changed the env


def test_a_teammate_who_may_write_waits_for_the_env_s_lock(shared_dir: Path) -> None:
    """Two users who may both change one env take one lock: the file beside the env. A lock in each
    user's cache let the second run "recover" (roll back) what the first was in the middle of."""
    recipe = tiny_recipe(shared_dir, tiny_channel(shared_dir, extra=(PkgMeta("extra", "1.0", "0"),)))
    prefix = shared_dir / "envs" / "tiny"
    assert run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    lock = lock_for(prefix)
    assert lock == shared_dir / "envs" / ".tiny.envkit-lock" and lock.is_file()
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(prefix)], check=True)  # the teammate may change it
    envkit = other_user_envkit(shared_dir / "home")
    recipe.write_text(recipe.read_text().replace("packages: [tool]", "packages: [tool, extra]"))
    script = f"import time; from pathlib import Path; from envkit.core.fsutil import exclusive_lock\nwith exclusive_lock(Path({str(lock)!r}), 'x'):\n    print('held', flush=True); time.sleep(60)"
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        busy = run_as_other(envkit, "sync", "-p", str(prefix), "--yes", "--no-probe")
        assert "locked by another envkit process" in one_line_error(busy, 2)
        assert not (prefix / "conda-meta" / "extra-1.0-0.json").exists()
    finally:
        holder.kill()
        holder.wait()
    synced = run_as_other(envkit, "sync", "-p", str(prefix), "--yes", "--no-probe")
    assert synced.returncode == 0 and (prefix / "conda-meta" / "extra-1.0-0.json").is_file(), synced.stderr


def test_a_record_an_older_envkit_kept_private_is_found_and_opened(shared_dir: Path) -> None:
    """envkit wrote etc/envkit/record.json 0600 until it set its writes right: in a shared env every
    teammate's envkit then failed on it. The audit still runs for them and says so (EK030); the
    other commands say who can fix it; the owner's --fix opens it."""
    recipe = tiny_recipe(shared_dir, tiny_channel(shared_dir))
    prefix = shared_dir / "envs" / "tiny"
    assert run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    record = prefix / "etc" / "envkit" / "record.json"
    record.chmod(0o600)
    envkit = other_user_envkit(shared_dir / "home")

    audit = run_as_other(envkit, "audit", "-p", str(prefix), "--json")
    assert audit.returncode == 0, audit.stderr
    findings = json.loads(audit.stdout)["data"]["audits"][0]["findings"]
    assert [(f["rule_id"], f["evidence"]) for f in findings] == [
        (
            "EK030",
            "etc/envkit/record.json, envkit's record of the env, only its owner can read, in an env its group and other users can reach",
        )
    ]
    assert run_as_other(envkit, "toolchain", "-p", str(prefix)).returncode == 0  # it reads the env as the audit does
    for args in (("sync", "--dry-run"), ("export", "--format", "explicit"), ("activation", "show")):
        refused = run_as_other(envkit, *args, "-p", str(prefix))
        assert "cannot be read (Permission denied)" in one_line_error(refused, 2) and "envkit audit --fix' (see EK030)" in refused.stderr

    fixed = run_envkit("audit", "-p", str(prefix), "--fix", "--yes")
    assert fixed.returncode == 0 and "chmod go+r etc/envkit/record.json" in fixed.stdout, fixed.stdout
    assert record.stat().st_mode & 0o777 == 0o644
    assert run_as_other(envkit, "sync", "-p", str(prefix), "--dry-run").returncode == 0


def test_a_teammate_s_own_conda_reads_and_activates_an_env_envkit_made_and_synced(shared_dir: Path) -> None:
    """The real client, run as the teammate (uid nobody): conda's own list, explicit list, export
    and activate on an env envkit created and then synced, records added by the sync included."""
    recipe = tiny_recipe(shared_dir, tiny_channel(shared_dir, extra=(PkgMeta("extra", "1.0", "0"),)))
    prefix = shared_dir / "envs" / "tiny"
    assert run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    recipe.write_text(
        recipe.read_text().replace("packages: [tool]", "packages: [tool, extra]").replace("omp_num_threads: 2", "omp_num_threads: 3")
    )
    assert run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    as_nobody, conda = other_user_conda(shared_dir / "home")

    listed = run_as_other(as_nobody, str(conda), "list", "-p", str(prefix), "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(p["name"] for p in json.loads(listed.stdout)) == ["extra", "helper", "tool"]
    explicit = run_as_other(as_nobody, str(conda), "list", "--explicit", "-p", str(prefix))
    assert explicit.returncode == 0 and explicit.stdout.count(".tar.bz2") == 3, explicit.stderr
    exported = run_as_other(as_nobody, str(conda), "env", "export", "-p", str(prefix))
    assert exported.returncode == 0 and "extra=1.0=0" in exported.stdout, exported.stderr
    script = (
        f'eval "$({conda} shell.bash hook)"; conda activate {prefix} && echo "in: $OMP_NUM_THREADS"; '
        'conda deactivate; echo "out: ${OMP_NUM_THREADS-unset}"'
    )
    activated = run_as_other(as_nobody, "bash", "-c", script)
    assert activated.returncode == 0 and activated.stdout.splitlines() == ["in: 3", "out: unset"], (activated.stdout, activated.stderr)


def test_a_kernel_installed_for_everyone_is_named_to_a_teammate_and_never_fatal(shared_dir: Path) -> None:
    """A Jupyter kernel an admin installed system-wide for a team's env: a teammate's audit names
    it, their --fix says in one line they may not write it (and changes nothing), and their own
    env's create, over a kernel they may not write, succeeds and says which it left."""
    channel = tiny_channel(shared_dir)
    recipe = tiny_recipe(shared_dir, channel)
    prefix = shared_dir / "envs" / "tiny"
    assert run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    system = shared_dir / "jupyter"
    own = shared_dir / "own"
    own.mkdir()
    os.chown(own, NOBODY, NOBODY)
    specs = {}
    for name, env in (("team", prefix), ("mine", own / "env")):
        spec = system / "kernels" / name / "kernel.json"
        spec.parent.mkdir(parents=True)
        spec.write_text(json.dumps({"argv": [str(env / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"]}))
        specs[name] = spec
    argv = other_user_envkit(shared_dir / "home")
    at = argv.index("-i") + 1
    envkit = [*argv[:at], f"JUPYTER_PATH={system}", *argv[at:]]
    before = {p: p.read_bytes() for p in [*specs.values(), *(prefix / "etc").rglob("*")] if p.is_file()}

    audit = run_as_other(envkit, "audit", "-p", str(prefix), "--json")
    (finding,) = json.loads(audit.stdout)["data"]["audits"][0]["findings"]
    assert finding["rule_id"] == "EK036" and str(specs["team"]) in finding["evidence"] and "no OMP_NUM_THREADS=2" in finding["evidence"]
    fixed = run_as_other(envkit, "audit", "-p", str(prefix), "--fix", "--yes")
    assert f"{specs['team']}: you may not write to this Jupyter kernel's spec" in one_line_error(fixed, 2)
    assert {p: p.read_bytes() for p in before} == before

    # the teammate's own kernel for the team's env: theirs to fix, and the env stays as it is
    specs["team"].unlink()
    theirs = shared_dir / "home" / ".local" / "share" / "jupyter" / "kernels" / "team" / "kernel.json"
    theirs.parent.mkdir(parents=True)
    theirs.write_text(json.dumps({"argv": [str(prefix / "bin" / "python"), "-m", "ipykernel_launcher"]}))
    for path in (theirs, *theirs.parents[:5]):
        os.chown(path, NOBODY, NOBODY)
    fixed = run_as_other(envkit, "audit", "-p", str(prefix), "--fix", "--yes")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert json.loads(theirs.read_text())["env"] == {"OMP_NUM_THREADS": "2"}
    assert {p: p.read_bytes() for p in before if p.is_relative_to(prefix)} == {p: b for p, b in before.items() if p.is_relative_to(prefix)}

    made = run_as_other(envkit, "create", str(recipe), "-p", str(own / "env"), "--yes", "--no-probe")
    assert made.returncode == 0, made.stderr
    assert f"Jupyter kernel left without the env's settings: {specs['mine']}: Permission denied" in made.stdout
    assert specs["mine"].read_bytes() == before[specs["mine"]]


def test_an_env_another_user_keeps_private_is_said_to_be_theirs(shared_dir: Path) -> None:
    """mode 700: the teammate may not even look inside. Said as that, of the env, not as a file of
    envkit's they never asked about (the sync journal)."""
    recipe = tiny_recipe(shared_dir, tiny_channel(shared_dir))
    prefix = shared_dir / "envs" / "tiny"
    assert run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    prefix.chmod(0o700)
    envkit = other_user_envkit(shared_dir / "home")
    for args in (("audit", "-p", str(prefix)), ("sync", "-p", str(prefix), "--dry-run"), ("toolchain", "-p", str(prefix))):
        proc = run_as_other(envkit, *args)
        line = one_line_error(proc, 2)
        assert "sync-journal" not in line and f"{prefix}" in line and "belongs to root" in line, line
