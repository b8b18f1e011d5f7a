"""The probe's GPU check. CI has no GPU: the CUDA cases classify observations recorded verbatim on a
real H200 by tools/gpu-check.sh; the CPU cases run the check for real in the seed env."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envkit.prefix.installed import installed_torch_build
from envkit.probe.inenv.gpu import arch_supported, classify_gpu
from envkit.probe.runner import default_spec, probe_config, spec_for
from envkit.recipe.loader import load_recipe
from tests.conftest import write_recipe
from tests.support.inenv import run_with_probe_package

RECORDED = json.loads((Path(__file__).parent / "data" / "h200-gpu.json").read_text(encoding="utf-8"))


def recorded(name: str) -> dict[str, Any]:
    data = RECORDED[name]["data"]
    assert isinstance(data, dict)
    return dict(data)


def test_h200_passes_with_devices_driver_and_nccl() -> None:
    status, evidence, remedy = classify_gpu(recorded("visible"))
    assert status == "pass" == RECORDED["visible"]["status"], evidence
    assert "1 device(s): NVIDIA H200 (sm_90)" in evidence
    assert "CUDA build 13.0, driver 13.0" in evidence
    assert "NCCL 2.28.9 all_reduce ok" in evidence
    assert remedy == ""


def test_hidden_devices_are_named_as_the_cause() -> None:
    status, evidence, remedy = classify_gpu(recorded("hidden"))
    assert status == "warn" == RECORDED["hidden"]["status"]
    assert "CUDA_VISIBLE_DEVICES='' hides every GPU" in evidence
    assert "CUDA_VISIBLE_DEVICES" in remedy


def test_cuda_torch_in_an_env_made_for_cpu_warns() -> None:
    status, evidence, _ = classify_gpu(recorded("visible"), "cpu")
    assert status == "warn" and "made for a CPU build" in evidence


# The cases below have no recorded machine here; each starts from the H200 record and changes only
# what such a machine would report differently.


def test_driver_older_than_the_build_fails_with_both_versions() -> None:
    # A 12.4 driver answers cuInit and sees its GPU, but torch cannot use it with a CUDA 13.0 build.
    data = recorded("hidden") | {"driver_cuda": "12.4", "cu_init": "CUDA_SUCCESS", "driver_devices": 1, "visible_devices": None}
    status, evidence, remedy = classify_gpu(data)
    assert status == "fail"
    assert "the driver supports CUDA 12.4, this build needs 13.0" in evidence
    assert "12.4" in remedy and "toolchain.pytorch.cuda" in remedy


def test_no_driver_is_a_warning_not_a_failure() -> None:
    data = {k: v for k, v in recorded("hidden").items() if k not in ("driver_cuda", "cu_init")}
    data["driver_error"] = "libcuda.so.1: cannot open shared object file: No such file or directory"
    status, evidence, _ = classify_gpu(data)
    assert status == "warn" and "no NVIDIA driver" in evidence


def test_a_build_without_kernels_for_the_gpu_fails() -> None:
    data = recorded("visible") | {"arch_list": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"]}
    status, evidence, remedy = classify_gpu(data)
    assert status == "fail" and "no kernels for sm_90" in evidence and "sm_90" in remedy and "newer one" in remedy


def test_a_build_for_newer_gpus_only_names_the_gpus_compute_capability() -> None:
    """What an env solved on a login node can hold (EK038): builds for Blackwell on an H200."""
    data = recorded("visible") | {"arch_list": ["sm_100", "sm_120", "compute_120"]}
    status, evidence, remedy = classify_gpu(data)
    assert status == "fail" and "no kernels for sm_90 (it has sm_100 sm_120 compute_120)" in evidence
    assert remedy.startswith("this build is for newer GPUs only: install one for compute capability 9.0")
    assert 'toolchain.pytorch.cuda_arch: "9.0"' in remedy


def test_a_failed_nccl_reduce_fails_and_missing_nccl_warns() -> None:
    broken = recorded("visible") | {"nccl_all_reduce": "DistBackendError('NCCL error: unhandled system error')"}
    status, evidence, _ = classify_gpu(broken)
    assert status == "fail" and "unhandled system error" in evidence
    missing = {k: v for k, v in recorded("visible").items() if k not in ("nccl_version", "nccl_all_reduce")}
    missing["nccl_available"] = False
    status, evidence, remedy = classify_gpu(missing)
    assert status == "warn" and "NCCL unavailable" in evidence and "gloo" in remedy


@pytest.mark.parametrize("err", [float("nan"), 0.5, None])
def test_a_wrong_gpu_matmul_fails(err: float | None) -> None:
    status, evidence, _ = classify_gpu(recorded("visible") | {"matmul_rel_err": err})
    assert status == "fail" and "GPU matmul" in evidence


@pytest.mark.parametrize(
    ("arch", "capability", "runs"),
    [
        (["sm_80", "sm_90"], (9, 0), True),
        (["sm_80", "sm_86"], (9, 0), False),  # cubins run only within their major version
        (["sm_80", "compute_80"], (9, 0), True),  # PTX is compiled for newer GPUs by the driver
        (["sm_86"], (8, 0), False),  # a cubin does not run on a lower minor
        (["sm_80"], (8, 6), True),
        (["compute_90"], (8, 6), False),
    ],
)
def test_arch_supported(arch: list[str], capability: tuple[int, int], runs: bool) -> None:
    assert arch_supported(arch, capability) is runs


def run_gpu_check(prefix: Path, torch_build: str | None, scratch: Path) -> dict[str, Any]:
    """The probe's GPU check alone (observed in a child of its own), in the env's python under its activation."""
    code = (
        "import json\nfrom envkit_probe.gpu import check_gpu\nfrom envkit_probe.main import observed_section\n"
        f"print(json.dumps(check_gpu(observed_section('GPU', None, 120), {torch_build!r})))"
    )
    proc = run_with_probe_package(prefix / "bin" / "python", ["-E", "-s", "-c", code], scratch, prefix)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert isinstance(result, dict)
    return result


def test_cpu_torch_in_an_env_made_for_cuda_fails(seed_env: Path, tmp_path: Path) -> None:
    """The classic: a CPU pytorch where the recipe asked for CUDA (solver fallback, pip shadowing)."""
    plain = run_gpu_check(seed_env, None, tmp_path)
    assert plain["status"] == "skip" and "is a CPU build" in plain["evidence"]
    assert "no NVIDIA driver here" in plain["evidence"] or "GPU(s) visible" in plain["evidence"]
    wanted_cuda = run_gpu_check(seed_env, "cuda", tmp_path)
    assert wanted_cuda["status"] == "fail"
    assert "made for a CUDA build" in wanted_cuda["evidence"] and "envkit audit" in wanted_cuda["remedy"]


def test_installed_torch_build_reads_the_real_env(seed_env: Path) -> None:
    # the seed env's torch is the PyPI wheel 2.13.0+cpu, repackaged as conda's pytorch
    assert installed_torch_build(seed_env) == "cpu"
    assert default_spec(seed_env).torch_build == "cpu"


def test_the_recipe_variant_reaches_the_probe(tmp_path: Path) -> None:
    path = write_recipe(
        tmp_path / "recipes",
        "gpu",
        "envkit: 1\nname: gpu\nchannels: [conda-forge]\ntoolchain:\n  pytorch: {variant: cuda, cuda: '12.9'}\n",
    )
    recipe = load_recipe(str(path))
    assert recipe.probe.torch_build == "cuda"
    prefix = tmp_path / "env"
    wheel = prefix / "lib" / "python3.11" / "site-packages" / "torch-2.13.0+cpu.dist-info"
    wheel.mkdir(parents=True)
    (wheel / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0+cpu\n")
    # what the recipe asked for wins over what the installed packages claim
    spec = spec_for(prefix, recipe)
    assert spec.torch_build == "cuda" and spec.imports == ("torch",)
    assert probe_config(spec, {})["torch_build"] == "cuda"
    assert spec_for(prefix, None).torch_build == "cpu"


def test_the_record_says_whether_the_gpu_part_was_proven() -> None:
    """An env made on a GPU-less login node: the probe's gpu check warns (no driver) and the record
    keeps 'not proven' with the evidence; a probe on the H200 proves it."""
    from envkit.probe.model import CheckResult, ProbeReport

    nodriver = {k: v for k, v in recorded("hidden").items() if k not in ("driver_cuda", "cu_init")}
    nodriver["driver_error"] = "libcuda.so.1: cannot open shared object file: No such file or directory"
    for data, proven in ((nodriver, False), (recorded("visible"), True)):
        status, evidence, remedy = classify_gpu(data, "cuda")
        report = ProbeReport("/env", "/env/bin/python", 1.0, (CheckResult("gpu", "CUDA, devices, NCCL", status, evidence, remedy, data),))  # type: ignore[arg-type]
        summary = report.summary()
        assert summary["gpu"]["proven"] is proven and summary["gpu"]["status"] == status
        assert report.healthy  # a warning: the env is usable, its GPU part unproven here
    status, evidence, remedy = classify_gpu(nodriver, "cuda")
    report = ProbeReport("/e", "/p", 1.0, (CheckResult("gpu", "t", status, evidence, remedy, nodriver),))  # type: ignore[arg-type]
    assert "no NVIDIA driver" in report.summary()["gpu"]["evidence"]
