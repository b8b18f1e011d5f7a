"""envkit run by another user, for real: uid 65534 (nobody) through setpriv, with envkit installed
from this checkout into a venv of the system's python3 (the test's own interpreter lives under
/root, which nobody may enter). What a teammate sees in an env someone else made."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
SYSTEM_PYTHON = Path("/usr/bin/python3")
# kept between sessions (its dependencies take a while), one per checkout (two test runs at once)
VENV = Path(f"/tmp/envkit-tests-other-user-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:10]}")


def _can_switch() -> str | None:
    """Why the tests cannot run envkit as another user here, or None."""
    if os.geteuid() != 0:
        return "running envkit as another user needs root (tools/test.sh runs the suite as root)"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is missing"
    if not SYSTEM_PYTHON.is_file():
        return f"{SYSTEM_PYTHON} is missing: apt-get install python3 python3-venv"
    return None


def other_user_envkit(home: Path) -> list[str]:
    """argv that runs this checkout's envkit as nobody, with `home` as its HOME (made nobody's).
    Fails, saying how to fix it, where that cannot be done: such a test is not skipped."""
    why = _can_switch()
    if why is not None:
        pytest.fail(f"cannot run envkit as another user: {why}")
    python = VENV / "bin" / "python"
    if not python.exists() or subprocess.run([str(python), "-c", "import rattler, yaml, rich, packaging"], check=False).returncode:
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", str(VENV)], check=True, capture_output=True)
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "py-rattler>=0.28,<0.29",
                "pyyaml",
                "packaging",
                "rich",
            ],
            check=True,
            capture_output=True,
        )
    # this checkout's envkit as it is now, copied in (nobody may not read a checkout under /root)
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], check=True, capture_output=True, text=True
        ).stdout.strip()
    )
    shutil.rmtree(site / "envkit", ignore_errors=True)
    shutil.copytree(ROOT / "envkit", site / "envkit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "recipes", site / "envkit" / "recipes", dirs_exist_ok=True)
    subprocess.run(["chmod", "-R", "a+rX", str(VENV)], check=True)
    home.mkdir(parents=True, exist_ok=True)
    os.chown(home, NOBODY, NOBODY)
    return [
        "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
        "env", "-i", f"HOME={home}", f"PATH={os.environ.get('PATH', '/usr/bin:/bin')}", "PYTHONDONTWRITEBYTECODE=1",
        str(python), "-m", "envkit",
    ]  # fmt: skip


# a real conda base (../shared/conda's wheel) on the system's python3, which nobody may run: the
# tests' own conda sits on an interpreter under /root
CONDA_BASE = Path(f"/tmp/envkit-tests-other-conda-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:10]}")
CONDA_INSTALL = ROOT.parent / "shared" / "conda" / "install.sh"


def other_user_conda(home: Path) -> tuple[list[str], Path]:
    """(argv prefix that runs a command as nobody with `home` as HOME, the conda it may run): what
    a teammate's own conda makes of an env. Fails, saying why, where that cannot be done."""
    why = _can_switch() or (None if CONDA_INSTALL.is_file() else f"{CONDA_INSTALL} is missing (a real conda to run)")
    if why is not None:
        pytest.fail(f"cannot run conda as another user: {why}")
    conda = CONDA_BASE / "bin" / "conda"
    if not conda.exists() or subprocess.run([str(conda), "--version"], capture_output=True, check=False).returncode:
        shutil.rmtree(CONDA_BASE, ignore_errors=True)
        env = {**os.environ, "PYTHON": str(SYSTEM_PYTHON)}
        subprocess.run(["bash", str(CONDA_INSTALL), str(CONDA_BASE)], env=env, check=True, capture_output=True)
        subprocess.run(["chmod", "-R", "a+rX", str(CONDA_BASE)], check=True)
    home.mkdir(parents=True, exist_ok=True)
    os.chown(home, NOBODY, NOBODY)
    argv = [
        "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
        "env", "-i", f"HOME={home}", f"PATH={os.environ.get('PATH', '/usr/bin:/bin')}",
        f"CONDA_PKGS_DIRS={home / 'pkgs'}", "CONDA_ADD_PIP_AS_PYTHON_DEPENDENCY=false",
    ]  # fmt: skip
    return argv, conda


def run_as_other(argv: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=600, check=False)
