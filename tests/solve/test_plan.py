"""Real rattler solves against the metadata replica of conda-forge and the pytorch channel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.core.errors import SolveError, UsageError
from envkit.recipe.compile import compile_recipe
from envkit.recipe.loader import load_recipe
from envkit.solve.plan import solve_recipe
from tests.conftest import run_envkit, write_recipe
from tests.support.condapkg import PkgMeta, index_channel, write_tar_bz2
from tests.support.tiny import cuda_arch_channel, cuda_recipe, tiny_channel, tiny_recipe


def solved(name: str, mirrors: dict[str, str], tmp_path: Path) -> dict[str, tuple[str, str, str]]:
    outcome = solve_recipe(compile_recipe(load_recipe(name)), tmp_path / "env", extra_channels=[], override_channels=False, mirrors=mirrors)
    return {p.name: (p.version, p.build, p.channel.rstrip("/").rsplit("/", 1)[-1]) for p in outcome.plan.packages}


def test_default_conda_forge_is_openblas_and_gnu(replica_mirrors: dict[str, str], tmp_path: Path) -> None:
    pkgs = solved("conda-forge-base", replica_mirrors, tmp_path)
    assert pkgs["libblas"][1].endswith("_openblas") and pkgs["_openmp_mutex"][1] == "20_gnu"
    assert "mkl" not in pkgs


def test_pytorch_base_is_mkl_with_one_llvm_runtime(replica_mirrors: dict[str, str], tmp_path: Path) -> None:
    pkgs = solved("pytorch-base", replica_mirrors, tmp_path)
    assert pkgs["pytorch"][1].startswith("cpu_mkl_") and pkgs["libblas"][1].endswith("_mkl")
    assert pkgs["_openmp_mutex"][1] == "7_kmp_llvm" and "libgomp" not in pkgs and "intel-openmp" not in pkgs


def test_openblas_recipe_has_no_mkl_and_openmp_openblas(replica_mirrors: dict[str, str], tmp_path: Path) -> None:
    pkgs = solved("pytorch-cpu-openblas", replica_mirrors, tmp_path)
    assert "mkl" not in pkgs and pkgs["libopenblas"][1].startswith("openmp_") and pkgs["pytorch"][1].startswith("cpu_generic_")


def test_cuda_recipe_assumes_its_declared_cuda_without_a_driver(
    replica_mirrors: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A login node or CI: no driver (CONDA_OVERRIDE_CUDA empty means none). The recipe's
    toolchain.pytorch.cuda stands in for __cuda, and the plan says so."""
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "")
    outcome = solve_recipe(
        compile_recipe(load_recipe("yolov8")), tmp_path / "env", extra_channels=[], override_channels=False, mirrors=replica_mirrors
    )
    pkgs = {p.name: p.build for p in outcome.plan.packages}
    assert pkgs["pytorch"].startswith("cuda129_mkl_") and pkgs["torchvision"].startswith("cuda129_")
    assert len(outcome.plan.assumed) == 1
    assert outcome.plan.assumed[0].startswith("assumed __cuda=12.9, declared by the recipe (toolchain.pytorch.cuda, ")
    assert outcome.plan.assumed[0].endswith("; no NVIDIA driver on this machine")
    assert "__cuda=12.9" in outcome.plan.virtual_packages


def test_a_detected_driver_wins_and_an_old_one_fails(
    replica_mirrors: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "13.0")
    outcome = solve_recipe(
        compile_recipe(load_recipe("yolov8")), tmp_path / "env", extra_channels=[], override_channels=False, mirrors=replica_mirrors
    )
    assert outcome.plan.assumed == () and "__cuda=13.0" in outcome.plan.virtual_packages
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "11.8")
    with pytest.raises(SolveError) as info:
        solved("yolov8", replica_mirrors, tmp_path)
    assert "__cuda" in info.value.message
    # the driver is there, only older: the hint names it, not a missing driver
    hint = info.value.hint or ""
    assert "this machine's NVIDIA driver provides __cuda=11.8, older than the packages need" in hint
    assert 'toolchain.pytorch.cuda: "11.8"' in hint and "no NVIDIA driver" not in hint


def test_an_undeclared_cuda_says_what_to_do(replica_mirrors: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "")
    monkeypatch.setenv("ENVKIT_RECIPE_PATH", str(tmp_path / "r"))
    write_recipe(
        tmp_path / "r",
        "gpu",
        "envkit: 1\nname: gpu\nchannels: [conda-forge]\npython: '3.12'\ntoolchain: {blas: mkl, openmp: llvm, pytorch: {variant: cuda}}\n",
    )
    with pytest.raises(SolveError) as info:
        solved("gpu", replica_mirrors, tmp_path)
    hint = info.value.hint or ""
    assert "__cuda" in info.value.message and "CONDA_OVERRIDE_CUDA=" in hint and "toolchain.pytorch.cuda" in hint


def test_legacy_channel_gets_mkl_before_2024_1(replica_mirrors: dict[str, str], tmp_path: Path) -> None:
    pkgs = solved("pytorch-legacy-channel", replica_mirrors, tmp_path)
    assert pkgs["pytorch"][:2] == ("2.5.1", "py3.12_cpu_0") and pkgs["pytorch"][2] == "pytorch"
    # on the channels the builds were made for: defaults' MKL with Intel OpenMP, defaults' llvm-openmp <16
    assert pkgs["mkl"][0] == "2023.1.0" and pkgs["llvm-openmp"][0] == "14.0.6" and pkgs["intel-openmp"][0] == "2023.1.0"
    assert {channel for _, _, channel in pkgs.values()} == {"pytorch", "defaults"}


def test_legacy_without_pin_resolves_the_crashing_mkl(
    replica_mirrors: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The metadata allows mkl 2024.1 with pytorch-channel builds: why RC001 exists."""
    body = "envkit: 1\nname: t\nextends: [pytorch-legacy-channel]\ntoolchain: {mkl: '>=2023'}\nforce: [RC001]\n"
    monkeypatch.setenv("ENVKIT_RECIPE_PATH", str(tmp_path / "r"))
    write_recipe(tmp_path / "r", "t", body)
    assert solved("t", replica_mirrors, tmp_path)["mkl"][0] == "2024.1.0"


def test_unsatisfiable_names_the_recipe_line(replica_mirrors: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVKIT_RECIPE_PATH", str(tmp_path / "r"))
    path = write_recipe(tmp_path / "r", "t", "envkit: 1\nname: t\nextends: [pytorch-base]\npackages:\n  - mkl >=2026\n")
    with pytest.raises(SolveError) as info:
        solved("t", replica_mirrors, tmp_path)
    assert f"'mkl >=2026' from {path}:5:5" in (info.value.hint or "")


def test_strict_channel_priority(replica: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = tmp_path / "extra"
    write_tar_bz2(extra, PkgMeta("numpy", "9.9.9", "py312_0", depends=["python >=3.12,<3.13.0a0"]))
    index_channel(extra)
    mirrors = {"conda-forge": replica["conda-forge"].as_uri(), "extra": extra.as_uri()}
    monkeypatch.setenv("ENVKIT_RECIPE_PATH", str(tmp_path / "r"))
    write_recipe(tmp_path / "r", "low", "envkit: 1\nname: low\nextends: [conda-forge-base]\nchannels: [conda-forge, extra]\n")
    assert solved("low", mirrors, tmp_path)["numpy"][0] == "2.2.6"
    write_recipe(
        tmp_path / "r", "high", "envkit: 1\nname: high\nextends: [conda-forge-base]\nchannels: [extra, conda-forge]\npackages: [numpy]\n"
    )
    assert solved("high", mirrors, tmp_path)["numpy"][0] == "9.9.9"


def test_mirrors_from_condarc_and_envkit_config(replica: dict[str, Path], tmp_path: Path, isolated: Path) -> None:
    (isolated / ".condarc").write_text(f"custom_channels:\n  conda-forge: {replica['conda-forge'].parent.as_uri()}\n")
    assert solved("conda-forge-base", {}, tmp_path)["numpy"][0] == "2.2.6"
    (isolated / ".condarc").unlink()
    cfg = isolated / ".config" / "envkit"
    cfg.mkdir(parents=True)
    (cfg / "config.yaml").write_text(f"mirrors:\n  conda-forge: {replica['conda-forge'].as_uri()}\n")
    assert solved("conda-forge-base", {}, tmp_path)["python"][0] == "3.12.11"


def test_missing_local_channel_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        solved("conda-forge-base", {"conda-forge": (tmp_path / "nope").as_uri()}, tmp_path)
    assert "channel 'conda-forge'" in info.value.message and "--mirror conda-forge=URL" in (info.value.hint or "")
    # a channel given as a path is that path: no name to map, so no --mirror to suggest
    missing = tmp_path / "gone"
    recipe = write_recipe(tmp_path / "r", "path", f"envkit: 1\nname: path\nchannels: [{missing.as_uri()}]\npackages: [tool]\n")
    refused = run_envkit("create", str(recipe), "--dry-run", "--yes")
    assert refused.returncode == 2 and "(check the path or index it)" in refused.stderr and "--mirror" not in refused.stderr, refused.stderr


def test_a_channel_given_as_a_relative_path(tmp_path: Path) -> None:
    """`-c ./channel` is a folder, as conda takes it (rattler took it for the channel named
    'channel' on anaconda.org); in a recipe it would name another folder on each machine."""
    channel = tiny_channel(tmp_path / "work")
    recipe = write_recipe(tmp_path / "work" / "recipes", "rel", "envkit: 1\nname: rel\nchannels: [conda-forge]\npackages: [tool]\n")
    plan = run_envkit("create", str(recipe), "-c", "./tiny", "--override-channels", "--dry-run", "--yes", "--json", cwd=channel.parent)
    assert plan.returncode == 0, plan.stderr
    assert {p["channel"].rstrip("/") for p in json.loads(plan.stdout)["data"]["plan"]["packages"]} == {channel.as_uri()}
    for written in ("./tiny", "../work/tiny", "~/channels/tiny"):
        relative = write_recipe(tmp_path / "work" / "recipes", "rel", f"envkit: 1\nname: rel\nchannels: [{written}]\npackages: [tool]\n")
        refused = run_envkit("recipes", "validate", str(relative))
        assert (
            refused.returncode == 2 and f"{relative}:3:12: channels[0]: '{written}' is a path relative" in refused.stdout + refused.stderr
        )


def test_a_channel_with_credentials_on_the_command_line_is_refused_without_repeating_them(tmp_path: Path) -> None:
    """`-c` and `--mirror` URLs go into the env's record, a lock (-c) and every export: one with a
    token or a password would publish it. One line, exit 2, the secret not echoed."""
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    for flag in (["-c", "https://conda.example.com/t/tk-4a4a99ba/team"], ["--mirror", "conda-forge=https://u:pw-4a4a99ba@m.example/cf"]):
        for command in ("create", "lock"):
            refused = run_envkit(command, str(recipe), *flag, "--dry-run")
            assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
            assert "the channel URL holds" in refused.stderr and "pixi auth login" in refused.stderr
            assert "4a4a99ba" not in refused.stderr


def test_a_cuda_assumed_from_the_recipe_that_the_packages_outgrow_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No driver: __cuda is the recipe's toolchain.pytorch.cuda, and a package needs a newer one."""
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "")
    channel = tiny_channel(
        tmp_path,
        extra=(
            PkgMeta("pytorch", "2.0", "cuda129_mkl_0", depends=["__cuda", "cuda-version >=12.9,<13"]),
            PkgMeta("cuda-version", "12.9", "0", constrains=["__cuda >=12.9"]),
            PkgMeta("gpukit", "1.0", "0", depends=["__cuda >=13"]),
        ),
    )
    recipe = write_recipe(
        tmp_path / "r",
        "gpu",
        f"envkit: 1\nname: gpu\nchannels: [{channel.as_uri()}]\npackages: [gpukit]\ntoolchain: {{pytorch: {{variant: cuda, cuda: '12.9'}}}}\n",
    )
    with pytest.raises(SolveError) as info:
        solve_recipe(compile_recipe(load_recipe(str(recipe))), tmp_path / "env", extra_channels=[], override_channels=False, mirrors={})
    hint = info.value.hint or ""
    assert "__cuda=12.9 is assumed from the recipe's toolchain.pytorch.cuda (no NVIDIA driver here)" in hint, hint


def _arch_plan(tmp_path: Path, arch: str | None, *, detect: bool = True) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    from envkit.solve.plan import target

    recipe = cuda_recipe(tmp_path, cuda_arch_channel(tmp_path), arch)
    compiled = compile_recipe(load_recipe(str(recipe)))
    if not detect:  # a lock's target: no machine detected
        goal = target(compiled, "linux-64", detect=False)
        return {}, goal.described, goal.assumed
    plan = solve_recipe(compiled, tmp_path / "env", extra_channels=[], override_channels=False, mirrors={}).plan
    return {p.name: p.build for p in plan.packages}, plan.virtual_packages, plan.assumed


def test_gpu_builds_without_a_cuda_arch_are_the_newest_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A login node, no cuda_arch declared: nothing constrains cuda-arch, and the solver takes the
    highest build, made for compute capability 10.0 only (a 9.0 H200 has no kernels in it)."""
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "")
    builds, virtual, assumed = _arch_plan(tmp_path, None)
    assert builds["pytorch"] == "cuda129_mkl_sm100_200" and not any(v.startswith("__cuda_arch") for v in virtual)
    assert [a.split(",")[0] for a in assumed] == ["assumed __cuda=12.9"]


def test_a_declared_cuda_arch_is_assumed_where_no_gpu_is_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "")
    builds, virtual, assumed = _arch_plan(tmp_path, "9.0")
    assert builds["pytorch"] == "cuda129_mkl_sm90_100" and builds["cuda-arch"] == "0" and "__cuda_arch=9.0" in virtual
    assert assumed[1].startswith("assumed __cuda_arch=9.0, declared by the recipe (toolchain.pytorch.cuda_arch, ")
    assert assumed[1].endswith("gpu.yaml:5:63); no NVIDIA GPU seen on this machine"), assumed
    # CONDA_OVERRIDE_CUDA_ARCH wins over the recipe, as conda's overrides do
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA_ARCH", "8.0")
    builds, _, assumed = _arch_plan(tmp_path, "9.0")
    assert builds["pytorch"] == "cuda129_mkl_sm80_0" and assumed[1].startswith("assumed __cuda_arch=8.0, from CONDA_OVERRIDE_CUDA_ARCH")


def test_a_detected_gpu_wins_over_the_declared_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rattler's detection, its overrides standing in for a GPU node's driver and devices (CEP 46:
    CONDA_OVERRIDE_CUDA_ARCH counts where __cuda is there); on an H200 rattler detected 9.0 itself."""
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "12.9")
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA_ARCH", "10.0")
    builds, virtual, assumed = _arch_plan(tmp_path, "9.0")
    assert builds["pytorch"] == "cuda129_mkl_sm100_200" and "__cuda_arch=10.0" in virtual and assumed == ()


def test_a_lock_takes_the_declared_cuda_arch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONDA_OVERRIDE_CUDA", raising=False)
    monkeypatch.delenv("CONDA_OVERRIDE_CUDA_ARCH", raising=False)
    _, virtual, assumed = _arch_plan(tmp_path, "9.0", detect=False)
    assert "__cuda=12.9" in virtual and "__cuda_arch=9.0" in virtual
    assert [a.split(",")[0] for a in assumed] == ["assumed __cuda=12.9", "assumed __cuda_arch=9.0"]
    assert assumed[1].endswith("; solving for linux-64")


def test_gpus_no_build_has_kernels_for_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "")
    with pytest.raises(SolveError) as info:
        _arch_plan(tmp_path, "7.0")
    hint = info.value.hint or ""
    assert "no build of these packages has kernels for GPUs of compute capability 7.0 (__cuda_arch=7.0, assumed from the recipe" in hint
    assert "no NVIDIA driver" not in hint
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA_ARCH", "7.0")
    with pytest.raises(SolveError) as info:
        _arch_plan(tmp_path, None)
    assert "(__cuda_arch=7.0, from CONDA_OVERRIDE_CUDA_ARCH)" in (info.value.hint or "")
