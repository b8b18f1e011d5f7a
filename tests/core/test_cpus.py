"""The CPUs a thread count must fit: a process's affinity mask and its cgroup's CPU quota, not the
machine's total. Where envkit writes `physical-cores` inside a job that was given part of a node
(Slurm, taskset, docker --cpus), the node's count oversubscribes the job; the audit judged thread
counts by the node's count too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envkit.core.cpus import cores_in, cpu_quota, physical_cores, slurm_batch_tasks, slurm_cpus, usable_cpus, within_quota
from tests.conftest import run_envkit, write_recipe
from tests.support.tiny import tiny_channel

# two packages of two cores, each core two hardware threads: CPUs 0-3 on package 0, 4-7 on 1;
# siblings (0, 1), (2, 3), ... share a core
SMT = "\n".join(f"processor\t: {i}\nphysical id\t: {i // 4}\ncore id\t\t: {i % 4 // 2}\n" for i in range(8))


@pytest.fixture
def two_cores() -> None:
    """Pinning a process to one CPU shows a job's count only where there are two cores to pin from
    (our machines have 2) and taskset (util-linux) to pin with."""
    if shutil.which("taskset") is None or min(usable_cpus(), physical_cores()) < 2:
        pytest.fail("these tests pin envkit to one of two cores: they need taskset (util-linux) and a machine of 2 cores or more")


def test_cores_are_counted_among_the_cpus_a_process_may_use() -> None:
    assert cores_in(SMT, None) == 4
    assert cores_in(SMT, frozenset(range(8))) == 4
    assert cores_in(SMT, frozenset({0, 1})) == 1  # two hardware threads of one core
    assert cores_in(SMT, frozenset({0, 2, 4})) == 3
    assert cores_in(SMT, frozenset({4, 5, 6, 7})) == 2
    assert cores_in("", None) == 0  # no topology: the caller falls back to the CPUs


def test_a_quota_cuts_the_count_down_never_below_one() -> None:
    assert within_quota(8, None) == 8
    assert within_quota(8, 2.5) == 2  # a third thread would be throttled
    assert within_quota(8, 0.5) == 1
    assert within_quota(2, 16.0) == 2


def _cgroup(tmp_path: Path, membership: str) -> Path:
    own = tmp_path / "self-cgroup"
    own.write_text(membership)
    return own


def test_cgroup_v2_quota_is_the_tightest_of_the_cgroup_and_its_parents(tmp_path: Path) -> None:
    root = tmp_path / "fs"
    (root / "kubepods" / "pod1" / "ctr").mkdir(parents=True)
    (root / "kubepods" / "cpu.max").write_text("max 100000\n")
    (root / "kubepods" / "pod1" / "cpu.max").write_text("150000 100000\n")
    (root / "kubepods" / "pod1" / "ctr" / "cpu.max").write_text("400000 100000\n")
    assert cpu_quota(_cgroup(tmp_path, "0::/kubepods/pod1/ctr\n"), root) == 1.5
    # inside a container the path names the host's hierarchy; the container's own root is mounted
    (root / "cpu.max").write_text("300000 100000\n")
    assert cpu_quota(_cgroup(tmp_path, "0::/not/mounted/here\n"), root) == 3.0
    (root / "cpu.max").write_text("max 100000\n")
    assert cpu_quota(_cgroup(tmp_path, "0::/\n"), root) is None


def test_cgroup_v1_quota_is_read_from_the_cpu_controller(tmp_path: Path) -> None:
    root = tmp_path / "fs"
    job = root / "cpu,cpuacct" / "slurm" / "job_7"
    job.mkdir(parents=True)
    (job / "cpu.cfs_quota_us").write_text("200000\n")
    (job / "cpu.cfs_period_us").write_text("100000\n")
    membership = "11:memory:/slurm/job_7\n4:cpu,cpuacct:/slurm/job_7\n0::/\n"
    assert cpu_quota(_cgroup(tmp_path, membership), root) == 2.0
    (job / "cpu.cfs_quota_us").write_text("-1\n")  # no quota
    assert cpu_quota(_cgroup(tmp_path, membership), root) is None
    assert cpu_quota(tmp_path / "no-such-file", root) is None


def _pinned(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """envkit run in a process allowed one CPU, as in a Slurm job given one CPU of the node."""
    return subprocess.run(
        ["taskset", "-c", str(min(os.sched_getaffinity(0))), sys.executable, "-m", "envkit", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )


def threads_recipe(tmp_path: Path, count: str) -> Path:
    """A recipe of the tiny channel's `tool` with `omp_num_threads: COUNT`, and the env's prefix."""
    channel = tiny_channel(tmp_path)
    body = f"envkit: 1\nname: cores\nchannels: [{channel.as_uri()}]\npackages: [tool]\nthreading: {{omp_num_threads: {count}}}\n"
    return write_recipe(tmp_path / "r", "cores", body)


def ek015(audited: subprocess.CompletedProcess[str]) -> list[str]:
    return [f["evidence"] for f in json.loads(audited.stdout)["data"]["audits"][0]["findings"] if f["rule_id"] == "EK015"]


@pytest.mark.usefixtures("two_cores")
def test_physical_cores_written_in_a_job_are_the_jobs(tmp_path: Path) -> None:
    """Created inside a job given one CPU of this two-core machine, `physical-cores` was 2 (the
    machine's cores)."""
    recipe, prefix = threads_recipe(tmp_path, "physical-cores"), tmp_path / "env"
    created = _pinned("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe", env=dict(os.environ))
    assert created.returncode == 0, created.stderr
    [op] = json.loads((prefix / "etc" / "envkit" / "record.json").read_text())["activation"]["ops"]
    assert (op["name"], op["value"], op["computed"]) == ("OMP_NUM_THREADS", "1", "physical-cores")
    script = next((prefix / "etc" / "conda" / "activate.d").glob("*.sh")).read_text()
    assert "export OMP_NUM_THREADS='1'" in script


@pytest.mark.usefixtures("two_cores")
def test_the_audit_judges_thread_counts_by_the_cpus_a_process_may_use(tmp_path: Path) -> None:
    recipe, prefix = threads_recipe(tmp_path, "2"), tmp_path / "env"
    created = run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe")
    assert created.returncode == 0, created.stderr
    assert ek015(run_envkit("audit", "-p", str(prefix), "--json")) == []  # both CPUs
    audited = _pinned("audit", "-p", str(prefix), "--json", env=dict(os.environ))
    assert ek015(audited) == ["OMP_NUM_THREADS=2 exceeds the 1 CPU a process here may use"], audited.stdout


@pytest.mark.usefixtures("two_cores")
def test_sync_in_a_smaller_job_writes_its_count_and_then_has_nothing_to_do(tmp_path: Path) -> None:
    """An env made on the whole machine, used in a job given one CPU: the audit there flagged the
    count and named no way out, since sync's quick answer ("nothing to do") looked at the recipe
    only, while its full look would have written the job's count."""
    recipe, prefix = threads_recipe(tmp_path, "physical-cores"), tmp_path / "env"
    assert run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    env = dict(os.environ)
    here = physical_cores()  # what the scripts say: this machine's count, 2 on ours
    assert ek015(_pinned("audit", "-p", str(prefix), "--json", env=env)) == [
        f"OMP_NUM_THREADS={here} exceeds the 1 CPU a process here may use "
        "(the physical cores where its scripts were written: 'envkit sync' here writes this machine's)"
    ]
    looked = _pinned("sync", "-p", str(prefix), "--dry-run", env=env)
    assert looked.returncode == 0 and f"variable OMP_NUM_THREADS: = '{here}' -> = '1'" in looked.stdout, looked.stdout
    assert _pinned("sync", "-p", str(prefix), "--yes", "--no-probe", env=env).returncode == 0
    script = next((prefix / "etc" / "conda" / "activate.d").glob("*.sh")).read_text()
    assert "export OMP_NUM_THREADS='1'" in script
    again = _pinned("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout
    assert ek015(_pinned("audit", "-p", str(prefix), "--json", env=env)) == []
    # back on the whole machine, the machine's count again
    assert f"variable OMP_NUM_THREADS: = '1' -> = '{here}'" in run_envkit("sync", "-p", str(prefix), "--dry-run").stdout


def test_a_slurm_job_s_cpus_are_its_allocation_where_no_mask_binds_them() -> None:
    """task/none binds nothing: the job's variables are all that says what it was given (the
    figures are what Slurm 22.05 sets, measured under tests/cluster)."""
    batch = {"SLURM_JOB_ID": "7", "SLURM_CPUS_ON_NODE": "8", "SLURM_NTASKS": "2", "SLURM_TASKS_PER_NODE": "2"}
    assert slurm_cpus({}) is None
    assert slurm_cpus(batch) == 8  # the batch script: what its launches on this node share
    step = {**batch, "SLURM_STEP_ID": "0", "SLURM_STEP_TASKS_PER_NODE": "2"}
    assert slurm_cpus(step) == 4  # one task's share
    assert slurm_cpus({**step, "SLURM_CPUS_PER_TASK": "3"}) == 3
    assert slurm_cpus({**step, "SLURM_STEP_TASKS_PER_NODE": "4(x2),1"}) == 2
    assert slurm_cpus({**step, "SLURM_CPUS_ON_NODE": "garbage", "SLURM_CPUS_PER_TASK": ""}) is None
    assert slurm_cpus({"SLURM_JOB_ID": "7"}) is None


def test_the_ranks_a_batch_script_starts_are_its_tasks_and_none_inside_a_step() -> None:
    batch = {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4"}
    assert slurm_batch_tasks(batch) == 4
    assert slurm_batch_tasks({**batch, "SLURM_STEP_ID": "0"}) == 0  # an srun task: its ranks are already started
    assert slurm_batch_tasks({"SLURM_NTASKS": "4"}) == 0  # not in a job
    assert slurm_batch_tasks({**batch, "SLURM_NTASKS": "x"}) == 0
