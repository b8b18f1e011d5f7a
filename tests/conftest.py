"""Test isolation and the shared real fixtures (channels built here, envs on disk, real shells)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.conda import Conda, conda_exe

REAL_HOME = Path.home()
os.environ.setdefault("ENVKIT_TEST_CACHE", str(REAL_HOME / ".cache" / "envkit-tests"))
ROOT = Path(__file__).resolve().parent.parent

# CI replays the same examples every run (a red build is the change's doing); elsewhere each run
# draws new ones and keeps exploring. A failure found that way becomes a plain test.
settings.register_profile("ci", derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory everyone may enter and read, only root write, for what others sharing an env
    see (pytest's own directories are 0700: nobody else may enter them)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="envkit-shared-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def session_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Module- and session-scoped fixtures run outside each test's own HOME (isolated, below): they
    get this one, so that nothing they run writes into the real home (conda registering the envs it
    creates in ~/.conda/environments.txt did, envs long deleted listed by every later conda)."""
    home = tmp_path_factory.mktemp("session-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        patch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
        patch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
        yield home


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own HOME, config, cache and envs dir; no conda or envkit settings leak in."""
    home = tmp_path / "home"
    home.mkdir()
    for var in list(os.environ):
        if var.startswith(("CONDA_", "ENVKIT_", "_ENVKIT_", "MKL_", "OMP_", "KMP_", "NCCL_", "JUPYTER_")) and not var.startswith(
            "ENVKIT_TEST_"
        ):
            monkeypatch.delenv(var, raising=False)
    for var in ("XDG_DATA_HOME", "PYTHONUSERBASE"):  # Jupyter's kernels: the test's HOME has them
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("ENVKIT_ENVS_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("ENVKIT_PKGS_DIR", str(tmp_path / "pkgs"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    return home


@pytest.fixture
def flushed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every file descriptor this process passes to os.fsync from here on; each call still goes
    through to the real one."""
    calls: list[int] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return calls


@pytest.fixture(scope="session")
def conda_pkgs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One package cache for every conda the tests run, so torch is extracted once."""
    return tmp_path_factory.mktemp("conda-pkgs")


@pytest.fixture
def conda(conda_pkgs: Path) -> Conda:
    return Conda(conda_exe(), conda_pkgs)


@pytest.fixture(scope="session")
def replica(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from tests.support.replica import build_replica

    return build_replica(tmp_path_factory.mktemp("replica"))


@pytest.fixture
def replica_mirrors(replica: dict[str, Path]) -> dict[str, str]:
    return {name: path.as_uri() for name, path in replica.items()}


@pytest.fixture(scope="session")
def wheel_channel() -> Path:
    from tests.support.wheelchannel import build_wheel_channel

    return build_wheel_channel()


@pytest.fixture(scope="session")
def session_pkgs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One package cache for the session, so real-payload envs hardlink instead of re-extracting."""
    return tmp_path_factory.mktemp("pkgs-cache")


def write_recipe(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(body, encoding="utf-8")
    return path


def payload_recipe(folder: Path, channel: Path, name: str = "seedenv", threading: str = "") -> Path:
    body = f"""envkit: 1
name: {name}
channels: [{channel.as_uri()}]
python: "3.11"
packages: [pytorch 2.13.0, numpy, mkl-service, threadpoolctl]
{threading}
probe:
  imports: [numpy, torch, mkl]
  import_orders: [[torch, numpy, mkl], [numpy, mkl, torch]]
  ddp: {{enabled: true, nproc: 2}}
  timeout: 180
"""
    return write_recipe(folder, name, body)


def run_envkit(
    *args: str, env: dict[str, str] | None = None, timeout: float = 900, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it: a real subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "envkit", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env if env is not None else dict(os.environ),
        cwd=cwd,
        check=False,
    )


def python_env(tmp_path: Path, name: str, threading: str) -> tuple[Path, Path]:
    """(recipe, prefix) of an env envkit made from the tiny channel with a `python` over the host's
    interpreter and the given `threading:`: made in a second, and a real python to start."""
    from tests.support.condapkg import index_channel
    from tests.support.tiny import tiny_channel
    from tests.support.wheelchannel import python_shim

    channel = tiny_channel(tmp_path)
    python_shim(channel)
    index_channel(channel)
    recipe = write_recipe(
        tmp_path / "r", name, f"envkit: 1\nname: {name}\nchannels: [{channel.as_uri()}]\npackages: [python, tool]\nthreading: {threading}\n"
    )
    prefix = tmp_path / name
    made = run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe")
    assert made.returncode == 0, made.stderr
    return recipe, prefix


@pytest.fixture(scope="session")
def seed_env(tmp_path_factory: pytest.TempPathFactory, wheel_channel: Path, session_pkgs: Path) -> Iterator[Path]:
    """A real env from the wheel channel, created by envkit (activation written, probe not run)."""
    base = tmp_path_factory.mktemp("seed")
    recipe = payload_recipe(base / "recipes", wheel_channel)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONDA_", "MKL_", "OMP_"))}
    env.update(
        HOME=str(base / "home"), XDG_CONFIG_HOME=str(base / "cfg"), XDG_CACHE_HOME=str(base / "cache"), ENVKIT_PKGS_DIR=str(session_pkgs)
    )
    prefix = base / "env"
    proc = run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert proc.returncode == 0, proc.stderr
    yield prefix
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def raw_payload_env(tmp_path_factory: pytest.TempPathFactory, wheel_channel: Path, session_pkgs: Path) -> Path:
    """The seed env's packages installed by plain rattler, as another tool would: no activation scripts."""
    from envkit.solve import backend

    prefix = tmp_path_factory.mktemp("raw") / "env"
    specs = ["python 3.11.*", "pytorch ==2.13.0", "numpy", "mkl-service", "threadpoolctl"]
    records = backend.solve([wheel_channel.as_uri()], specs, "linux-64", backend.virtual_packages("linux-64"))
    backend.install(records, prefix, session_pkgs, specs, None)
    return prefix
