"""Envs made by the real conda, the way the seed users made theirs (python, numpy, mkl-service,
pytorch from a channel), through envkit: audited, probed, fixed, and still fully usable by conda."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import run_envkit
from tests.support.conda import Conda


def probe(prefix: Path) -> tuple[int, dict[str, str]]:
    proc = run_envkit("probe", "-p", str(prefix), "--json", timeout=600)
    doc = json.loads(proc.stdout)
    return proc.returncode, {c["id"]: c["status"] for c in doc["data"]["checks"]} if doc["data"] else {}


def test_the_seed_env_as_conda_made_it(conda: Conda, wheel_channel: Path, tmp_path: Path) -> None:
    prefix = conda.create(tmp_path / "seed", [wheel_channel], ["python=3.11", "pytorch=2.13.0", "numpy", "mkl-service"])

    audit = json.loads(run_envkit("audit", "-p", str(prefix), "--json").stdout)
    findings = {f["rule_id"]: f for f in audit["data"]["audits"][0]["findings"]}
    assert audit["exit_code"] == 1 and findings["EK001"]["fixable"] is True
    assert audit["data"]["audits"][0]["envkit_managed"] is False

    code, checks = probe(prefix)
    assert code == 1 and checks["ddp-seed"] == "fail" and checks["ddp-gloo"] == "fail"

    # the toolchain map of an env envkit did not make: what was asked for comes from conda's history
    mapped = run_envkit("toolchain", "-p", str(prefix), "--json")
    assert mapped.returncode == 0, mapped.stderr
    doc = json.loads(mapped.stdout)["data"]
    assert set(doc["requested"]) == {"python", "pytorch", "numpy", "mkl-service"}
    openmp = {p["name"]: p for p in doc["providers"] if p["part"] == "OpenMP runtime"}
    assert ["mkl-service", "mkl", "intel-openmp"] in openmp["intel-openmp"]["brought_by"]
    assert any(f.endswith("torch/lib/libgomp.so.1") for f in openmp["pytorch"]["files"])
    assert "EK001" in [c["rule_id"] for c in doc["conflicts"]]

    fixed = run_envkit("audit", "-p", str(prefix), "--fix", "--yes")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    code, checks = probe(prefix)
    assert code == 0 and checks["ddp-seed"] == "pass" and checks["ddp-gloo"] == "pass", checks

    # conda still owns the env: list, activation (with the fix), run, install and remove, doctor
    assert "mkl-service" in conda.ok("list", "-p", str(prefix))
    conda.ok("list", "--explicit", "-p", str(prefix))
    script = f'eval "$({conda.exe} shell.bash hook)"; conda activate {prefix}; printf %s "$MKL_THREADING_LAYER"'
    activated = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=conda.environ(), timeout=120, check=False)
    assert activated.stdout == "GNU", activated.stderr
    ran = conda.ok("run", "-p", str(prefix), "python", "-c", "import os; print(os.environ['MKL_THREADING_LAYER'])")
    assert ran.strip() == "GNU"
    before = {json.loads(p.read_text())["name"] for p in (prefix / "conda-meta").glob("*.json")}
    conda.ok("install", "-y", "-q", "-p", str(prefix), "--override-channels", "-c", wheel_channel.as_uri(), "threadpoolctl")
    conda.ok("remove", "-y", "-q", "-p", str(prefix), "threadpoolctl")
    assert {json.loads(p.read_text())["name"] for p in (prefix / "conda-meta").glob("*.json")} == before
    assert "❌" not in conda.ok("doctor", "-p", str(prefix))
    assert run_envkit("audit", "-p", str(prefix), "--min-severity", "error").returncode == 0
