"""The recipes envkit ships, on every platform they declare, against the replica of conda-forge
(tests/support/replica.py): the plan each platform gets, MKL only on x86-64, one lock for all of
them, and `recipes check` of the whole set."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from envkit.solve.backend import native_platform
from envkit.team.lock import read_lock
from tests.conftest import ROOT, run_envkit

X86_64 = ("linux-64", "win-64")
# (recipe, platform) -> the pytorch build conda-forge has there, as pytorch-cpu-feedstock's
# .ci_support variants make it (blas_impl mkl on x86-64, generic elsewhere; CUDA 12.8 on Windows)
PYTORCH_BUILD = {
    ("yolov8-cpu", "linux-64"): "cpu_mkl_",
    ("yolov8-cpu", "linux-aarch64"): "cpu_generic_",
    ("yolov8-cpu", "osx-arm64"): "cpu_generic_",
    ("yolov8-cpu", "win-64"): "cpu_mkl_",
    ("yolov8", "linux-64"): "cuda129_mkl_",
    ("yolov8", "linux-aarch64"): "cuda129_generic_",
    ("yolov8", "win-64"): "cuda128_mkl_",
}


@pytest.fixture
def mirrored(isolated: Path, replica: dict[str, Path]) -> None:
    config = isolated / ".config" / "envkit" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("mirrors:\n" + "".join(f"  {name}: {path.as_uri()}\n" for name, path in replica.items()))


@pytest.mark.parametrize(("recipe", "platform"), sorted(PYTORCH_BUILD), ids="-".join)
def test_a_shipped_recipe_plans_on_each_platform_it_declares(mirrored: None, tmp_path: Path, recipe: str, platform: str) -> None:
    proc = run_envkit("create", recipe, "--dry-run", "--platform", platform, "--json", cwd=tmp_path)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and doc["ok"], proc.stdout + proc.stderr
    plan = doc["data"]["plan"]
    builds = {p["name"]: p["build"] for p in plan["packages"]}
    assert builds["pytorch"].startswith(PYTORCH_BUILD[recipe, platform])
    assert ("mkl" in builds) is (platform in X86_64)  # MKL exists on x86-64 only
    assert ("libopenblas" in builds) is (platform not in X86_64)
    # MKL's GNU layer where MKL and libgomp's GNU entry points are (Linux x86-64); nothing set elsewhere
    variables = {op["name"] for op in plan["activation"]}
    assert ("MKL_THREADING_LAYER" in variables) is (platform == "linux-64")


def test_the_cuda_recipe_does_not_declare_macos(mirrored: None, tmp_path: Path) -> None:
    proc = run_envkit("recipes", "show", "yolov8", "--json", cwd=tmp_path)
    assert json.loads(proc.stdout)["data"]["recipe"]["platforms"] == ["linux-64", "linux-aarch64", "win-64"]
    refused = run_envkit("create", "yolov8", "--dry-run", "--platform", "osx-arm64", cwd=tmp_path)
    assert refused.returncode != 0 and "conda-forge builds no CUDA pytorch on osx-arm64" in refused.stderr


def test_one_lock_for_every_platform_and_an_export_of_each(mirrored: None, tmp_path: Path) -> None:
    proc = run_envkit("lock", "yolov8-cpu", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lock = read_lock(tmp_path / "yolov8-cpu.lock")
    assert [p.platform for p in lock.platforms] == ["linux-64", "linux-aarch64", "osx-arm64", "win-64"]
    for slice_ in lock.platforms:
        names = {r.name.normalized for r in slice_.records}
        assert ("mkl" in names) is (slice_.platform in X86_64), slice_.platform
    for platform in ("linux-64", "linux-aarch64", "osx-arm64", "win-64"):
        exported = run_envkit("export", "--lock", "yolov8-cpu.lock", "--platform", platform, "--format", "explicit", cwd=tmp_path)
        assert exported.returncode == 0 and f"# platform: {platform}" in exported.stdout, exported.stderr
    # a locked create here installs this machine's part of it (the replica's packages carry no payload)
    made = run_envkit("create", "yolov8-cpu", "--lock", "yolov8-cpu.lock", "-p", str(tmp_path / "env"), "--yes", "--no-probe", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    installed = {p.name.rsplit("-", 2)[0]: p.name for p in (tmp_path / "env" / "conda-meta").glob("*.json")}
    here = lock.for_platform(native_platform())
    assert here is not None and set(installed) == {r.name.normalized for r in here.records}


def test_recipes_check_passes_on_the_shipped_recipes_locked_for_every_platform(mirrored: None, tmp_path: Path) -> None:
    """A recipe repo made of the shipped recipes: each one no other extends gets its lock, for
    every platform it declares; `recipes check` then finds each valid, fresh and solvable."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "recipes", repo)
    leaves = ("yolov8", "yolov8-cpu", "pytorch-cpu-openblas", "pytorch-legacy-channel")
    for name in leaves:
        proc = run_envkit("lock", f"{name}.yaml", cwd=repo)
        assert proc.returncode == 0, proc.stderr
    proc = run_envkit("recipes", "check", ".", "--json", cwd=repo)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checked = {row["name"]: row for row in doc["data"]}
    assert all(not row["problems"] for row in checked.values()), checked
    assert checked["yolov8-cpu"]["platforms"] == ["linux-64", "linux-aarch64", "osx-arm64", "win-64"]
    assert checked["yolov8"]["platforms"] == ["linux-64", "linux-aarch64", "win-64"]


def test_the_probe_expects_each_platforms_blas(tmp_path: Path) -> None:
    """What the probe checks is the recipe as the env's platform sees it: MKL on x86-64, OpenBLAS on ARM."""
    from envkit.probe.runner import spec_for
    from envkit.recipe.loader import load_recipe

    recipe = load_recipe("yolov8-cpu")
    expected = {p: dict(spec_for(tmp_path, recipe, p).expect)["blas"] for p in ("linux-64", "linux-aarch64", "osx-arm64", "win-64")}
    assert expected == {"linux-64": "mkl", "linux-aarch64": "openblas", "osx-arm64": "openblas", "win-64": "mkl"}
