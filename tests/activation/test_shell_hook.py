"""Activation without conda, in real shells: `envkit shell` then `exit`, and `eval "$(envkit
shell-hook)"` then its deactivation, give the settings' exact values inside and the exact prior
environment after, hostile values included; also over a conda env that is already active."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.activation.shellrun import read_dump
from tests.activation.test_shells import HOSTILE
from tests.conftest import run_envkit, write_recipe
from tests.support.tiny import tiny_channel

ENVKIT = f"{sys.executable} -m envkit"
NOISE = ("SHLVL", "_", "PWD", "OLDPWD", "fish_greeting", "__fish", "TERM")


def _clean(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith(NOISE)}


@pytest.fixture(scope="module")
def hostile_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hook")
    body = (
        f"envkit: 1\nname: hooked\nchannels: [{tiny_channel(root).as_uri()}]\npackages: [tool]\n"
        f"threading:\n  env:\n    MY_HOSTILE: {json.dumps(HOSTILE)}\n    MKL_THREADING_LAYER: GNU\n"
        "    MY_GONE: {unset: true}\n    MY_PATHS: {prepend: [/opt/a b, /opt/c]}\n"
    )
    prefix = root / "envs" / "hooked"
    made = run_envkit("create", str(write_recipe(root / "recipes", "hooked", body)), "-p", str(prefix), "--yes", "--no-probe")
    assert made.returncode == 0, made.stderr
    return prefix


PRIORS = {
    "none": {},
    "set": {"MY_HOSTILE": "mine", "MY_GONE": "was here", "MY_PATHS": "/usr/old", "MKL_THREADING_LAYER": "INTEL"},
    "conda env active": {
        "CONDA_PREFIX": "/opt/conda/envs/other",
        "CONDA_SHLVL": "1",
        "CONDA_DEFAULT_ENV": "other",
        "CONDA_PROMPT_MODIFIER": "(other) ",
        "MY_GONE": "",
    },
}

# each shell: eval the hook, dump, eval the deactivation, dump
HOOKS = {
    "bash": 'env -0 > "$D.0"; eval "$(E shell-hook -p "$P" --shell bash)" || exit 97; env -0 > "$D.1"; '
    'eval "$(E shell-hook --deactivate --shell bash)" || exit 98; env -0 > "$D.2"',
    "zsh": 'env -0 > "$D.0"; eval "$(E shell-hook -p "$P" --shell zsh)" || exit 97; env -0 > "$D.1"; '
    'eval "$(E shell-hook --deactivate --shell zsh)" || exit 98; env -0 > "$D.2"',
    "fish": 'env -0 > "$D.0"; E shell-hook -p "$P" --shell fish | source; or exit 97; env -0 > "$D.1"; '
    'E shell-hook --deactivate --shell fish | source; or exit 98; env -0 > "$D.2"',
    "tcsh": 'env -0 > "$D.0"\neval "`E shell-hook -p $P --shell tcsh`"\nif ($status) exit 97\nenv -0 > "$D.1"\n'
    'eval "`E shell-hook --deactivate --shell tcsh`"\nif ($status) exit 98\nenv -0 > "$D.2"\n',
}
FLAGS = {"bash": ["--noprofile", "--norc", "-c"], "zsh": ["-f", "-c"], "fish": ["--no-config", "-c"], "tcsh": ["-f", "-c"]}


def _base(prior: dict[str, str], tmp_path: Path) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(HOME=str(tmp_path), LANG=env.get("LANG", "C.UTF-8"), ENVKIT_ENVS_DIR=str(tmp_path / "envs"))
    if "CONDA_PREFIX" in prior:
        env["PATH"] = f"{prior['CONDA_PREFIX']}/bin:{env['PATH']}"
    return env | prior


def _expect_inside(active: dict[str, str], prefix: Path, prior: dict[str, str]) -> None:
    assert active["MY_HOSTILE"] == HOSTILE and active["MKL_THREADING_LAYER"] == "GNU"
    assert "MY_GONE" not in active
    assert active["MY_PATHS"] == "/opt/a b:/opt/c" + (":/usr/old" if prior.get("MY_PATHS") else "")
    assert active["CONDA_PREFIX"] == str(prefix) and active["PATH"].split(":")[0] == str(prefix / "bin")
    assert active["CONDA_SHLVL"] == str(int(prior.get("CONDA_SHLVL", "0")) + 1)


@pytest.mark.parametrize("prior", sorted(PRIORS))
@pytest.mark.parametrize("shell", sorted(HOOKS))
def test_shell_hook_then_its_deactivation(hostile_env: Path, tmp_path: Path, shell: str, prior: str) -> None:
    exe = shutil.which(shell)
    assert exe, f"{shell} is not installed: .ci/run installs it"
    dump = tmp_path / "dump"
    script = (
        HOOKS[shell]
        .replace("E ", f"{ENVKIT} ")
        .replace("$D", str(dump))
        .replace('"$P"', f"'{hostile_env}'")
        .replace("$P", str(hostile_env))
    )
    proc = subprocess.run(
        [exe, *FLAGS[shell], script], capture_output=True, text=True, env=_base(PRIORS[prior], tmp_path), timeout=120, check=False
    )
    assert proc.returncode == 0, f"{shell} exit {proc.returncode}: {proc.stderr}"
    before, active, after = (read_dump(dump.with_suffix(f".{i}")) for i in range(3))
    _expect_inside(active, hostile_env, PRIORS[prior])
    assert _clean(after) == _clean(before), f"{shell}: not the prior environment after deactivation"
    assert "is active; leave it with" in proc.stderr


@pytest.mark.parametrize("shell", sorted(HOOKS))
def test_envkit_shell_then_exit(hostile_env: Path, tmp_path: Path, shell: str) -> None:
    exe = shutil.which(shell)
    assert exe, f"{shell} is not installed: .ci/run installs it"
    dump = tmp_path / "inside"
    prior = PRIORS["set"]
    env = _base(prior, tmp_path) | {"SHELL": exe}
    before = dict(env)
    proc = subprocess.run(
        [sys.executable, "-m", "envkit", "shell", "-p", str(hostile_env)],
        input=f"env -0 > '{dump}'\nexit 5\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 5, proc.stderr  # the shell's own exit code
    _expect_inside(read_dump(dump), hostile_env, prior)
    assert env == before  # the calling shell's environment is its own: nothing to restore


def test_a_second_activation_and_a_stray_deactivation_are_refused(hostile_env: Path, tmp_path: Path) -> None:
    env = _base({}, tmp_path)
    stray = subprocess.run(
        [sys.executable, "-m", "envkit", "shell-hook", "--deactivate", "--shell", "bash"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert stray.returncode == 2 and "no env is active through envkit shell-hook" in stray.stderr
    script = f'eval "$({ENVKIT} shell-hook -p {hostile_env} --shell bash)"; {ENVKIT} shell-hook -p {hostile_env} --shell bash'
    again = subprocess.run(["bash", "--norc", "-c", script], capture_output=True, text=True, env=env, check=False)
    assert again.returncode == 2 and "is active through envkit shell-hook already" in again.stderr


def test_create_names_envkits_own_activation_where_there_is_no_conda(tmp_path: Path) -> None:
    body = f"envkit: 1\nname: noconda\nchannels: [{tiny_channel(tmp_path).as_uri()}]\npackages: [tool]\nthreading: {{omp_num_threads: 3}}\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDA")} | {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    prefix = tmp_path / "envs" / "noconda"
    made = run_envkit("create", str(write_recipe(tmp_path / "recipes", "noconda", body)), "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert made.returncode == 0, made.stderr
    line = next(line for line in made.stdout.splitlines() if line.startswith("activate with: "))
    assert line.startswith(f'activate with: envkit shell -p {prefix} (or eval "$(envkit shell-hook -p {prefix})")'), line
    pasted = line.split("(or ", 1)[1].split(")   or run:", 1)[0]
    script = pasted.replace("envkit ", f"{ENVKIT} ") + '; printf %s "$OMP_NUM_THREADS"'
    ran = subprocess.run(["bash", "--norc", "-c", script], capture_output=True, text=True, env=env, check=False)
    assert ran.returncode == 0 and ran.stdout == "3", (script, ran.stdout, ran.stderr)
