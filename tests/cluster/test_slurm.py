"""envkit envs under a real one-node Slurm (tests/cluster/conftest.py): the seed scenario as a batch
job, `envkit probe --slurm` and its cancellation, `envkit run` and the CPU rules inside a job, and
an env published as a module loaded by a job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from envkit.team.lock import read_lock
from tests.cluster.conftest import active_jobs, wait_for_state
from tests.conftest import python_env, run_envkit
from tests.support.records import record_json
from tests.team.test_proofs import made_from_lock, proof_channel, python_recipe

# The trainer's parent imports the MKL side first (mkl-service sets MKL_THREADING_LAYER=INTEL for
# its children), then starts torch.distributed.run, whose workers import torch first.
PARENT = """
import json, subprocess, sys
import numpy, mkl
done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                       "--nproc_per_node", "2", sys.argv[1]], capture_output=True, text=True)
print(json.dumps({"rc": done.returncode, "out": done.stdout[-2000:], "err": done.stderr[-3000:]}))
"""
WORKER = """
import os
import torch
import torch.distributed as dist
import numpy, mkl
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
os.write(1, f"rank {os.environ['RANK']} sum {t.item()}\\n".encode())  # one write: the ranks share a pipe
dist.destroy_process_group()
"""
SEED_ERROR = "MKL_THREADING_LAYER=INTEL is incompatible with libgomp"


def _job(tmp_path: Path, name: str, body: str, *sbatch: str) -> tuple[int, str]:
    """A batch script submitted with `sbatch --export=NONE --wait`: none of the test's variables
    reach it. Returns the job's exit code and its output."""
    script = tmp_path / f"{name}.sh"
    script.write_text("#!/bin/bash\n" + body, encoding="utf-8")
    out = tmp_path / f"{name}.out"
    done = subprocess.run(
        ["sbatch", "--wait", "--export=NONE", "--job-name", name, "-o", str(out), *sbatch, str(script)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert "Submitted batch job" in done.stdout, done.stderr
    return done.returncode, out.read_text(encoding="utf-8", errors="replace")


def _seed_job(tmp_path: Path, launch: str) -> dict[str, object]:
    (tmp_path / "parent.py").write_text(PARENT, encoding="utf-8")
    (tmp_path / "worker.py").write_text(WORKER, encoding="utf-8")
    code, out = _job(tmp_path, "seed", f"cd {tmp_path}\n{launch}\n", "-n", "1", "-c", "2")
    assert code == 0, out
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def test_the_seed_scenario_as_a_batch_job_passes_on_an_envkit_env_and_fails_with_the_seed_error_on_a_raw_one(
    slurm: str, cluster_env: Path, raw_payload_env: Path, tmp_path: Path
) -> None:
    """`srun ENV/bin/python parent.py` under `sbatch --export=NONE`: no activation runs anywhere,
    and the env's startup files alone keep the torch-first ranks alive."""
    passed = _seed_job(tmp_path, f"srun {cluster_env}/bin/python parent.py worker.py")
    assert passed["rc"] == 0, passed
    assert sorted(line for line in str(passed["out"]).splitlines() if line.startswith("rank")) == ["rank 0 sum 2.0", "rank 1 sum 2.0"]

    failed = _seed_job(tmp_path, f"srun {raw_payload_env}/bin/python parent.py worker.py")
    assert failed["rc"] != 0 and SEED_ERROR in str(failed["err"]), failed


def _probe(prefix: Path, *sbatch: str) -> dict[str, object]:
    done = run_envkit("probe", "-p", str(prefix), "--json", "--slurm", *sbatch)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "submitted Slurm job" in done.stderr and "Ctrl-C cancels it" in done.stderr
    data: dict[str, object] = json.loads(done.stdout)["data"]
    return data


def _check(report: dict[str, object], cid: str) -> dict[str, object]:
    checks = report["checks"]
    assert isinstance(checks, list)
    (found,) = [c for c in checks if c["id"] == cid]
    assert isinstance(found, dict)
    return found


def test_probe_on_slurm_runs_the_ddp_check_on_the_job_s_ranks_and_records_the_node(slurm: str, cluster_env: Path) -> None:
    report = _probe(cluster_env, "-n", "2")
    assert report["node"] == slurm and str(report["slurm_job"]).isdigit(), report
    gloo = _check(report, "ddp-gloo")
    assert gloo["status"] == "pass" and str(gloo["title"]).startswith("srun --ntasks 2"), gloo
    assert len(str(gloo["evidence"]).splitlines()) == 2  # one line per rank srun started
    assert _check(report, "ddp-seed")["status"] == "pass"

    record = record_json(cluster_env)
    assert record is not None and record["probe"]["node"] == slurm and record["probe"]["slurm_job"] == report["slurm_job"]
    shown = run_envkit("toolchain", "-p", str(cluster_env))
    assert f"on {slurm} (Slurm job {report['slurm_job']})" in shown.stdout, shown.stdout


def test_the_probe_s_thread_advice_weighs_the_job_s_cpus_not_the_node_s(slurm: str, cluster_env: Path) -> None:
    """A one-CPU job on a node of more: the probe counts the CPU it was given."""
    assert (os.cpu_count() or 1) >= 2
    threads = _check(_probe(cluster_env, "-n", "1", "-c", "1"), "threads")
    assert threads["data"]["cpus"] == 1 and "1 usable CPUs" in str(threads["evidence"]), threads  # type: ignore[index]
    assert threads["status"] == "warn" and "oversubscribe" in str(threads["evidence"]), threads


def _interrupted_probe(prefix: Path, *sbatch: str, running: bool) -> tuple[str, subprocess.CompletedProcess[str]]:
    """Ctrl-C (SIGINT to envkit's process group, as a terminal sends it) once the job is queued, or
    once it runs; returns the job id and envkit's outcome."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "envkit", "probe", "-p", str(prefix), "--slurm", *sbatch],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert line.startswith("submitted Slurm job "), line + proc.stderr.read()
    job = line.split()[3].rstrip(";")
    wait_for_state(job, "RUNNING" if running else "PENDING")
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=180)
    return job, subprocess.CompletedProcess(proc.args, proc.returncode, out, line + err)


def test_ctrl_c_while_the_job_waits_in_the_queue_cancels_it(slurm: str, cluster_env: Path) -> None:
    job, done = _interrupted_probe(cluster_env, "--begin=now+3600", running=False)
    assert done.returncode == 130 and f"cancelled Slurm job {job}" in done.stderr, done.stderr
    assert job not in active_jobs()


def test_ctrl_c_while_the_probe_runs_on_the_node_cancels_the_job_and_leaves_nothing_running(slurm: str, cluster_env: Path) -> None:
    before = record_json(cluster_env)
    job, done = _interrupted_probe(cluster_env, "-n", "1", running=True)
    assert done.returncode == 130 and f"cancelled Slurm job {job}" in done.stderr, done.stderr
    assert job not in active_jobs()
    left = subprocess.run(["pgrep", "-f", "envkit.cluster.jobprobe|envkit_probe"], capture_output=True, text=True, check=False)
    assert left.stdout == "", left.stdout
    assert record_json(cluster_env) == before  # no verdict from a probe that did not finish


def test_envkit_run_inside_a_job_gives_the_env_s_settings(slurm: str, cluster_env: Path, tmp_path: Path) -> None:
    show = "import os; print(os.environ.get('MKL_THREADING_LAYER'), os.environ.get('CONDA_PREFIX'))"
    code, out = _job(tmp_path, "run", f'{sys.executable} -m envkit run -p {cluster_env} -- python -c "{show}"\n')
    assert code == 0 and out.strip().splitlines()[-1] == f"GNU {cluster_env}", out


def test_the_audit_inside_a_job_step_counts_the_step_s_cpus(slurm: str, tmp_path: Path) -> None:
    """OMP_NUM_THREADS=2 fits the node's two CPUs and oversubscribes a one-CPU step."""
    assert (os.cpu_count() or 1) >= 2
    _, prefix = python_env(tmp_path, "threads", "{omp_num_threads: 2}")
    audit = f"{sys.executable} -m envkit audit -p {prefix} --json"
    outside = json.loads(run_envkit("audit", "-p", str(prefix), "--json").stdout)
    _, out = _job(tmp_path, "audit", f"srun -n 1 -c 1 {audit}\n", "-n", "1", "-c", "2")
    inside = json.loads(out[out.index("{") :])

    def exceeding(doc: dict[str, object]) -> list[str]:
        (one,) = doc["data"]["audits"]  # type: ignore[index]
        return [f["evidence"] for f in one["findings"] if "exceeds the" in f["evidence"]]

    assert exceeding(outside) == []
    assert exceeding(inside) == ["OMP_NUM_THREADS=2 exceeds the 1 CPU a process here may use"], inside


def test_a_job_that_loads_the_env_as_a_module_passes_the_ddp_check(slurm: str, cluster_env: Path, tmp_path: Path) -> None:
    """The module puts the env's python first on PATH; srun --export=ALL hands the loaded
    environment to the ranks (under `sbatch --export=NONE` a bare srun would hand none)."""
    modulepath = tmp_path / "modulefiles"
    exported = run_envkit("export", "-p", str(cluster_env), "--format", "lmod", "-o", str(modulepath / "clusterenv" / "1.0.lua"))
    assert exported.returncode == 0, exported.stderr
    launch = f"source /usr/share/lmod/lmod/init/bash\nmodule use {modulepath}\nmodule load clusterenv/1.0\nsrun --export=ALL python parent.py worker.py"
    passed = _seed_job(tmp_path, launch)
    assert passed["rc"] == 0, passed
    assert sorted(line for line in str(passed["out"]).splitlines() if line.startswith("rank")) == ["rank 0 sum 2.0", "rank 1 sum 2.0"]


def test_sbatch_refuses_what_it_cannot_run_and_envkit_says_sbatch_s_reason(slurm: str, cluster_env: Path) -> None:
    done = run_envkit("probe", "-p", str(cluster_env), "--slurm", "--partition=nosuch")
    assert done.returncode == 1 and "sbatch did not submit the probe:" in done.stderr and "partition" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_sbatch_options_envkit_sets_or_that_leave_no_job_to_wait_for_are_refused_in_one_line(cluster_env: Path) -> None:
    for args in (["--wrap=hostname"], ["-o", "x.out"], ["-ox.out"], ["--output=x"], ["--wait"], ["--array=1-3"], ["--test-only"]):
        done = run_envkit("probe", "-p", str(cluster_env), "--slurm", *args)
        option = args[0].split("=")[0] if args[0].startswith("--") else args[0][:2]
        assert done.returncode == 2 and f"sbatch option {option} is not accepted here" in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1


def test_without_slurm_s_commands_the_probe_says_where_to_run_it(cluster_env: Path, tmp_path: Path) -> None:
    done = run_envkit("probe", "-p", str(cluster_env), "--slurm", "-p", "gpu", env={**os.environ, "PATH": str(tmp_path)})
    assert done.returncode == 2 and "--slurm: sbatch is not on PATH" in done.stderr and "login node" in done.stderr, done.stderr


def test_a_proof_attested_under_slurm_names_the_node_s_machine_kind(slurm: str, tmp_path: Path) -> None:
    """`probe --attest --slurm`: the probe runs on the node, and the proof it keeps in the lock names
    that node, its job and the machine kind seen there (the virtual packages detected on the node)."""
    recipe = python_recipe(tmp_path, proof_channel(tmp_path))
    assert run_envkit("lock", str(recipe)).returncode == 0
    prefix = tmp_path / "env"
    made_from_lock(recipe, prefix)
    proc = run_envkit("probe", "-p", str(prefix), "--attest", "--slurm", "-n", "1", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proofs = read_lock(recipe.parent / "proven.lock").proofs
    assert len(proofs) == 1 and proofs[0].node == slurm and proofs[0].slurm_job.isdigit(), proofs
    assert proofs[0].machine.platform == "linux-64" and proofs[0].machine.glibc, proofs[0].machine
    assert f"on {slurm}, pass" in proc.stdout
