"""`envkit probe --slurm`: the probe as a Slurm batch job, so that an env made on a login node is
proven on the kind of node its jobs get (a GPU partition, `--gres=gpu:2`), not on the login node.

The job runs this same envkit (its python, by absolute path: clusters share the filesystem that
holds envkit, the env and the home directory) on the node, under the job's own environment. It
writes the probe's report into a folder under the user's cache, which the login side reads back
once the job has ended; the verdict is kept on the login side, against the record as it was at
submission. Interrupting the wait cancels the job and waits until Slurm has ended it.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from envkit.core.errors import ProbeError, UsageError, one_line
from envkit.core.notices import notify
from envkit.core.paths import cache_dir
from envkit.probe.model import ProbeReport, parse_report

REPORT = "report.json"
JOB_OUTPUT = "job.out"
POLL_SECONDS = 1.0
CANCEL_WAIT_SECONDS = 120.0
# squeue's states of a job that has not ended yet
ACTIVE_STATES = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
        "RESV_DEL_HOLD",
    }
)
# sbatch options envkit sets itself, or that would leave it no job to wait for or no report to read
REFUSED_OPTIONS = {
    "--wrap": "envkit submits its own job script",
    "-o": "envkit reads the job's output from a file of its own",
    "--output": "envkit reads the job's output from a file of its own",
    "-e": "envkit reads the job's output from a file of its own",
    "--error": "envkit reads the job's output from a file of its own",
    "-W": "envkit waits for the job itself, and cancels it when interrupted",
    "--wait": "envkit waits for the job itself, and cancels it when interrupted",
    "--parsable": "envkit sets it to read the job's id",
    "-a": "one probe is one job",
    "--array": "one probe is one job",
    "--test-only": "it submits no job",
    "-h": "it submits no job",
    "--help": "it submits no job",
    "--usage": "it submits no job",
    "-V": "it submits no job",
    "--version": "it submits no job",
}


def checked_sbatch_args(args: Sequence[str]) -> tuple[str, ...]:
    """The user's sbatch options, or a one-line refusal of the first that cannot be honoured. They
    reach sbatch as its argv, never through a shell."""
    for arg in args:
        option = arg.split("=", 1)[0] if arg.startswith("--") else arg[:2]  # -ofile is -o file
        if option in REFUSED_OPTIONS:
            raise UsageError(f"--slurm: sbatch option {option} is not accepted here: {REFUSED_OPTIONS[option]}")
        if not arg or not arg.isprintable():
            raise UsageError(f"--slurm: sbatch argument {one_line(arg)!r} is empty or holds a control character")
    return tuple(args)


def job_script(prefix: Path, folder: Path) -> str:
    """The batch script: this envkit's python runs the probe on the node (envkit.cluster.jobprobe).
    Every value in it is quoted for the shell."""
    cmd = [sys.executable, "-m", "envkit.cluster.jobprobe", str(folder), str(prefix)]
    return "#!/bin/sh\n# envkit probe --slurm: the probe of one env, its report left in this folder\nexec " + shlex.join(cmd) + "\n"


def probe_on_slurm(prefix: Path, sbatch_args: Sequence[str], on_submitted: Callable[[str], None] | None = None) -> ProbeReport:
    """Submit the probe of `prefix` as a batch job, wait for it to end, and return its report."""
    args = checked_sbatch_args(sbatch_args)
    sbatch = _client("sbatch")
    root = cache_dir() / "slurm-probes"
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="probe-", dir=root))
    try:
        script = folder / "job.sh"
        script.write_text(job_script(prefix, folder), encoding="utf-8")
        script.chmod(0o700)
        job = _submit(sbatch, args, folder, script)
        if on_submitted is not None:
            on_submitted(job)
        try:
            state = _wait(job)
        except BaseException:
            _cancel(job)
            raise
        return _read_report(folder, job, state)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _client(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise UsageError(f"--slurm: {name} is not on PATH", hint="run it where Slurm's client commands are, as on a login node")
    return found


def _submit(sbatch: str, args: tuple[str, ...], folder: Path, script: Path) -> str:
    cmd = [sbatch, "--parsable", "--job-name", "envkit-probe", "--output", str(folder / JOB_OUTPUT), *args, str(script)]
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    job = done.stdout.strip().split(";", 1)[0]
    if done.returncode != 0 or not job.isdigit():
        said = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise ProbeError(f"--slurm: sbatch did not submit the probe: {one_line(said)}")
    return job


def job_state(job: str) -> str | None:
    """The job's state as squeue says it (RUNNING, COMPLETED, ...); None once Slurm has forgotten it."""
    done = subprocess.run(
        [_client("squeue"), "-h", "-j", job, "-t", "all", "-o", "%T"], capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
    )
    if done.returncode != 0:
        if "Invalid job id" in done.stderr:
            return None
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise ProbeError(f"--slurm: squeue cannot tell the state of job {job}: {one_line(said)}")
    lines = done.stdout.split()
    return lines[0] if lines else None


def _wait(job: str) -> str | None:
    while (state := job_state(job)) in ACTIVE_STATES:
        time.sleep(POLL_SECONDS)
    return state


def _cancel(job: str) -> None:
    """Cancel the job and wait until Slurm has ended it: an interrupted probe leaves nothing queued
    or running. Said as a notice with the interruption."""
    subprocess.run([_client("scancel"), job], capture_output=True, stdin=subprocess.DEVNULL, check=False)
    deadline = time.monotonic() + CANCEL_WAIT_SECONDS
    while time.monotonic() < deadline:
        try:
            if job_state(job) not in ACTIVE_STATES:
                notify(f"cancelled Slurm job {job}")
                return
        except ProbeError:
            break
        time.sleep(POLL_SECONDS / 4)
    notify(f"Slurm job {job} was cancelled but has not ended yet (squeue -j {job})")


def _read_report(folder: Path, job: str, state: str | None) -> ProbeReport:
    try:
        text = (folder / REPORT).read_text(encoding="utf-8")
    except OSError:
        ended = f"ended ({state})" if state else "ended"
        raise ProbeError(f"Slurm job {job} {ended} without a probe report: {_last_line(folder / JOB_OUTPUT)}") from None
    if text.startswith("error:"):
        raise ProbeError(f"the probe in Slurm job {job} failed: {one_line(text[len('error:') :].strip())}")
    return parse_report(text)


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "the job left no output"
    return one_line(lines[-1])[:400] if lines else "the job printed nothing"
