"""The CLI contract: versioned JSON envelope on every command, documented exit codes, no tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit import __version__
from tests.conftest import run_envkit, write_recipe

ENVELOPE = {"envkit_json", "envkit_version", "command", "ok", "exit_code", "data", "messages", "errors", "hint"}


def test_version() -> None:
    proc = run_envkit("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"envkit {__version__}"


@pytest.mark.parametrize(
    "args",
    [
        ["recipes", "list"],
        ["recipes", "show", "yolov8"],
        ["recipes", "show", "yolov8", "--resolved"],
        ["recipes", "validate", "recipes/yolov8.yaml"],
        ["audit", "--explain", "EK001"],
    ],
)
def test_every_command_has_the_envelope(args: list[str]) -> None:
    proc = run_envkit(*args, "--json", cwd=Path(__file__).parent.parent)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == ENVELOPE and doc["envkit_json"] == 1 and doc["ok"] is True and doc["errors"] == []


def test_show_resolved_json_has_specs_and_settings() -> None:
    doc = json.loads(run_envkit("recipes", "show", "yolov8", "--resolved", "--json").stdout)
    compiled = doc["data"]["compiled"]
    assert "libblas * *mkl" in [s["spec"] for s in compiled["conda_specs"]]
    settings = {s["op"]["name"]: s for s in compiled["activation"]["settings"]}
    assert settings["MKL_THREADING_LAYER"]["op"]["value"] == "GNU"
    assert doc["data"]["recipe"]["chain"][0].endswith("yolov8.yaml")


def test_show_resolved_human() -> None:
    proc = run_envkit("recipes", "show", "pytorch-cpu-openblas", "--resolved")
    assert proc.returncode == 0
    assert "libblas * *openblas" in proc.stdout and "OMP_NUM_THREADS set <physical cores, resolved when written>" in proc.stdout


def test_validate_reports_each_problem_and_exit_2(tmp_path: Path) -> None:
    bad = write_recipe(
        tmp_path,
        "bad",
        "envkit: 1\nname: bad\nchannels: [conda-forge]\ntoolchain: {blas: mkll}\nthreading: {env: {KMP_DUPLICATE_LIB_OK: 'TRUE'}}\n",
    )
    inconsistent = write_recipe(
        tmp_path, "inc", "envkit: 1\nname: inc\nchannels: [conda-forge]\nthreading: {env: {KMP_DUPLICATE_LIB_OK: 'TRUE'}}\n"
    )
    proc = run_envkit("recipes", "validate", str(bad), str(inconsistent), "recipes/yolov8.yaml", cwd=Path(__file__).parent.parent)
    assert proc.returncode == 2
    lines = proc.stdout.splitlines()
    assert any(f"{bad}:4:19: toolchain.blas: expected one of" in line for line in lines)
    assert any("RC004" in line and "KMP_DUPLICATE_LIB_OK" in line for line in lines)
    assert "ok recipes/yolov8.yaml" in proc.stdout


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["recipes", "show", "no-such"], 2, "no recipe named 'no-such'"),
        (["recipes", "show", "../../no/such/file.yaml"], 2, "recipe file not found"),
        (["recipes", "show", "Bad\nName"], 2, "invalid recipe name"),
        (["create", "nope", "--dry-run"], 2, "no recipe named 'nope'"),
        (["create", "yolov8", "-n", "a", "-p", "/tmp/x"], 2, "not allowed with argument"),
        (["probe", "-p", "/nonexistent/env"], 2, "is not a conda env"),
        (["create", "yolov8", "-n", "../escape", "--dry-run"], 2, "invalid env name"),
        (["frobnicate"], 2, "invalid choice"),
    ],
)
def test_bad_input_is_one_line_with_exit_code(args: list[str], code: int, needle: str) -> None:
    proc = run_envkit(*args)
    assert proc.returncode == code, proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr


def test_json_errors_are_enveloped() -> None:
    proc = run_envkit("recipes", "show", "nope", "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 2 and doc["ok"] is False and doc["exit_code"] == 2
    assert doc["errors"] == ["no recipe named 'nope'"] and doc["hint"]


def test_unreachable_channel_says_which_and_suggests_mirror() -> None:
    proc = run_envkit("create", "conda-forge-base", "--dry-run", "--mirror", "conda-forge=http://127.0.0.1:9/conda-forge")
    assert proc.returncode == 3, proc.stderr
    assert "cannot reach channel(s) conda-forge" in proc.stderr and "--mirror NAME=URL" in proc.stderr
