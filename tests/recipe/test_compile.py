"""Toolchain intent -> the specs conda-forge / the pytorch channel really use, and activation settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.recipe.compile import compile_recipe, effective_threading_layer
from envkit.recipe.loader import load_recipe
from envkit.recipe.settings import resolve
from tests.conftest import write_recipe


def compiled(tmp_path: Path, toolchain: str, extra: str = "") -> tuple[list[str], dict[str, str]]:
    body = f"envkit: 1\nname: t\nchannels: [conda-forge, pytorch]\npython: '3.12'\ntoolchain: {toolchain}\n{extra}"
    c = compile_recipe(load_recipe(str(write_recipe(tmp_path, "t", body))))
    return [s.spec for s in c.conda_specs], {op.name: op.value for op in resolve(c.activation, cores=6)}


def test_conda_forge_mkl_llvm_cpu(tmp_path: Path) -> None:
    specs, env = compiled(tmp_path, "{blas: mkl, openmp: llvm, mkl: '>=2025,<2026', pytorch: {version: '2.10', variant: cpu}}")
    assert specs == [
        "python 3.12.*",
        "libblas * *mkl",
        "mkl >=2025,<2026",
        "_openmp_mutex * *_llvm",
        "llvm-openmp",
        "pytorch 2.10.* cpu_mkl*",
    ]
    assert env == {"MKL_THREADING_LAYER": "GNU"}


def test_conda_forge_openblas_cuda_uses_generic_and_openmp_openblas(tmp_path: Path) -> None:
    specs, env = compiled(tmp_path, "{blas: openblas, openmp: llvm, pytorch: {variant: cuda, cuda: '12.9'}}")
    assert "libblas * *openblas" in specs and "nomkl" in specs
    assert "libopenblas * *openmp*" in specs
    assert "pytorch * cuda*_generic*" in specs and "cuda-version 12.9.*" in specs
    assert "MKL_THREADING_LAYER" not in env


def test_gnu_openmp_mutex(tmp_path: Path) -> None:
    specs, _ = compiled(tmp_path, "{blas: blis, openmp: gnu}")
    assert specs == ["python 3.12.*", "libblas * *blis", "nomkl", "_openmp_mutex * *_gnu"]


def test_pytorch_channel_pins(tmp_path: Path) -> None:
    specs, env = compiled(tmp_path, "{blas: mkl, pytorch: {source: pytorch-channel, version: '2.5.1', variant: cuda, cuda: '12.4'}}")
    assert specs == [
        "python 3.12.*",
        "blas * mkl",
        "mkl <2024.1",
        "llvm-openmp <16",
        "pytorch ==2.5.1 *cuda*",
        "pytorch-mutex ==1.0 cuda",
        "pytorch-cuda 12.4.*",
    ]
    assert env == {"MKL_THREADING_LAYER": "GNU"}


def test_pip_torch_goes_to_pip_list(tmp_path: Path) -> None:
    body = "envkit: 1\nname: t\nchannels: [conda-forge]\npython: '3.11'\npackages: [mkl-service]\ntoolchain: {pytorch: {source: pip, version: '2.13.0'}}\n"
    c = compile_recipe(load_recipe(str(write_recipe(tmp_path, "t", body))))
    assert c.pip_specs == ("torch==2.13.0",) and "pip" in [s.spec for s in c.conda_specs]
    assert c.threading_layer == "GNU"


@pytest.mark.parametrize(
    ("toolchain", "packages", "layer"),
    [
        ("{openmp: intel, blas: mkl}", "[]", "INTEL"),
        ("{openmp: intel, blas: mkl, pytorch: {source: pip}}", "[]", "GNU"),
        ("{openmp: llvm, blas: mkl}", "[]", "GNU"),
        ("{openmp: gnu, blas: mkl}", "[]", "GNU"),
        ("{blas: openblas}", "[]", None),
        ("{}", "[mkl-service]", "GNU"),
    ],
)
def test_auto_threading_layer(tmp_path: Path, toolchain: str, packages: str, layer: str | None) -> None:
    body = f"envkit: 1\nname: t\nchannels: [x]\npackages: {packages}\ntoolchain: {toolchain}\n"
    assert effective_threading_layer(load_recipe(str(write_recipe(tmp_path, "t", body)))) == layer


def test_user_spec_replaces_toolchain_default_and_env_overrides(tmp_path: Path) -> None:
    extra = "packages: [llvm-openmp >=21]\nthreading: {omp_num_threads: physical-cores, env: {MKL_THREADING_LAYER: SEQUENTIAL}}\n"
    specs, env = compiled(tmp_path, "{blas: mkl, openmp: llvm}", extra)
    assert specs.count("llvm-openmp >=21") == 1 and "llvm-openmp" not in specs
    assert env == {"OMP_NUM_THREADS": "6", "MKL_THREADING_LAYER": "SEQUENTIAL"}


def test_shipped_recipes_compile_to_specs_conda_forge_users_recognise() -> None:
    yolo = compile_recipe(load_recipe("yolov8"))
    specs = [s.spec for s in yolo.conda_specs]
    assert {"libblas * *mkl", "_openmp_mutex * *_llvm", "pytorch * cuda*_mkl*", "cuda-version 12.9.*", "torchvision"} <= set(specs)
    # the threading policy (README): no thread count env-wide, the layer MKL needs next to torch's runtime
    assert {op.name: op.value for op in resolve(yolo.activation)} == {"MKL_THREADING_LAYER": "GNU"}
    legacy = [s.spec for s in compile_recipe(load_recipe("pytorch-legacy-channel")).conda_specs]
    assert "mkl <2024.1" in legacy and "pytorch-mutex ==1.0 cpu" in legacy
    openblas = [s.spec for s in compile_recipe(load_recipe("pytorch-cpu-openblas")).conda_specs]
    assert "nomkl" in openblas and not any(s.startswith("mkl") for s in openblas)


def test_auto_sets_no_layer_where_no_mkl_is(tmp_path: Path) -> None:
    """`mkl_threading_layer: auto` on an OpenBLAS toolchain (the shipped recipes on ARM) sets no
    MKL_THREADING_LAYER: there is no MKL for it to steer."""
    body = "envkit: 1\nname: t\nchannels: [x]\ntoolchain: {blas: openblas}\nthreading: {mkl_threading_layer: auto}\n"
    recipe = load_recipe(str(write_recipe(tmp_path, "t", body)))
    assert effective_threading_layer(recipe, "linux-aarch64") is None
    assert "MKL_THREADING_LAYER" not in {s.op.name for s in compile_recipe(recipe, "linux-aarch64").activation.settings}
