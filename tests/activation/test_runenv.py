"""`envkit run` and `envkit activation show` on an env whose activation envkit wrote."""

from __future__ import annotations

import json
import os
from pathlib import Path

from envkit.activation.runenv import activated_environment
from envkit.activation.writer import ops_to_json, render_files, write_files
from envkit.recipe.model import EnvOp
from envkit.record import write_record
from tests.conftest import run_envkit


def fake_prefix(tmp_path: Path) -> Path:
    """A minimal conda env: conda-meta/ plus envkit's activation and record."""
    prefix = tmp_path / "envs" / "demo"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "history").write_text("")
    ops = (EnvOp("MKL_THREADING_LAYER", "set", value="GNU"), EnvOp("ENVKIT_X", "set", value="a 'b' $c"))
    write_files(render_files(prefix, "demo", ops))
    (prefix / "etc" / "conda" / "activate.d" / "zz-other.sh").write_text("export OTHER_TOOL=1\n")
    write_record(prefix, {"recipe": {"name": "demo"}, "activation": {"ops": ops_to_json(ops)}})
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
    missing = run_envkit("run", "-p", str(prefix), "--", "no-such-command-xyz")
    assert missing.returncode == 2 and "command not found" in missing.stderr


def test_activation_show(tmp_path: Path) -> None:
    prefix = fake_prefix(tmp_path)
    proc = run_envkit("activation", "show", "-p", str(prefix), "--shell", "fish", "--json")
    data = json.loads(proc.stdout)["data"]
    assert proc.returncode == 0 and data["recipe"] == "demo"
    assert "set -gx MKL_THREADING_LAYER 'GNU'" in data["activate"]
    bad = run_envkit("activation", "show", "-p", str(prefix), "--shell", "nushell")
    assert bad.returncode == 2 and "unknown shell 'nushell'" in bad.stderr


def test_envkit_run_json_captures_output(tmp_path: Path) -> None:
    prefix = fake_prefix(tmp_path)
    proc = run_envkit("run", "-p", str(prefix), "--json", "--", "sh", "-c", 'echo "layer=$MKL_THREADING_LAYER"; echo oops >&2; exit 3')
    doc = json.loads(proc.stdout)
    assert proc.returncode == 3 and doc["exit_code"] == 3
    assert doc["data"]["stdout"] == "layer=GNU\n" and doc["data"]["stderr"] == "oops\n"
