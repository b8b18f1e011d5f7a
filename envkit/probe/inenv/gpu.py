"""The GPU: the torch build against the one the env was made for, the driver asked directly through
libcuda, devices and compiled architectures, a GPU matmul against float64 on the CPU, and a one-rank
NCCL all_reduce. Observed in a child; classified here, so another machine's observations (a driver
too old, no kernels for the GPU) can be classified without that machine."""

from __future__ import annotations

import contextlib
import ctypes
import os
from typing import Any

from .report import Check, check, excerpt

TITLE = "CUDA, devices, NCCL"


def _driver() -> dict[str, Any]:
    """The driver asked directly (not through torch), so an unusable GPU can be explained: no
    driver, a driver older than the build, or devices hidden by CUDA_VISIBLE_DEVICES."""
    out: dict[str, Any] = {}
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        out["driver_error"] = str(exc)
        return out

    def cu_name(rc: int) -> str:
        name = ctypes.c_char_p()
        if cu.cuGetErrorName(rc, ctypes.byref(name)) == 0 and name.value:
            return name.value.decode()
        return f"CUresult {rc}"

    version = ctypes.c_int()
    if cu.cuDriverGetVersion(ctypes.byref(version)) == 0:
        out["driver_cuda"] = f"{version.value // 1000}.{version.value % 1000 // 10}"
    rc = cu.cuInit(0)
    out["cu_init"] = "CUDA_SUCCESS" if rc == 0 else cu_name(rc)
    if rc == 0:
        count = ctypes.c_int()
        if cu.cuDeviceGetCount(ctypes.byref(count)) == 0:
            out["driver_devices"] = count.value
    return out


def observe() -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {
        "cuda_build": torch.version.cuda,
        "torch_version": torch.__version__,
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    out.update(_driver())
    out["cuda_available"] = bool(out["cuda_build"]) and torch.cuda.is_available()
    try:
        import torch.distributed as dist

        out["nccl_available"] = bool(dist.is_available() and dist.is_nccl_available())
    except Exception:
        out["nccl_available"] = False
    if not out["cuda_available"]:
        return out
    out["device_count"] = torch.cuda.device_count()
    out["devices"] = [torch.cuda.get_device_name(i) for i in range(out["device_count"])]
    out["capability"] = list(torch.cuda.get_device_capability(0))
    out["arch_list"] = torch.cuda.get_arch_list()
    gen = torch.Generator().manual_seed(11)
    a = torch.randn(512, 512, generator=gen, dtype=torch.float64)
    b = torch.randn(512, 512, generator=gen, dtype=torch.float64)
    ref = a @ b
    got = (a.float().cuda() @ b.float().cuda()).double().cpu()
    out["matmul_rel_err"] = float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))
    with contextlib.suppress(Exception):
        out["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
    if out["nccl_available"]:
        out["nccl_all_reduce"] = _nccl_all_reduce(torch)
    return out


def _nccl_all_reduce(torch: Any) -> str:
    """One rank on one GPU: proves NCCL loads, builds a communicator and reduces on this driver."""
    import torch.distributed as dist

    try:
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
        t = torch.full((1024,), 3.0, device="cuda")
        dist.all_reduce(t)
        torch.cuda.synchronize()
        result = "ok" if float(t[0]) == 3.0 else f"wrong result {float(t[0])!r}"
        dist.destroy_process_group()
        return result
    except Exception as exc:
        return repr(exc)[:500]


def check_gpu(observed: dict[str, Any], torch_build: str | None = None) -> Check:
    """From the GPU section of an observation (see observe.py)."""
    data = observed.get("data")
    if not data:
        error = (observed.get("sections") or {}).get("ERR-GPU")
        ev = f"the GPU check raised {error}" if error else ("timed out" if observed.get("timeout") else excerpt(observed["stderr"]))
        return check("gpu", TITLE, "fail", ev, "see the evidence", seconds=observed["seconds"])
    status, evidence, remedy = classify_gpu(data, torch_build)
    return check("gpu", TITLE, status, evidence, remedy, data, observed["seconds"])


def _major_minor(text: Any) -> tuple[int, int] | None:
    try:
        major, minor = str(text).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def _archs(arch_list: list[str]) -> list[tuple[str, int, int]]:
    """torch's arch list ('sm_90', 'compute_120') as (kind, major, minor); others left out."""
    out = []
    for arch in arch_list:
        kind, _, digits = arch.partition("_")
        if digits.isdigit() and len(digits) >= 2:
            out.append((kind, int(digits[:-1]), int(digits[-1])))
    return out


def arch_supported(arch_list: list[str], capability: list[int] | tuple[int, int]) -> bool:
    """Whether a build's compiled architectures can run on a GPU of this compute capability: a cubin
    for the same major and an equal or lower minor, or PTX for an equal or lower architecture."""
    major, minor = capability
    for kind, a_major, a_minor in _archs(arch_list):
        if kind == "sm" and a_major == major and a_minor <= minor:
            return True
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return True
    return False


def _all_newer(arch_list: list[str], capability: list[int] | tuple[int, int]) -> bool:
    """Whether every architecture a build has is above this GPU's: a build made for newer GPUs only
    (an env solved where no GPU was seen), not an old one."""
    archs = _archs(arch_list)
    return bool(archs) and all((a_major, a_minor) > tuple(capability) for _, a_major, a_minor in archs)


# radon cc 34: a decision table over driver, torch build, device and capability states, each outcome a line
def classify_gpu(data: dict[str, Any], torch_build: str | None = None) -> tuple[str, str, str]:
    """(status, evidence, remedy) from the GPU observations. torch_build is the build the env was
    made for ('cuda' or 'cpu', from the recipe or the installed pytorch record), or None."""
    build, driver = data.get("cuda_build"), data.get("driver_cuda")
    driver_gpus = data.get("driver_devices") or 0
    machine = (
        "no NVIDIA driver here"
        if "driver_error" in data
        else f"driver CUDA {driver or 'unknown'}, {driver_gpus} GPU(s) visible to the driver"
    )
    if not build:
        ev = "torch {} is a CPU build ({})".format(data.get("torch_version", "?"), machine)
        if torch_build == "cuda":
            return (
                "fail",
                ev + "; this env was made for a CUDA build",
                "a CPU torch shadows the CUDA one or was solved instead: see 'envkit audit' for a pip torch over "
                "conda's pytorch, or recreate the env with a cuda pytorch variant",
            )
        return "skip", ev, ""
    if not data.get("cuda_available"):
        head = f"CUDA {build} build, but no usable GPU: "
        if "driver_error" in data:
            return (
                "warn",
                head + "no NVIDIA driver ({})".format(data["driver_error"]),
                "run it on a GPU node; on this machine the env can only use the CPU",
            )
        need, have = _major_minor(build), _major_minor(driver)
        if need and have and need[0] > have[0]:
            return (
                "fail",
                head + f"the driver supports CUDA {driver}, this build needs {build}",
                f"update the NVIDIA driver, or pin a build for CUDA {driver} (toolchain.pytorch.cuda in the recipe)",
            )
        visible = data.get("visible_devices")
        if data.get("cu_init") == "CUDA_ERROR_NO_DEVICE" and visible is not None:
            return (
                "warn",
                head + f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU",
                "unset CUDA_VISIBLE_DEVICES or list the GPUs this job may use",
            )
        if data.get("cu_init") == "CUDA_ERROR_NO_DEVICE" or (data.get("cu_init") == "CUDA_SUCCESS" and not driver_gpus):
            return "warn", head + "the driver reports no GPU", "run it on a GPU node"
        return (
            "fail",
            head + "the driver answered cuInit with {} ({})".format(data.get("cu_init"), machine),
            "check the driver with nvidia-smi; the evidence names the driver's error",
        )
    cap = data.get("capability") or [0, 0]
    sm = f"sm_{cap[0]}{cap[1]}"
    compat = ""
    need, have = _major_minor(build), _major_minor(driver)
    if need and have and need > have:
        compat = " (minor-version compatibility)"
    parts = [
        f"{data.get('device_count', 0)} device(s): {', '.join(data.get('devices', []))} ({sm})",
        "CUDA build {}, driver {}{}".format(build, driver or "unknown", compat),
    ]
    problems: list[str] = []
    remedies: list[str] = []
    arch = data.get("arch_list") or []
    if arch and not arch_supported(arch, cap):
        problems.append("this build has no kernels for {} (it has {})".format(sm, " ".join(arch)))
        if _all_newer(arch, cap):
            cc = f"{cap[0]}.{cap[1]}"
            remedies.append(
                f"this build is for newer GPUs only: install one for compute capability {cc} (toolchain.pytorch.cuda_arch: "
                f'"{cc}" in the recipe, or create the env where these GPUs are seen; see EK038)'
            )
        else:
            remedies.append(f"install a pytorch build that supports {sm} (usually a newer one)")
    err = data.get("matmul_rel_err")
    if err is None or not err <= 1e-3:  # NaN fails too
        problems.append(f"a float32 GPU matmul is off from the float64 CPU result by {err} (relative)")
        remedies.append("see the evidence; suspect the driver or the GPU")
    else:
        parts.append(f"matmul rel. error {err:.1e}")
    if data.get("nccl_available"):
        reduce = data.get("nccl_all_reduce")
        if reduce == "ok":
            parts.append("NCCL {} all_reduce ok".format(data.get("nccl_version", "?")))
        else:
            problems.append("NCCL {} is there but a 1-rank all_reduce failed: {}".format(data.get("nccl_version", "?"), reduce))
            remedies.append("multi-GPU DDP with the nccl backend will fail: check NCCL_* settings and the driver")
    status = "fail" if problems else "pass"
    if not data.get("nccl_available"):
        parts.append("NCCL unavailable")
        remedies.append("this build has no NCCL: multi-GPU DDP must use gloo (slow) or a build with NCCL")
        status = "warn" if status == "pass" else status
    if torch_build == "cpu" and status == "pass":
        status = "warn"
        parts.append("the env was made for a CPU build")
        remedies.append("recreate the env, or set toolchain.pytorch.variant: cuda in the recipe")
    return status, "; ".join(parts + problems), "; ".join(remedies)
