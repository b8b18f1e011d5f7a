"""Rules on OpenMP runtimes and MKL: the mkl-service + libgomp crash, two runtimes, MKL builds and the variables that hide their trouble."""

from __future__ import annotations

from envkit.audit.catalog import rule
from envkit.audit.inventory import Inventory
from envkit.audit.rules.common import at_least, set_by_activation
from envkit.prefix.installed import dependents


def _foreign_openmp(inv: Inventory) -> list[str]:
    """OpenMP runtimes mkl-service does not take for Intel's. It looks at the file name of whatever
    library provides omp_get_num_threads and treats anything but libiomp5.so as foreign: GNU's
    libgomp and LLVM's libomp alike ('MKL_THREADING_LAYER=INTEL is incompatible with libomp.so')."""
    out = [lib.path for lib in inv.libs if lib.api in ("libgomp", "libomp")]
    src = inv.torch_source()
    # No torch build loads libiomp5 on Linux: pip and pytorch-channel builds bring libgomp,
    # conda-forge's libomp; a torch from elsewhere brings one of the two.
    runtime = {"conda-forge": "libomp", "pip": "libgomp", "pytorch-channel": "libgomp"}.get(src or "", "its own OpenMP runtime")
    if src is not None:
        out.append(f"torch from {src} ({runtime})")
    for name in ("libgomp", "llvm-openmp"):
        if name in inv.packages:
            out.append(f"{name} {inv.packages[name].version}")
    mutex = inv.packages.get("_openmp_mutex")
    if mutex and mutex.build.endswith(("_gnu", "_llvm")):
        out.append(f"_openmp_mutex {mutex.build}")
    return sorted(set(out))


def _has_mkl_service(inv: Inventory) -> str | None:
    if "mkl-service" in inv.packages:
        return "conda mkl-service " + inv.packages["mkl-service"].version
    if "mkl-service" in inv.pip:
        return f"{inv.pip['mkl-service'].installer} mkl-service {inv.pip['mkl-service'].version}"
    return None


@rule(
    "EK001",
    "ddp-mkl-threading-layer",
    "error",
    "mkl-service with a non-Intel OpenMP runtime and no MKL_THREADING_LAYER=GNU",
    rationale="A parent that imports MKL first makes mkl-service put MKL_THREADING_LAYER=INTEL into the C environment; "
    "children started with subprocess (vfork, so the atfork reset never runs) inherit it, import torch (libgomp) first, "
    "and mkl-service exits: 'MKL_THREADING_LAYER=INTEL is incompatible with libgomp'. Single-GPU works, DDP crashes. "
    "mkl-service judges the runtime by file name: anything but libiomp5.so is foreign, LLVM's libomp.so included.",
    fix="Export MKL_THREADING_LAYER=GNU in the env's activation (envkit audit --fix does it).",
    sources=(
        "https://github.com/IntelPython/mkl-service/issues/14",
        "https://github.com/pytorch/pytorch/issues/37377",
        "https://github.com/numpy/numpy/issues/24683",
    ),
    safe_fix="threading-layer-gnu",
    toolchain=True,
)
def seed_crash(inv: Inventory) -> list[str]:
    service = _has_mkl_service(inv)
    foreign = _foreign_openmp(inv)
    layer = (inv.setting("MKL_THREADING_LAYER") or "").upper()
    if not service or not foreign or layer == "GNU":
        return []
    state = f"MKL_THREADING_LAYER={layer}" if layer else "MKL_THREADING_LAYER is not set by activation"
    return [f"{service} with a non-Intel OpenMP runtime ({', '.join(foreign)}); {state}"]


@rule(
    "EK002",
    "legacy-pytorch-mkl-2024",
    "error",
    "pytorch-channel build with mkl>=2024.1",
    rationale="mkl 2024.1 stopped exporting iJIT_NotifyEvent, which pytorch-channel libtorch_cpu.so imports: import torch fails with 'undefined symbol: iJIT_NotifyEvent'.",
    fix='conda install "mkl<2024.1" (or move to conda-forge pytorch).',
    sources=("https://github.com/pytorch/pytorch/issues/123097",),
    toolchain=True,
)
def legacy_mkl(inv: Inventory) -> list[str]:
    mkl = inv.packages.get("mkl")
    if inv.torch_source() == "pytorch-channel" and mkl and at_least(mkl.version, "2024.1"):
        return [f"pytorch {inv.packages['pytorch'].version} from the pytorch channel with mkl {mkl.version}"]
    return []


@rule(
    "EK003",
    "duplicate-openmp",
    "error",
    "two Intel/LLVM OpenMP runtimes on disk",
    rationale="Two libiomp5/libomp copies register in one process ('OMP: Error #15') and libiomp5 with libomp crashes or deadlocks.",
    fix="Keep one provider: remove pip intel-openmp/mkl over conda ones, or use conda-forge's llvm-openmp only.",
    sources=("https://github.com/joblib/threadpoolctl/blob/master/multiple_openmp.md", "https://github.com/pytorch/pytorch/issues/78490"),
    toolchain=True,
)
def duplicate_openmp(inv: Inventory) -> list[str]:
    by_api: dict[str, set[str]] = {}
    paths: dict[str, list[str]] = {}
    for lib in inv.libs:
        if lib.api in ("libiomp5", "libomp") and not lib.realpath.endswith(".a"):
            by_api.setdefault(lib.api, set()).add(lib.realpath)
            paths.setdefault(lib.api, []).append(lib.path)
    out = []
    for api, reals in sorted(by_api.items()):
        if len(reals) > 1:
            out.append(f"{len(reals)} copies of {api}: {', '.join(sorted(paths[api]))}")
    iomp, omp = by_api.get("libiomp5", set()), by_api.get("libomp", set())
    if iomp and omp and not iomp <= omp:
        out.append(f"libiomp5 ({', '.join(sorted(paths['libiomp5']))}) next to libomp ({', '.join(sorted(paths['libomp']))})")
    return out


def _conda_remove(inv: Inventory, name: str) -> str:
    """`conda remove NAME` and what it takes with it (everything that depends on NAME)."""
    taken = dependents(inv.packages, name)
    if not taken:
        return f"conda remove {name} (nothing installed depends on it)"
    return f"conda remove {name} would also remove {len(taken)} package(s) that depend on it: {', '.join(taken)}"


def intel_and_llvm_advice(inv: Inventory) -> str:
    if "intel-openmp" in inv.pip:
        return "pip uninstall intel-openmp (pip removes only that wheel; the conda packages stay)."
    removal = _conda_remove(inv, "intel-openmp")
    if not dependents(inv.packages, "intel-openmp"):
        return removal + "."
    if (inv.setting("MKL_THREADING_LAYER") or "").upper() == "GNU":
        keep = "MKL_THREADING_LAYER=GNU is set, so MKL does not load libiomp5; 'envkit probe' confirms which runtimes load"
    else:
        keep = "keep MKL off libiomp5 with MKL_THREADING_LAYER=GNU and confirm with 'envkit probe' which runtimes load"
    return f"{removal}, so do not. Instead: {keep}. For a clean toolchain, recreate the env from one channel (conda-forge pytorch)."


@rule(
    "EK004",
    "intel-and-llvm-openmp",
    "warning",
    "intel-openmp and llvm-openmp both installed",
    rationale="conda-forge makes these mutually exclusive; a mixed-channel env can still hold both (the legacy pytorch channel on defaults "
    "does: pytorch needs llvm-openmp<16, defaults mkl needs intel-openmp). libiomp5 + libomp in one process is unrecoverable, "
    "but having both on disk does not load both: with MKL_THREADING_LAYER=GNU nothing loads libiomp5. A static audit cannot "
    "prove what loads, so this is a warning and the probe's runtimes check, which sees the loaded libraries, is the one that fails.",
    fix="Do not remove intel-openmp where packages depend on it; keep MKL off libiomp5 (MKL_THREADING_LAYER=GNU) and confirm with envkit probe.",
    sources=(
        "https://github.com/conda-forge/conda-forge.github.io/issues/727",
        "https://github.com/joblib/threadpoolctl/blob/master/multiple_openmp.md",
    ),
    advise=intel_and_llvm_advice,
    toolchain=True,
)
def intel_and_llvm(inv: Inventory) -> list[str]:
    unproven = "on disk, not proven loaded: 'envkit probe' (runtimes) shows whether one process loads both"
    if "intel-openmp" in inv.packages and "llvm-openmp" in inv.packages:
        both = f"intel-openmp {inv.packages['intel-openmp'].version} and llvm-openmp {inv.packages['llvm-openmp'].version}"
        return [f"{both} both installed; {unproven}"]
    if "llvm-openmp" in inv.packages and "intel-openmp" in inv.pip:
        return [f"pip intel-openmp {inv.pip['intel-openmp'].version} over conda llvm-openmp; {unproven}"]
    return []


@rule(
    "EK005",
    "kmp-duplicate-lib-ok",
    "error",
    "KMP_DUPLICATE_LIB_OK set",
    rationale="It hides OMP Error #15 while two OpenMP runtimes keep running; the runtime warns it 'may cause crashes or silently produce incorrect results'.",
    fix="Remove it (conda env config vars unset KMP_DUPLICATE_LIB_OK) and fix the duplicate runtime instead.",
    sources=("https://github.com/llvm/llvm-project/blob/main/openmp/runtime/src/i18n/en_US.txt",),
)
def kmp_duplicate_lib_ok(inv: Inventory) -> list[str]:
    return set_by_activation(inv, "KMP_DUPLICATE_LIB_OK")


@rule(
    "EK009",
    "mkl-debug-cpu-type",
    "warning",
    "MKL_DEBUG_CPU_TYPE set",
    rationale="The undocumented switch stopped working in MKL 2020.1; it does nothing now.",
    fix="Remove it; on AMD CPUs consider the openblas or blis variant.",
    sources=("https://github.com/pytorch/builder/issues/460",),
)
def mkl_debug_cpu_type(inv: Inventory) -> list[str]:
    return set_by_activation(inv, "MKL_DEBUG_CPU_TYPE")


@rule(
    "EK016",
    "mkl-service-force-intel",
    "error",
    "MKL_SERVICE_FORCE_INTEL set",
    rationale="It silences mkl-service's abort but keeps libiomp5 and libgomp loaded together and still prints the error in every process.",
    fix="Remove it and export MKL_THREADING_LAYER=GNU instead.",
    sources=("https://github.com/pytorch/pytorch/issues/37377",),
)
def mkl_service_force_intel(inv: Inventory) -> list[str]:
    return set_by_activation(inv, "MKL_SERVICE_FORCE_INTEL")


@rule(
    "EK017",
    "mkl-on-amd",
    "info",
    "MKL BLAS on an AMD CPU",
    rationale="MKL takes slower code paths on non-Intel CPUs and MKL_DEBUG_CPU_TYPE no longer helps.",
    fix='Consider "libblas=*=*openblas" or "*blis" on AMD machines (measure first).',
    sources=("https://github.com/pytorch/builder/issues/1245",),
)
def mkl_on_amd(inv: Inventory) -> list[str]:
    libblas = inv.packages.get("libblas")
    uses_mkl = (libblas is not None and libblas.build.endswith("mkl")) or "mkl" in inv.packages or "mkl" in inv.pip
    if inv.cpu_vendor == "AuthenticAMD" and uses_mkl:
        return ["MKL on an AuthenticAMD CPU"]
    return []


def multiple_mkl_advice(inv: Inventory) -> str:
    owners = {lib.owner for lib in inv.libs if lib.api == "mkl"}
    pip_owned = sorted(o.split(":", 1)[1] for o in owners if o.startswith("pip:"))
    if pip_owned:
        return f"pip uninstall {' '.join(pip_owned)} (pip removes only the wheel; conda's mkl stays)."
    return f"Keep one MKL: {_conda_remove(inv, 'mkl')}; recreating the env from one channel is usually simpler."


@rule(
    "EK018",
    "multiple-mkl-runtimes",
    "error",
    "more than one libmkl_rt",
    rationale="Two MKL copies (conda + pip wheel, or two sonames) load kernels from the wrong copy: 'Intel MKL FATAL ERROR: Cannot load libmkl_avx2.so'.",
    fix="Remove the pip mkl wheel or the conda mkl so one remains.",
    sources=("https://github.com/ContinuumIO/anaconda-issues/issues/720",),
    advise=multiple_mkl_advice,
    toolchain=True,
)
def multiple_mkl(inv: Inventory) -> list[str]:
    reals = {lib.realpath: lib.path for lib in inv.libs if lib.api == "mkl"}
    owners = {lib.owner for lib in inv.libs if lib.api == "mkl"}
    if len(owners) > 1:
        return [f"libmkl_rt from {', '.join(sorted(owners))}: {', '.join(sorted(reals.values()))}"]
    majors = {lib.path.split(".so.")[-1] for lib in inv.libs if lib.api == "mkl" and ".so." in lib.path}
    if len(majors) > 1:
        return [f"libmkl_rt with sonames {', '.join(sorted(majors))}: {', '.join(sorted(reals.values()))}"]
    return []


@rule(
    "EK020",
    "numpy-imports-mkl",
    "info",
    "numpy imports mkl-service at import time",
    rationale="Anaconda/Intel MKL numpy runs `import mkl` in _distributor_init.py, which is what arms the DDP crash (EK001).",
    fix="Nothing to do on its own; make sure EK001 is clean.",
    sources=("https://github.com/AnacondaRecipes/numpy-feedstock",),
)
def numpy_mkl_init(inv: Inventory) -> list[str]:
    if inv.numpy_imports_mkl:
        return ["numpy/_distributor_init.py runs `import mkl` (defaults/Intel MKL numpy): every numpy import loads mkl-service"]
    return []
