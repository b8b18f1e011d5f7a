"""Run the in-env probe package with the env's own python under the env's activation, and stop it
whole when envkit is interrupted; then the one check made without activation (unactivated.py)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from envkit.activation.runenv import activated_environment
from envkit.activation.startup import carried_name
from envkit.activation.writer import ops_from_json
from envkit.core.cpus import slurm_batch_tasks, usable_cpus
from envkit.core.errors import EnvkitError, ProbeError
from envkit.core.fsutil import scratch_dir
from envkit.prefix.installed import conda_packages, pip_dists, torch_build
from envkit.prefix.record import read_record
from envkit.probe.inenv.proctree import kill_tree
from envkit.probe.model import ProbeReport, parse_report
from envkit.probe.unactivated import check_unactivated
from envkit.recipe.loader import load_recipe
from envkit.recipe.model import ProbeSpec, Recipe

IN_ENV_PACKAGE = "envkit_probe"


def stage_probe(scratch: Path) -> Path:
    """Copy the in-env probe package into the scratch dir as envkit_probe; returns the directory to
    run it from. Only that package is reachable there: nothing of envkit, rich or yaml."""
    lib = scratch / "lib"
    source = resources.files("envkit.probe.inenv")
    target = lib / IN_ENV_PACKAGE
    target.mkdir(parents=True)
    for entry in source.iterdir():
        if entry.name.endswith(".py"):
            (target / entry.name).write_text(entry.read_text(encoding="utf-8"), encoding="utf-8")
    return lib


def default_spec(prefix: Path) -> ProbeSpec:
    """Checks for an env envkit did not make, derived from what is installed."""
    packages, pip = conda_packages(prefix), pip_dists(prefix)
    names = set(packages) | set(pip)
    has_torch = bool({"pytorch", "torch"} & names)
    imports = [m for m, pkgs in (("numpy", {"numpy"}), ("torch", {"pytorch", "torch"}), ("mkl", {"mkl-service"})) if pkgs & names]
    orders = [("torch", "numpy")] if has_torch and "numpy" in imports else []
    return ProbeSpec(
        imports=tuple(imports),
        import_orders=tuple(orders),
        ddp=has_torch,
        torch_build=torch_build(packages, pip) if has_torch else None,
    )


def spec_for(prefix: Path, recipe: Recipe | None, platform: str | None = None) -> ProbeSpec:
    """The recipe's probe section, as the env's platform (default: this machine's) sees it, when it
    names what to import, else the defaults for what is installed; the recipe's torch build wins
    over what the packages claim."""
    if recipe is None:
        return default_spec(prefix)
    if platform is None:
        from envkit.solve.backend import native_platform  # rattler's: loaded only where a recipe is probed

        platform = native_platform()
    recipe = recipe.for_platform(platform)  # OpenBLAS expected on ARM, MKL on x86-64
    if recipe.probe.imports or recipe.probe.import_orders:
        return recipe.probe
    spec = default_spec(prefix)
    return replace(spec, torch_build=recipe.probe.torch_build or spec.torch_build)


def spec_for_env(prefix: Path) -> ProbeSpec:
    """The checks for an existing env: its recipe's, when envkit made it and the recipe still loads."""
    record = read_record(prefix)
    path = record.recipe.path if record and record.recipe else None
    recipe = None
    if path:
        try:
            recipe = load_recipe(path)
        except EnvkitError:  # a moved or edited recipe must not stop the probe: fall back to defaults
            recipe = None
    return spec_for(prefix, recipe, record.platform if record else None)


def probe_config(spec: ProbeSpec, threading: dict[str, str], workdir: str | None = None) -> dict[str, object]:
    return {
        "workdir": workdir,
        "version": 1,
        "imports": list(spec.imports),
        "import_orders": [list(o) for o in spec.import_orders],
        "ddp": spec.ddp,
        "nproc": spec.nproc,
        "expect": dict(spec.expect),
        "timeout": spec.timeout,
        "threading": threading,
        "torch_build": spec.torch_build,
        "usable_cpus": usable_cpus(),  # the cgroup's quota and a Slurm job's allocation included
        "slurm_tasks": slurm_batch_tasks(),
    }


def expected_threading(prefix: Path) -> dict[str, str]:
    """The values envkit's settings (the recipe's) set, which the activated env must have."""
    record = read_record(prefix)
    if not record:
        return {}
    ops = record.activation.ops if record.activation else None
    return {op.name: op.value for op in ops_from_json(ops if ops is not None else []) if op.action == "set"}


def unactivated_expected(prefix: Path) -> dict[str, str]:
    """What a python started without activation should have, the startup files' part of what
    activation sets: envkit's settings and the threading values (envkit.activation.startup), as
    conda's env vars and every activate.d script, envkit's and a hand-written one alike, leave them
    when sourced over an environment that has none of them."""
    own = expected_threading(prefix)
    clean = {name: value for name, value in os.environ.items() if name not in own and not carried_name(name)}
    activated = activated_environment(prefix, clean)
    # as the text of their UTF-8 bytes, which the check compares whatever the locale envkit runs under
    return {name: os.fsencode(value).decode("utf-8", "replace") for name, value in activated.items() if name in own or carried_name(name)}


SCRATCH_PREFIX = "envkit-probe-"  # its scratch dirs: see envkit.core.fsutil.scratch_dir


def _die_with_parent() -> None:
    """Runs in the probe's process before exec: if envkit dies (even by SIGKILL), the kernel sends
    the probe SIGTERM, and the probe stops its children and leaves."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def env_python(prefix: Path) -> Path:
    """The env's python, or a one-line error saying what is wrong with it."""
    python = prefix / "bin" / "python"
    hint = "reinstall python into the env (conda install --force-reinstall python)"
    if not python.exists():
        raise ProbeError(f"{python} does not exist: the probe needs the env's own python", hint="install python into the env")
    if python.is_dir():
        raise ProbeError(f"{python} is a directory, not the env's python", hint=hint)
    if not os.access(python, os.X_OK):
        raise ProbeError(f"{python} is not executable", hint=hint)
    if python.stat().st_size == 0:
        raise ProbeError(f"{python} is an empty file", hint=hint)
    return python


def _start(cmd: list[str], **kw: Any) -> subprocess.Popen[str]:
    try:
        return subprocess.Popen(cmd, **kw)
    except OSError as exc:  # a python that is not a program for this machine (Exec format error, ...)
        raise ProbeError(f"{cmd[0]} cannot be run: {exc.strerror}", hint="reinstall python into the env") from None


def run_probe(prefix: Path, spec: ProbeSpec | None = None) -> ProbeReport:
    python = env_python(prefix)
    spec = spec or spec_for_env(prefix)
    env = activated_environment(prefix)
    scratch = scratch_dir(SCRATCH_PREFIX)
    config = probe_config(spec, expected_threading(prefix), str(scratch))
    limit = spec.timeout * 3 + 60
    try:
        lib = stage_probe(scratch)
        # -E -s: none of envkit's PYTHON* settings or user site; the package is found through the
        # working directory, which -m puts first on sys.path (and every child inherits).
        # Its own session: a terminal's Ctrl-C reaches envkit, which stops the whole tree itself
        # (the same path as SIGTERM sent to envkit alone), instead of half of it.
        child = _start(
            [str(python), "-E", "-s", "-m", IN_ENV_PACKAGE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            cwd=str(lib),
            start_new_session=True,
            preexec_fn=_die_with_parent,  # a prctl before exec, no locks taken
        )
        try:
            stdout, stderr = child.communicate(json.dumps(config), timeout=limit)
        except BaseException as exc:
            kill_tree(child.pid)
            child.communicate()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise ProbeError(f"the probe of {prefix} did not finish in {limit}s; it was stopped with everything it started") from None
            raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if child.returncode != 0:
        raise ProbeError(f"the probe crashed in {prefix}: {(stderr.strip().splitlines() or ['no output'])[-1]}")
    report = parse_report(stdout)
    unactivated = check_unactivated(python, unactivated_expected(prefix))
    platform, machine = machine_here()
    return replace(
        report,
        checks=(*report.checks, unactivated),
        node=this_node(),
        slurm_job=os.environ.get("SLURM_JOB_ID", ""),
        platform=platform,
        machine=machine,
    )


def machine_here() -> tuple[str, tuple[str, ...]]:
    """This machine's platform and the virtual packages rattler detects on it (CONDA_OVERRIDE_*
    honoured): the kind of machine a probe's verdict holds for."""
    from envkit.solve import backend  # rattler: once the probe has run

    platform = backend.native_platform()
    try:
        detected = backend.virtual_packages(platform)
    except Exception:  # detection must never cost the verdict
        return platform, ()
    return platform, tuple(sorted(backend.describe_virtual(v) for v in detected))


def this_node() -> str:
    """The host a probe ran on, as Slurm names nodes (the short host name)."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
