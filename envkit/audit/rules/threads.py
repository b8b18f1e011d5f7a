"""Rules on thread counts and their settings: serial MKL, affinity, one OpenMP thread, oversubscription, torchrun's default."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.audit.inventory import Inventory
from envkit.core.cpus import usable_cpus

if TYPE_CHECKING:
    pass

from envkit.audit.catalog import rule
from envkit.audit.rules.common import has_torch, openmp_apis


@rule(
    "EK025",
    "mkl-serial",
    "warning",
    "MKL_SERIAL set",
    rationale="MKL_SERIAL=YES is a switch of MKL 10.x that forced the sequential (single-threaded) MKL; oneMKL documents the threading "
    "layer (MKL_THREADING_LAYER) and thread counts (MKL_NUM_THREADS) instead. Where it still acts, every MKL call of every "
    "process of the env runs on one thread, single-process work included; where it does not, it only misleads.",
    fix="Remove it; to limit MKL per process set MKL_NUM_THREADS for that launch, or mkl_num_threads in the recipe.",
    sources=(
        "https://www.intel.com/content/www/us/en/docs/onemkl/developer-guide-linux/2025-1/dynamic-select-the-interface-and-threading-layer.html",
    ),
)
def mkl_serial(inv: Inventory) -> list[str]:
    found = inv.advice_setting("MKL_SERIAL")
    if found is None:
        return []
    value, where = found
    return [f"MKL_SERIAL={value} from {where}: every MKL call in this env's processes runs on one thread"]


@rule(
    "EK026",
    "mkl-enable-instructions",
    "warning",
    "MKL_ENABLE_INSTRUCTIONS set",
    rationale="It restricts MKL's dispatch to an older instruction set (AVX2_ONLY keeps AVX-512 code out) on Intel CPUs and is ignored "
    "on others; together with MKL_DEBUG_CPU_TYPE=5 it is copied as a way to 'disable MKL', which neither does: MKL still "
    "loads and runs, and MKL_DEBUG_CPU_TYPE is ignored since MKL 2020.1.",
    fix="Remove both; to run without MKL choose another BLAS (toolchain.blas: openblas, or conda install nomkl).",
    sources=(
        "https://www.intel.com/content/www/us/en/docs/onemkl/developer-guide-linux/2025-0/instruction-set-specific-dispatch-on-intel-archs.html",
    ),
)
def mkl_enable_instructions(inv: Inventory) -> list[str]:
    found = inv.advice_setting("MKL_ENABLE_INSTRUCTIONS")
    if found is None:
        return []
    value, where = found
    debug = inv.advice_setting("MKL_DEBUG_CPU_TYPE")
    extra = f"; with MKL_DEBUG_CPU_TYPE={debug[0]}, which MKL ignores since 2020.1" if debug else ""
    if inv.cpu_vendor == "AuthenticAMD":
        return [f"MKL_ENABLE_INSTRUCTIONS={value} from {where}: ignored on this AMD CPU (the switch acts on Intel CPUs only){extra}"]
    return [f"MKL_ENABLE_INSTRUCTIONS={value} from {where}: caps MKL at that instruction set (it does not turn MKL off){extra}"]


@rule(
    "EK027",
    "nccl-transports-disabled",
    "warning",
    "NCCL_P2P_DISABLE or NCCL_IB_DISABLE set env-wide",
    rationale="NCCL_P2P_DISABLE=1 turns off direct GPU-to-GPU copies (NVLink, PCIe peer-to-peer) and NCCL_IB_DISABLE=1 InfiniBand/RoCE, "
    "for every job: traffic goes through host memory or TCP sockets, several times slower on machines that have them. They are "
    "workarounds for one machine's fault (peer-to-peer broken by PCIe ACS/IOMMU or a virtualised host, a consumer GPU without "
    "P2P, a fabric that does not work), which NCCL's own documentation lists under debugging, not configuration.",
    fix="Unset them in the env; where a machine needs one, set it for that machine's jobs after checking: nvidia-smi topo -m "
    "(NV#/PIX links), NCCL_DEBUG=INFO (look for 'via P2P' and 'NET/IB'), nccl-tests all_reduce_perf with and without.",
    sources=("https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",),
)
def nccl_transports(inv: Inventory) -> list[str]:
    out = []
    for name, what in (("NCCL_P2P_DISABLE", "GPU-to-GPU transfers over NVLink/PCIe"), ("NCCL_IB_DISABLE", "InfiniBand/RoCE between nodes")):
        found = inv.advice_setting(name)
        if found is not None and found[0].strip() not in ("", "0"):
            out.append(f"{name}={found[0]} from {found[1]}: turns off {what} for every job run from this env")
    return out


@rule(
    "EK028",
    "kmp-affinity-with-libgomp",
    "warning",
    "KMP_AFFINITY with GNU OpenMP only",
    rationale="KMP_AFFINITY is read by Intel's libiomp5 and LLVM's libomp; GNU libgomp (pip torch, pytorch-channel builds, "
    "_openmp_mutex *_gnu) ignores it, so the pinning it was copied for never happens.",
    fix="Use the standard variables every runtime reads: OMP_PROC_BIND=close and OMP_PLACES=cores.",
    sources=("https://gcc.gnu.org/onlinedocs/libgomp/Environment-Variables.html",),
    toolchain=True,
)
def kmp_affinity(inv: Inventory) -> list[str]:
    found = inv.advice_setting("KMP_AFFINITY")
    if found is None:
        return []
    where = f"KMP_AFFINITY={found[0]} from {found[1]}"
    if inv.torch_source() in ("pip", "pytorch-channel"):
        return [f"{where}: torch's OpenMP runtime here is GNU libgomp, which does not read it (torch's threads stay unpinned)"]
    apis = openmp_apis(inv)
    if apis and apis <= {"libgomp"}:
        return [f"{where}: the only OpenMP runtime here is GNU libgomp, which does not read it"]
    return []


@rule(
    "EK029",
    "omp-num-threads-one",
    "warning",
    "OMP_NUM_THREADS=1 for every process of a torch env",
    rationale="One thread is right for a rank when there are as many ranks as cores (torchrun sets it itself when the variable is "
    "unset), but env-wide it also holds for single-process runs: CPU inference measured 1.55x slower with 1 thread than "
    "with 2 on a 2-core machine (bench/threads.py), and the gap grows with the cores.",
    fix="Unset it env-wide (recipe: drop threading.omp_num_threads; conda env config vars unset; your shell profile); set it "
    "per launch: OMP_NUM_THREADS=C/N torchrun --nproc-per-node N ...",
    sources=("https://github.com/pytorch/pytorch/blob/main/torch/distributed/run.py",),
)
def omp_one_thread(inv: Inventory) -> list[str]:
    found = inv.advice_setting("OMP_NUM_THREADS")
    if found is None or found[0].strip() != "1" or not has_torch(inv):
        return []
    return [f"OMP_NUM_THREADS=1 from {found[1]}: every process of this env, a single-process run included, computes on one core"]


@rule(
    "EK015",
    "thread-oversubscription",
    "warning",
    "thread counts above the CPU count",
    rationale="Each process starts that many threads; above the core count they thrash, and DDP multiplies it by the rank count. "
    "Judged against the CPUs a process here may use: its affinity mask (taskset, a Slurm job's CPUs) and its cgroup's "
    "CPU quota (docker --cpus, a Kubernetes limit), not the machine's total. A lock, or a plan for another platform, "
    "is not judged by this machine's CPUs.",
    fix="Set OMP_NUM_THREADS/MKL_NUM_THREADS to about physical cores / ranks.",
    sources=("https://github.com/pytorch/pytorch/blob/main/torch/distributed/run.py",),
)
def oversubscription(inv: Inventory) -> list[str]:
    if not inv.on_this_machine:  # a lock, or another platform's plan: this machine's CPUs say nothing
        return []
    cpus = usable_cpus()
    activation = inv.record.activation if inv.record else None
    computed = {name for name, _, _ in activation.computed()} if activation else set()
    out = []
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        value = inv.setting(var)
        if value and value.isdigit() and int(value) > cpus:
            found = f"{var}={value} exceeds the {cpus} CPU{'s' if cpus > 1 else ''} a process here may use"
            if var in computed and inv.activation[var].source == "envkit":
                found += " (the physical cores where its scripts were written: 'envkit sync' here writes this machine's)"
            out.append(found)
    return out


@rule(
    "EK019",
    "torchrun-threads-unset",
    "info",
    "OMP_NUM_THREADS not set for a torch env",
    rationale="torchrun sets OMP_NUM_THREADS=1 per worker only when it is unset and nproc>1, with a warning; plain runs use every core per "
    "process. That is the right default for one process and for as many ranks as cores; with fewer ranks than cores, one thread "
    "per rank leaves cores idle.",
    fix="Leave it unset env-wide; for N ranks on C cores launch with OMP_NUM_THREADS=C/N (the Threading policy section of docs/guides/recipes.md has the figures).",
    sources=("https://github.com/pytorch/pytorch/blob/main/torch/distributed/run.py",),
)
def torchrun_threads(inv: Inventory) -> list[str]:
    if has_torch(inv) and inv.advice_setting("OMP_NUM_THREADS") is None:
        return [
            "torch is installed and OMP_NUM_THREADS is not set: one process uses torch's default (the physical cores), torchrun 1 per rank"
        ]
    return []
