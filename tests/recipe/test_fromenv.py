"""The toolchain a recipe written from an existing env states (conda env export --format
envkit-recipe runs it on real envs in tests/conda/test_plugin.py)."""

from __future__ import annotations

from envkit.recipe.fromenv import EnvPackage, infer_toolchain


def pkgs(*specs: tuple[str, str, str]) -> dict[str, EnvPackage]:
    return {name: EnvPackage(name, version, build, "conda-forge") for name, version, build in specs}


def test_a_cuda_env_keeps_the_gpus_it_was_solved_for() -> None:
    """cuda-arch is what __cuda_arch allowed where it was made (CEP 46): a login node's solve of the
    written recipe must pick builds for the same GPUs."""
    base = (("libblas", "3.9.0", "31_h59b9bed_mkl"), ("pytorch", "2.10.0", "cuda129_mkl_py312_h1234567_300"))
    torch = infer_toolchain(pkgs(*base, ("cuda-arch", "9.0", "0")))["pytorch"]
    assert torch == {"version": "2.10.0", "variant": "cuda", "cuda": "12.9", "cuda_arch": "9.0"}
    assert "cuda_arch" not in infer_toolchain(pkgs(*base))["pytorch"]  # type: ignore[operator]
