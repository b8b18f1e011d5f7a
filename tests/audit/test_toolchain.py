"""`envkit toolchain` and the map in `create --dry-run`: who provides each BLAS/OpenMP/torch
library, who brought it, what conflicts, on the seed env and on a plan."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.conftest import run_envkit


def providers(doc: dict[str, Any], part: str) -> dict[str, dict[str, Any]]:
    rows = doc["providers"]
    assert isinstance(rows, list)
    return {str(p["name"]): p for p in rows if p["part"] == part}


def test_the_seed_env_says_who_brought_the_second_openmp_runtime(raw_payload_env: Path) -> None:
    proc = run_envkit("toolchain", "-p", str(raw_payload_env), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["data"]
    assert doc["planned"] is False
    openmp = providers(doc, "OpenMP runtime")
    # MKL's Intel OpenMP, brought by mkl-service -> mkl; torch's own libgomp, vendored in the wheel
    assert openmp["intel-openmp"]["files"] == ["lib/libiomp5.so"]
    assert ["mkl-service", "mkl", "intel-openmp"] in openmp["intel-openmp"]["brought_by"]
    assert any(f.endswith("torch/lib/libgomp.so.1") for f in openmp["pytorch"]["files"])
    blas = providers(doc, "BLAS / LAPACK")
    assert any(f.startswith("lib/libmkl_rt.so") for f in blas["mkl"]["files"])
    assert any("numpy.libs/libscipy_openblas" in f for f in blas["numpy"]["files"])  # numpy's wheel vendors OpenBLAS
    assert [c["rule_id"] for c in doc["conflicts"]] == ["EK001"]

    human = run_envkit("toolchain", "-p", str(raw_payload_env))
    assert human.returncode == 0
    assert "OpenMP runtime" in human.stdout and "brought by mkl-service → mkl → intel-openmp" in human.stdout
    assert "EK001 error" in human.stdout
    # off a terminal (a CI log), whatever COLUMNS says: no line is wrapped, the evidence stays whole
    narrow = run_envkit("toolchain", "-p", str(raw_payload_env), env={**os.environ, "COLUMNS": "60"})
    evidence = doc["conflicts"][0]["evidence"]
    assert narrow.returncode == 0 and len(evidence) > 60 and any(evidence in line for line in narrow.stdout.splitlines())


def test_a_plan_shows_its_toolchain(replica: dict[str, Path]) -> None:
    mirrors = [f"--mirror={n}={p.as_uri()}" for n, p in replica.items()]
    proc = run_envkit("create", "yolov8-cpu", "--dry-run", "--json", *mirrors)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["data"]["toolchain"]
    assert doc["planned"] is True and "ultralytics" in doc["requested"]
    blas = providers(doc, "BLAS / LAPACK")
    assert blas["libblas"]["build"].endswith("_mkl") and blas["libblas"]["files"] == []
    assert ["pytorch", "libblas", "mkl"] in blas["mkl"]["brought_by"]
    openmp = providers(doc, "OpenMP runtime")
    assert set(openmp) == {"_openmp_mutex", "llvm-openmp"}  # one runtime: conda-forge's LLVM OpenMP
    assert ("MKL_THREADING_LAYER", "GNU") in {(a[0], a[1]) for a in doc["activation"]}
    human = run_envkit("create", "yolov8-cpu", "--dry-run", *mirrors)
    assert "toolchain of" in human.stdout and "a plan: library files are known once installed" in human.stdout
