"""Recipes for several platforms: each compiled as conda-forge builds it there, per_platform
entries, one-line errors for toolchains that do not exist on a declared platform, and real solves
of linux-64, osx-arm64 and win-64 against the replica."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.audit.recipe_rules import require_consistent
from envkit.core.errors import RecipeError
from envkit.recipe.compile import compile_recipe
from envkit.recipe.loader import load_recipe
from envkit.team.lock import read_lock
from tests.conftest import run_envkit, write_recipe

TEAM = """envkit: 1
name: team
channels: [conda-forge]
platforms: [linux-64, osx-arm64, win-64]
python: "3.12"
packages: [numpy]
toolchain:
  blas: mkl
  openmp: llvm
  pytorch: {variant: cpu}
"""
OVERRIDE = """per_platform:
  osx-arm64:
    toolchain: {blas: accelerate}
"""


def specs(recipe_path: Path, platform: str) -> dict[str, str]:
    compiled = compile_recipe(load_recipe(str(recipe_path)), platform)
    return {s.name: s.spec for s in compiled.conda_specs}


def test_a_toolchain_that_does_not_exist_on_a_platform_is_one_line(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, "team", TEAM)
    with pytest.raises(RecipeError) as info:
        require_consistent(load_recipe(str(recipe)))
    lines = info.value.lines()
    assert len(lines) == 1
    assert lines[0].startswith(f"{recipe}:8:9: toolchain.blas: conda-forge builds no mkl BLAS on osx-arm64;")
    assert "per_platform.osx-arm64.toolchain.blas to one of openblas, accelerate" in lines[0]
    proc = run_envkit("recipes", "validate", str(recipe))
    assert proc.returncode == 2 and proc.stdout.count("\n") == 1 and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("toolchain: {openmp: gnu}\nplatforms: [osx-arm64]\n", "toolchain.openmp: conda-forge has no gnu OpenMP runtime on osx-arm64"),
        (
            "toolchain: {pytorch: {variant: cuda, cuda: '12.9'}}\nplatforms: [osx-arm64]\n",
            "toolchain.pytorch.variant: conda-forge builds no CUDA pytorch",
        ),
        ("toolchain: {blas: openblas, pytorch: {variant: cpu}}\nplatforms: [win-64]\n", "conda-forge builds pytorch with MKL only"),
        ("toolchain: {blas: mkl}\nthreading: {mkl_threading_layer: gnu}\nplatforms: [win-64]\n", "MKL has no GNU threading layer"),
        ("toolchain: {blas: accelerate}\nplatforms: [linux-64]\n", "conda-forge builds no accelerate BLAS on linux-64"),
    ],
)
def test_platform_facts(tmp_path: Path, body: str, field: str) -> None:
    recipe = write_recipe(tmp_path, "p", f"envkit: 1\nname: p\nchannels: [conda-forge]\n{body}")
    with pytest.raises(RecipeError) as info:
        require_consistent(load_recipe(str(recipe)))
    assert any(field in line for line in info.value.lines()), info.value.lines()


def test_per_platform_entries_and_platform_equivalents(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, "team", TEAM + OVERRIDE)
    require_consistent(load_recipe(str(recipe)))
    linux, osx, win = (specs(recipe, p) for p in ("linux-64", "osx-arm64", "win-64"))
    assert linux["libblas"] == "libblas * *mkl" and linux["_openmp_mutex"] == "_openmp_mutex * *_llvm"
    assert linux["pytorch"].startswith("pytorch * cpu_mkl")
    assert osx["libblas"] == "libblas * *accelerate" and "_openmp_mutex" not in osx and "nomkl" in osx
    assert osx["pytorch"].startswith("pytorch * cpu_generic")
    assert win["libblas"] == "libblas * *mkl" and "_openmp_mutex" not in win and win["llvm-openmp"] == "llvm-openmp"
    settings = {p: [s.op.name for s in compile_recipe(load_recipe(str(recipe)), p).activation.settings] for p in ("linux-64", "win-64")}
    assert settings == {"linux-64": ["MKL_THREADING_LAYER"], "win-64": []}  # GNU is a Linux-only MKL layer

    unset = write_recipe(
        tmp_path / "u",
        "mac",
        "envkit: 1\nname: mac\nchannels: [conda-forge]\nplatforms: [osx-arm64]\ntoolchain: {pytorch: {variant: cpu}}\n",
    )
    require_consistent(load_recipe(str(unset)))
    compiled = compile_recipe(load_recipe(str(unset)), "osx-arm64")
    torch = next(s for s in compiled.conda_specs if s.name == "pytorch")
    assert (
        torch.spec.startswith("pytorch * cpu_generic")
        and torch.reason == "conda-forge builds only the generic (OpenBLAS) pytorch for osx-arm64"
    )


def test_per_platform_entries_merge_through_extends(tmp_path: Path) -> None:
    write_recipe(tmp_path, "team", TEAM + OVERRIDE)
    child = write_recipe(
        tmp_path, "child", "envkit: 1\nname: child\nextends: [team]\nper_platform:\n  osx-arm64:\n    packages: [libcxx]\n"
    )
    recipe = load_recipe(str(child))
    mac = recipe.for_platform("osx-arm64")
    assert mac.toolchain.blas == "accelerate" and [p.name for p in mac.packages] == ["numpy", "libcxx"]
    assert recipe.for_platform("win-64").toolchain.blas == "mkl"
    bad = write_recipe(
        tmp_path / "b",
        "bad",
        "envkit: 1\nname: bad\nchannels: [c]\nper_platform:\n  amiga:\n    python: '3.12'\n  win-64:\n    name: other\n",
    )
    proc = run_envkit("recipes", "validate", str(bad))
    assert proc.returncode == 2
    assert "per_platform.amiga: unknown key 'amiga'" in proc.stdout and "per_platform.win-64.name: unknown key 'name'" in proc.stdout


def test_lock_three_platforms_as_conda_forge_builds_them(replica: dict[str, Path], tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path / "r", "team", TEAM + OVERRIDE)
    mirror = f"--mirror=conda-forge={replica['conda-forge'].as_uri()}"
    proc = run_envkit("lock", str(recipe), mirror)
    assert proc.returncode == 0, proc.stderr
    lock = read_lock(recipe.parent / "team.lock")
    got = {p.platform: {r.name.normalized: str(r.build) for r in p.records} for p in lock.platforms}
    assert got["linux-64"]["_openmp_mutex"] == "7_kmp_llvm" and got["linux-64"]["libblas"].endswith("_mkl")
    assert got["osx-arm64"]["libblas"].endswith("_accelerate") and got["osx-arm64"]["pytorch"].startswith("cpu_generic")
    assert not {"mkl", "_openmp_mutex", "libgomp"} & set(got["osx-arm64"])
    assert got["win-64"]["pytorch"].startswith("cpu_mkl") and "llvm-openmp" in got["win-64"] and "_openmp_mutex" not in got["win-64"]
    assert "intel-openmp" not in got["win-64"]
    # each platform's activation: MKL's GNU layer is for Linux only
    assert {p.platform: [op["name"] for op in p.activation] for p in lock.platforms} == {
        "linux-64": ["MKL_THREADING_LAYER"],
        "osx-arm64": [],
        "win-64": [],
    }

    # an edit to one platform's entry makes the lock stale
    recipe.write_text(recipe.read_text().replace("blas: accelerate", "blas: openblas"))
    check = run_envkit("recipes", "check", str(recipe), mirror)
    stale = run_envkit("create", str(recipe), "--locked", "--dry-run")
    assert stale.returncode == 2 and "is stale" in stale.stderr
    assert check.returncode in (1, 2)


def test_plans_and_specs_for_another_platform(replica: dict[str, Path], tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path / "r", "team", TEAM + OVERRIDE)
    mirror = f"--mirror=conda-forge={replica['conda-forge'].as_uri()}"
    proc = run_envkit("create", str(recipe), "--dry-run", "--platform", "osx-arm64", "--json", mirror)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)["data"]["plan"]
    assert plan["platform"] == "osx-arm64" and "__osx=11.0" in plan["virtual_packages"]
    names = {p["name"] for p in plan["packages"]}
    assert "mkl" not in names and "_openmp_mutex" not in names
    findings = {f["rule_id"] for f in json.loads(proc.stdout)["data"]["findings"]}
    assert not {"EK017", "EK023"} & findings  # this machine's CPU and driver say nothing about a Mac
    refused = run_envkit("create", str(recipe), "--platform", "win-64", "--yes", mirror)
    assert refused.returncode == 2 and "--dry-run" in refused.stderr and not (tmp_path / "envs").exists()
    shown = run_envkit("recipes", "show", str(recipe), "--resolved", "--platform", "win-64", "--json")
    assert shown.returncode == 0, shown.stderr
    conda = [s["spec"] for s in json.loads(shown.stdout)["data"]["compiled"]["conda_specs"]]
    assert "libblas * *mkl" in conda and not any(s.startswith("_openmp_mutex") for s in conda)
    unknown = run_envkit("recipes", "show", str(recipe), "--resolved", "--platform", "amiga-68k")
    assert unknown.returncode == 2 and "not a platform envkit builds for" in unknown.stderr
    # conda knows win-arm64; envkit's toolchain rules do not cover it (it said "not a platform conda knows")
    uncovered = run_envkit("lock", str(recipe), "--platform", "win-arm64")
    assert uncovered.returncode == 2 and "'win-arm64': not a platform envkit builds for (one of linux-64," in uncovered.stderr
    # an env never runs on noarch: a recipe that lists it was valid and then failed in the solver's words
    noarch = write_recipe(tmp_path / "na", "na", "envkit: 1\nname: na\nchannels: [conda-forge]\nplatforms: [linux-64, noarch]\n")
    refused = run_envkit("recipes", "validate", str(noarch))
    assert (
        refused.returncode == 2
        and f"{noarch}:4:" in refused.stdout + refused.stderr
        and "found 'noarch'" in refused.stdout + refused.stderr
    )


def test_a_platform_the_recipe_does_not_list_is_checked_and_named(replica: dict[str, Path], tmp_path: Path) -> None:
    """A recipe for Macs made on Linux: the toolchain must exist here too (it was checked only for
    the platforms listed), and the plan says the recipe is not for this platform."""
    mac = write_recipe(
        tmp_path / "r",
        "mac",
        TEAM.replace("name: team", "name: mac")
        .replace("[linux-64, osx-arm64, win-64]", "[osx-arm64]")
        .replace("blas: mkl", "blas: accelerate"),
    )
    mirror = f"--mirror=conda-forge={replica['conda-forge'].as_uri()}"
    refused = run_envkit("create", str(mac), "--dry-run", mirror)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "toolchain.blas: conda-forge builds no accelerate BLAS on linux-64" in refused.stderr
    linux_ok = write_recipe(
        tmp_path / "r2", "mac", TEAM.replace("name: team", "name: mac").replace("[linux-64, osx-arm64, win-64]", "[osx-arm64]") + OVERRIDE
    )
    warned = run_envkit("create", str(linux_ok), "--dry-run", "--json", mirror)
    assert warned.returncode == 0, warned.stderr
    said = json.loads(warned.stdout)["data"]["plan"]["warnings"]
    assert (
        f"recipe 'mac' is for osx-arm64, not linux-64 ({linux_ok}:4:1); add linux-64 to its platforms: once it is meant to work here"
        in said
    )
    listed = run_envkit("create", str(write_recipe(tmp_path / "r3", "team", TEAM + OVERRIDE)), "--dry-run", "--json", mirror)
    assert not any("is for" in w for w in json.loads(listed.stdout)["data"]["plan"]["warnings"])
