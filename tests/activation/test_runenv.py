"""`envkit run` and `envkit activation show` on an env whose activation envkit wrote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from envkit.activation.runenv import activated_environment
from envkit.activation.writer import ops_to_json, render_files, write_files
from envkit.prefix.envrecord import ActivationSection, EnvRecord, RecipeRef
from envkit.prefix.record import write_record
from envkit.recipe.model import EnvOp
from tests.conftest import run_envkit


def fake_prefix(tmp_path: Path) -> Path:
    """A minimal conda env: conda-meta/ plus envkit's activation and record."""
    prefix = tmp_path / "envs" / "demo"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "history").write_text("")
    ops = (EnvOp("MKL_THREADING_LAYER", "set", value="GNU"), EnvOp("ENVKIT_X", "set", value="a 'b' $c"))
    write_files(render_files(prefix, "demo", ops))
    (prefix / "etc" / "conda" / "activate.d" / "zz-other.sh").write_text("export OTHER_TOOL=1\n")
    write_record(prefix, EnvRecord(recipe=RecipeRef("demo"), activation=ActivationSection(ops=ops_to_json(ops))))
    return prefix


def test_activated_environment_comes_from_sourcing(tmp_path: Path) -> None:
    prefix = fake_prefix(tmp_path)
    env = activated_environment(prefix, {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert env["MKL_THREADING_LAYER"] == "GNU" and env["ENVKIT_X"] == "a 'b' $c" and env["OTHER_TOOL"] == "1"
    assert env["PATH"].split(os.pathsep)[0] == str(prefix / "bin") and env["CONDA_PREFIX"] == str(prefix)


def test_envkit_run_passes_exit_code_and_environment(tmp_path: Path) -> None:
    prefix = fake_prefix(tmp_path)
    out = tmp_path / "out.json"
    code = f"import json, os, sys; json.dump(dict(os.environ), open({str(out)!r}, 'w')); sys.exit(7)"
    proc = run_envkit("run", "-p", str(prefix), "--", "python3", "-c", code)
    assert proc.returncode == 7, proc.stderr
    seen = json.loads(out.read_text())
    assert seen["MKL_THREADING_LAYER"] == "GNU" and seen["ENVKIT_X"] == "a 'b' $c"
    # as shells and `conda run` report them: 127 not found, 126 not executable
    missing = run_envkit("run", "-p", str(prefix), "--", "no-such-command-xyz")
    assert missing.returncode == 127 and "no-such-command-xyz: command not found" in missing.stderr
    script = tmp_path / "not-executable.sh"
    script.write_text("echo hi\n")
    script.chmod(0o644)
    denied = run_envkit("run", "-p", str(prefix), "--", str(script))
    assert denied.returncode == 126 and "permission denied" in denied.stderr
    # an empty name (`-- "$TOOL"`, TOOL unset) was searched for as a folder on PATH: "permission denied", 126
    empty = run_envkit("run", "-p", str(prefix), "--", "", "train.py")
    assert empty.returncode == 127 and "'': command not found: the command's name is empty" in empty.stderr
    as_json = run_envkit("run", "-p", str(prefix), "--json", "--", "no-such-command-xyz")
    assert as_json.returncode == 127 and json.loads(as_json.stdout)["exit_code"] == 127


def test_active_env_is_the_default(tmp_path: Path) -> None:
    """conda's convention: -n NAME, -p PREFIX, else CONDA_PREFIX; the same for every env command."""
    prefix = fake_prefix(tmp_path)
    env = dict(os.environ, CONDA_PREFIX=str(prefix))
    proc = run_envkit("run", "--", "sh", "-c", 'printf %s "$MKL_THREADING_LAYER"', env=env)
    assert proc.returncode == 0 and proc.stdout == "GNU"
    shown = run_envkit("activation", "show", "--json", env=env)
    assert shown.returncode == 0 and json.loads(shown.stdout)["data"]["prefix"] == str(prefix)
    none = run_envkit("activation", "show")
    assert none.returncode == 2 and "no env given and none is active" in none.stderr


def test_activation_show(tmp_path: Path) -> None:
    prefix = fake_prefix(tmp_path)
    proc = run_envkit("activation", "show", "-p", str(prefix), "--shell", "fish", "--json")
    data = json.loads(proc.stdout)["data"]
    assert proc.returncode == 0 and data["recipe"] == "demo"
    assert "set -gx MKL_THREADING_LAYER 'GNU'" in data["activate"]
    bad = run_envkit("activation", "show", "-p", str(prefix), "--shell", "nushell")
    assert bad.returncode == 2 and "invalid choice: 'nushell'" in bad.stderr


def test_envkit_run_json_captures_output(tmp_path: Path) -> None:
    prefix = fake_prefix(tmp_path)
    proc = run_envkit("run", "-p", str(prefix), "--json", "--", "sh", "-c", 'echo "layer=$MKL_THREADING_LAYER"; echo oops >&2; exit 3')
    doc = json.loads(proc.stdout)
    assert proc.returncode == 3 and doc["exit_code"] == 3
    assert doc["data"]["stdout"] == "layer=GNU\n" and doc["data"]["stderr"] == "oops\n"


def test_a_command_a_signal_ends_ends_envkit_by_the_same_signal(tmp_path: Path) -> None:
    """As sudo does: the caller sees the signal (Python's returncode -N, a shell's 128 + N), so a
    shell loop stops on Ctrl-C and a scheduler tells a kill from an exit; --json says which."""
    prefix = fake_prefix(tmp_path)
    for signum in (signal.SIGTERM, signal.SIGKILL):
        proc = run_envkit("run", "-p", str(prefix), "--", "sh", "-c", f"kill -{signum.name[3:]} $$")
        assert proc.returncode == -signum and "Traceback" not in proc.stderr, proc.stderr
    as_json = run_envkit("run", "-p", str(prefix), "--json", "--", "sh", "-c", "echo before; kill -TERM $$")
    doc = json.loads(as_json.stdout)
    assert as_json.returncode == -signal.SIGTERM
    assert (doc["exit_code"], doc["data"]["returncode"], doc["data"]["signal"], doc["data"]["stdout"]) == (143, 143, "SIGTERM", "before\n")
    handled = run_envkit("run", "-p", str(prefix), "--", "sh", "-c", "exit 130")  # an exit code, not a signal
    assert handled.returncode == 130


def test_ctrl_c_sent_to_envkit_alone_ends_the_command_and_then_envkit_by_sigint(tmp_path: Path) -> None:
    """A job runner's SIGINT reaches envkit only (no terminal): envkit passes it on, the command
    dies of it, and so does envkit, without a traceback."""
    prefix = fake_prefix(tmp_path)
    code = "import time; print('ready', flush=True); time.sleep(60)"
    envkit = subprocess.Popen(
        [sys.executable, "-m", "envkit", "run", "-p", str(prefix), "--", "python3", "-c", code],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert envkit.stdout is not None and envkit.stdout.readline() == "ready\n"
        envkit.send_signal(signal.SIGINT)
        _, err = envkit.communicate(timeout=60)
    finally:
        envkit.kill()
    # the traceback, if any, is the command's own (python's KeyboardInterrupt), not envkit's
    assert envkit.returncode == -signal.SIGINT and "envkit" not in err, err
