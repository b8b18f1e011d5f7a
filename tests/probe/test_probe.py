"""Acceptance: the seed crash is caught in an env made without envkit's settings and every check
passes, the 2-rank gloo job included, once envkit's activation is in place."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from envkit.probe.inenv.expect import check_expect
from envkit.probe.inenv.inventory import check_runtimes
from envkit.probe.runner import default_spec, run_probe
from tests.conftest import payload_recipe, run_envkit
from tests.support.conda import Conda
from tests.support.inenv import run_with_probe_package
from tests.support.pipchannel import offline_pip_env, pip_channel
from tests.support.wheelchannel import host_interpreter

SEED_MESSAGE = "MKL_THREADING_LAYER=INTEL is incompatible with libgomp"


def checks(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    data = doc["data"]
    assert isinstance(data, dict)
    return {c["id"]: c for c in data["checks"]}


def test_probe_catches_the_seed_crash_without_envkit(raw_payload_env: Path) -> None:
    proc = run_envkit("probe", "-p", str(raw_payload_env), "--json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    by_id = checks(doc)
    assert by_id["ddp-seed"]["status"] == "fail"
    assert SEED_MESSAGE in str(by_id["ddp-seed"]["evidence"])
    assert "MKL_THREADING_LAYER=GNU" in str(by_id["ddp-seed"]["remedy"])
    assert by_id["ddp-gloo"]["status"] == "fail" and SEED_MESSAGE in str(by_id["ddp-gloo"]["evidence"])
    # default checks for an env envkit did not make, derived from what is installed
    assert {"import:numpy", "import:torch", "import:mkl"} <= set(by_id)


def test_probe_passes_with_envkit_activation(seed_env: Path) -> None:
    proc = run_envkit("probe", "-p", str(seed_env), "--json")
    doc = json.loads(proc.stdout)
    by_id = checks(doc)
    assert proc.returncode == 0, json.dumps(by_id, indent=1)[:3000]
    assert all(c["status"] != "fail" for c in by_id.values())
    assert by_id["ddp-seed"]["status"] == "pass" and by_id["ddp-gloo"]["status"] == "pass"
    assert "rank 0 ok 3.0" in str(by_id["ddp-gloo"]["evidence"]) and "rank 1 ok 3.0" in str(by_id["ddp-gloo"]["evidence"])
    assert by_id["import-order:numpy,mkl,torch"]["status"] == "pass"
    runtimes = by_id["runtimes"]["data"]
    assert isinstance(runtimes, dict)
    assert runtimes["mkl_threading_layer"] == "gnu" and runtimes["openmp_runtimes"] == 1
    assert by_id["numeric"]["status"] == "pass" and by_id["threads"]["status"] in ("pass", "warn")
    assert by_id["gpu"]["status"] == "skip" and "CPU build" in str(by_id["gpu"]["evidence"])


def test_threads_are_measured_in_the_ranks(seed_env: Path) -> None:
    """torchrun gives each worker OMP_NUM_THREADS=1 when it is unset; set to every CPU, the ranks
    together oversubscribe them. Both are the ranks' own thread counts, not a prediction."""
    cpus = len(os.sched_getaffinity(0))
    unset = checks(json.loads(run_envkit("probe", "-p", str(seed_env), "--json").stdout))
    assert unset["ddp-gloo"]["data"]["rank_threads"] == [1, 1]
    assert unset["ddp-gloo"]["data"]["rank_omp_num_threads"] == [1, 1]
    threads = unset["threads"]
    assert "in each of 2 torchrun ranks" in str(threads["evidence"])
    if cpus // 2 > 1:
        assert threads["status"] == "warn" and "gave each rank 1 thread" in str(threads["evidence"])
        assert f"({cpus // 2} here)" in str(threads["remedy"])
    else:
        assert threads["status"] == "pass", threads

    env = dict(os.environ, OMP_NUM_THREADS=str(cpus))
    every_cpu = checks(json.loads(run_envkit("probe", "-p", str(seed_env), "--json", env=env).stdout))
    assert every_cpu["ddp-gloo"]["data"]["rank_threads"] == [cpus, cpus]
    over = every_cpu["threads"]
    assert over["status"] == "warn" and f"2 x {cpus} threads oversubscribe" in str(over["evidence"])


def test_inventory_agrees_with_threadpoolctl(seed_env: Path, tmp_path: Path) -> None:
    """Cross-check the probe's library inventory against threadpoolctl in the same process."""
    code = (
        "import json, torch, numpy, mkl, threadpoolctl\nfrom envkit_probe.inventory import collect\n"
        "print(json.dumps({'ours': collect(['torch', 'numpy', 'mkl'])['libraries'], 'theirs': threadpoolctl.threadpool_info()}))"
    )
    proc = run_with_probe_package(seed_env / "bin" / "python", ["-E", "-s", "-c", code], tmp_path, seed_env)
    assert proc.returncode == 0, proc.stderr
    both = json.loads(proc.stdout.strip().splitlines()[-1])
    ours, theirs = both["ours"], both["theirs"]
    api = {"libgomp": "openmp", "libiomp5": "openmp", "libomp": "openmp", "mkl": "mkl", "openblas": "openblas"}
    ours_set = {(api[lib["api"]], lib["realpath"]) for lib in ours}
    theirs_set = {(t["internal_api"], str(Path(t["filepath"]).resolve())) for t in theirs}
    assert ours_set == theirs_set
    mkl_ours = next(lib for lib in ours if lib["api"] == "mkl")
    mkl_theirs = next(t for t in theirs if t["internal_api"] == "mkl")
    assert mkl_ours["threading_layer"] == mkl_theirs["threading_layer"] == "gnu"
    assert mkl_ours["num_threads"] == mkl_theirs["num_threads"]


def test_create_runs_the_probe_and_records_health(
    wheel_channel: Path, tmp_path: Path, session_pkgs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVKIT_PKGS_DIR", str(session_pkgs))
    good = run_envkit("create", str(payload_recipe(tmp_path / "r", wheel_channel, name="healthy")), "--yes")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "probe pass" in good.stdout or "probe warn" in good.stdout
    record = json.loads((tmp_path / "envs" / "healthy" / "etc" / "envkit" / "record.json").read_text())
    assert record["healthy"] is True and record["probe"]["checks"]["ddp-gloo"] == "pass"

    # The INTEL layer next to torch's libgomp is refused twice before anything is installed: by the
    # recipe rule RC002 and by the audit of the plan (EK001). A recipe that forces both gets the
    # env it asked for: created, probed, kept, marked unhealthy.
    forced = "threading: {mkl_threading_layer: intel}\nforce: [RC002, EK001]"
    bad_recipe = payload_recipe(tmp_path / "r", wheel_channel, name="intel", threading=forced)
    bad = run_envkit("create", str(bad_recipe), "--yes")
    assert bad.returncode == 1, bad.stderr
    assert "probe failed" in bad.stdout and "EK001" in bad.stdout and "(forced by the recipe)" in bad.stdout
    prefix = tmp_path / "envs" / "intel"
    record = json.loads((prefix / "etc" / "envkit" / "record.json").read_text())
    assert record["healthy"] is False and "ddp-seed" in record["probe"]["failed"]

    # audit --fix writes the GNU layer; the next probe proves it and the record says so.
    assert run_envkit("audit", "-p", str(prefix), "--fix", "--yes").returncode == 0
    again = run_envkit("probe", "-p", str(prefix))
    assert again.returncode == 0, again.stdout
    record = json.loads((prefix / "etc" / "envkit" / "record.json").read_text())
    assert record["healthy"] is True and record["probe"]["failed"] == []


def test_plan_audit_refuses_before_anything_is_written(wheel_channel: Path, tmp_path: Path) -> None:
    """RC002 reads the recipe; the plan's EK001 reads what was solved: a recipe that escapes the
    first (forcing it) is still stopped by the second, exit 1, nothing on disk."""
    recipe = payload_recipe(tmp_path / "r", wheel_channel, name="intel", threading="threading: {mkl_threading_layer: intel}")
    at_validate = run_envkit("create", str(recipe), "--yes", "--no-probe")
    assert at_validate.returncode == 2 and "RC002" in at_validate.stderr and "torch (listed under packages/pip)" in at_validate.stderr
    recipe = payload_recipe(
        tmp_path / "r", wheel_channel, name="intel", threading="threading: {mkl_threading_layer: intel}\nforce: [RC002]"
    )
    for extra in ((), ("--dry-run",)):
        proc = run_envkit("create", str(recipe), "--yes", "--no-probe", "--json", *extra)
        doc = json.loads(proc.stdout)
        assert proc.returncode == 1 and doc["data"]["refused"] is True, proc.stdout
        assert any(e.startswith("EK001 ") for e in doc["errors"]) and "nothing was written" in doc["messages"][0]
    assert not (tmp_path / "envs").exists()


def test_inventory_degrades_cleanly_off_linux(seed_env: Path, tmp_path: Path) -> None:
    """Elsewhere than Linux the loaded-library listing is absent: the runtimes check says so and
    skips instead of claiming that nothing is loaded. Run as if on macOS, in the real env."""
    code = "import json, sys\nsys.platform = 'darwin'\nimport numpy\nfrom envkit_probe.inventory import collect\nprint(json.dumps(collect(['numpy'])))"
    proc = run_with_probe_package(seed_env / "bin" / "python", ["-E", "-s", "-c", code], tmp_path, seed_env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert data["listing"] is None and data["libraries"] == []
    inv = {"returncode": 0, "data": data, "seconds": 0.1}
    runtimes = check_runtimes(inv, ["numpy"])
    assert runtimes["status"] == "skip" and "Linux only; this is darwin" in runtimes["evidence"]
    expect = check_expect({"expect": {"blas": "mkl"}}, runtimes)
    assert expect["status"] == "skip" and "runtime inventory" in expect["evidence"]


def test_a_hung_ddp_job_is_killed_with_its_ranks(seed_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranks that never finish (a sitecustomize that sleeps in every torchrun worker) time the job
    out: the probe reports it and leaves no rank behind, although torchrun starts each rank in a
    session of its own, out of reach of a process-group kill."""
    site = tmp_path / "site"
    site.mkdir()
    pids = tmp_path / "rank-pids"
    (site / "sitecustomize.py").write_text(
        "import os, time\n"
        "if os.environ.get('LOCAL_RANK') is not None:\n"
        f"    with open({str(pids)!r}, 'a') as fh:\n"
        "        fh.write('%d\\n' % os.getpid())\n"
        "    time.sleep(600)\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    report = run_probe(seed_env, replace(default_spec(seed_env), timeout=40))
    by_id = {c.id: c for c in report.checks}
    assert by_id["ddp-gloo"].status == "fail" and "timed out" in by_id["ddp-gloo"].evidence
    # the seed child's imports had passed before the job hung; the report keeps that
    assert by_id["ddp-seed"].status == "pass"
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2
    for pid in started:
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z", f"rank {pid} outlived the probe"
    assert not list(scratch.iterdir()), "the probe left its worker directory behind"


def test_a_toolchain_module_from_outside_the_env_fails_the_probe(tmp_path: Path) -> None:
    """The probe's children import as the user's runs do (PYTHONPATH, the user site, .pth files),
    but nothing said where a module came from: a copy found ahead of the env's passed as the env."""
    channel, links = pip_channel(tmp_path)
    recipe = tmp_path / "r" / "shadowed.yaml"
    recipe.parent.mkdir()
    recipe.write_text(f'envkit: 1\nname: shadowed\nchannels: [{channel.as_uri()}]\npython: "3.11"\npackages: [pip]\npip: [threadpoolctl]\n')
    env = offline_pip_env(dict(os.environ), links)
    prefix = tmp_path / "env"
    assert run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe", env=env).returncode == 0
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "threadpoolctl.py").write_bytes(next(prefix.glob("lib/python3*/site-packages/threadpoolctl.py")).read_bytes())
    shadowed = run_envkit("probe", "-p", str(prefix), "--json", env={**os.environ, "PYTHONPATH": str(shadow)})
    origin = checks(json.loads(shadowed.stdout))["origin"]
    assert shadowed.returncode == 1 and origin["status"] == "fail", origin
    assert origin["evidence"] == f"threadpoolctl from {shadow} (PYTHONPATH or a .pth file), not the env ({prefix})", origin
    clean = checks(json.loads(run_envkit("probe", "-p", str(prefix), "--json").stdout))["origin"]
    assert clean["status"] == "pass" and clean["evidence"] == "threadpoolctl from the env", clean


def test_a_user_site_copy_is_named_as_pip_install_user(tmp_path: Path) -> None:
    """On a python that is no venv (conda's), the user site comes ahead of site-packages; the test's
    envs are venv-style shims, which keep it off, so the host interpreter stands in."""
    site = tmp_path / "home" / ".local" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "threadpoolctl.py").write_text("# a pip install --user copy\n")
    code = "import json; from envkit_probe.imports import check_origin; print(json.dumps(check_origin(120)))"
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    env.pop("PYTHONNOUSERSITE", None)
    proc = run_with_probe_package(host_interpreter(), ["-c", code], tmp_path, env=env)
    origin = json.loads(proc.stdout)
    assert origin["status"] == "fail" and f"threadpoolctl from {site} (the user site: pip install --user)" in origin["evidence"], origin
    assert "PYTHONNOUSERSITE" in origin["remedy"]
    proc = run_with_probe_package(host_interpreter(), ["-c", code], tmp_path, env={**env, "PYTHONNOUSERSITE": "1"})
    assert "the user site" not in json.loads(proc.stdout)["evidence"]


def test_a_probe_that_warned_is_the_verdict_everywhere(seed_env: Path, conda: Conda) -> None:
    """One health model: after a real probe warned (threads that oversubscribe the CPUs), list,
    toolchain, audit and conda doctor all say warn, and where the verdict came from."""
    cpus = len(os.sched_getaffinity(0))
    probed = run_envkit("probe", "-p", str(seed_env), "--json", env=dict(os.environ, OMP_NUM_THREADS=str(cpus * 2)))
    assert json.loads(probed.stdout)["data"]["status"] == "warn", probed.stdout[-2000:]
    try:
        listed = {e["prefix"]: e for e in json.loads(run_envkit("list", "--json").stdout)["data"]}
        if str(seed_env) in listed:  # the session's env is listed where its registry is this HOME's
            assert listed[str(seed_env)]["health"] == "warn"
        toolchain = run_envkit("toolchain", "-p", str(seed_env))
        assert "probe warn (probe at " in toolchain.stdout and "threads warned" in toolchain.stdout, toolchain.stdout
        assert "loaded blas" in toolchain.stdout or "loaded openmp" in toolchain.stdout  # what the probe saw mapped
        audit = json.loads(run_envkit("audit", "-p", str(seed_env), "--json").stdout)
        warned = [f for f in audit["data"]["audits"][0]["findings"] if f["rule_id"] == "EK043"]
        assert warned and "threads warned" in warned[0]["evidence"]
        hidden = run_envkit("audit", "-p", str(seed_env), "--min-severity", "error")
        assert "finding(s) below error not shown" in hidden.stdout and "clean" not in hidden.stdout, hidden.stdout
        doctor = conda.run("doctor", "-v", "-p", str(seed_env))
        assert "EK043 warning" in doctor.stdout + doctor.stderr, doctor.stdout + doctor.stderr
    finally:  # the session's env goes back to the verdict of a plain probe
        run_envkit("probe", "-p", str(seed_env))
