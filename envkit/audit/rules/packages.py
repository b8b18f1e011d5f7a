"""Rules on where packages come from: pip over conda, the BLAS variant, channels, pip itself, CUDA against the driver and the GPUs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.audit.inventory import Inventory
from envkit.prefix.installed import wheel_torch_build

if TYPE_CHECKING:
    pass

from envkit.audit.catalog import rule
from envkit.audit.rules.common import at_least, version_of

PIP_OVER_CONDA_FIX = "pip uninstall the wheel, then conda install --force-reinstall the conda package (the wheel overwrote its files)."


def pip_over_conda_advice(inv: Inventory) -> str:
    pairs = [(p, c) for p, c in PIP_CONDA_PAIRS if p in inv.pip and inv.pip[p].installer == "pip" and c in inv.packages]
    if not pairs:
        return PIP_OVER_CONDA_FIX
    pips, condas = " ".join(p for p, _ in pairs), " ".join(c for _, c in pairs)
    by_hand = (
        f"pip uninstall {pips}, then conda install --force-reinstall {condas}: the wheel overwrote the conda package's files, "
        "so removing it alone leaves the conda package broken."
    )
    if inv.record is not None and inv.record.packages is not None:
        return f"envkit sync does both steps (it takes the wheel away and links the conda package again); by hand: {by_hand}"
    return by_hand


PIP_CONDA_PAIRS = (("numpy", "numpy"), ("torch", "pytorch"), ("scipy", "scipy"), ("mkl", "mkl"), ("intel-openmp", "intel-openmp"))


@rule(
    "EK006",
    "pip-over-conda",
    "error",
    "pip numpy/torch/mkl installed over conda packages",
    rationale="The wheel brings its own BLAS or OpenMP runtime next to conda's: two BLAS libraries, two OpenMP runtimes, shadowed modules.",
    fix=PIP_OVER_CONDA_FIX,
    sources=("https://github.com/prefix-dev/pixi/issues/6818",),
    advise=pip_over_conda_advice,
    toolchain=True,
)
def pip_over_conda(inv: Inventory) -> list[str]:
    out = []
    for pip_name, conda_name in PIP_CONDA_PAIRS:
        dist = inv.pip.get(pip_name)
        if dist and dist.installer == "pip" and conda_name in inv.packages:
            out.append(f"pip {pip_name} {dist.version} installed over conda {conda_name} {inv.packages[conda_name].version}")
    return out


@rule(
    "EK007",
    "openblas-pthreads-openmp",
    "warning",
    "pthreads OpenBLAS with an OpenMP torch",
    rationale="OpenBLAS built with pthreads called inside OpenMP regions prints 'Detect OpenMP Loop and this application may hang' and slows or hangs.",
    fix='conda install "libopenblas=*=*openmp*" or set OPENBLAS_NUM_THREADS=1.',
    sources=("https://github.com/pytorch/pytorch/issues/52047",),
    toolchain=True,
)
def openblas_pthreads(inv: Inventory) -> list[str]:
    has_torch = "pytorch" in inv.packages or "torch" in inv.pip
    if not has_torch:
        return []
    out = []
    lib = inv.packages.get("libopenblas")
    if lib and "pthreads" in lib.build:
        out.append(f"conda libopenblas {lib.version} {lib.build} with torch (OpenMP)")
    for native in inv.libs:
        if native.api == "openblas" and "scipy_openblas" in native.path and native.owner.startswith("pip"):
            out.append(f"{native.path} (pthreads OpenBLAS from {native.owner}) with torch (OpenMP)")
    return out


@rule(
    "EK008",
    "blas-variant-not-mkl",
    "warning",
    "MKL installed but libblas is another variant",
    rationale="conda-forge selects BLAS by the libblas build string; installing mkl alone leaves numpy on OpenBLAS.",
    fix='conda install "libblas=*=*mkl"',
    sources=("https://github.com/conda-forge/conda-forge.github.io/issues/938",),
    toolchain=True,
)
def blas_variant(inv: Inventory) -> list[str]:
    libblas = inv.packages.get("libblas")
    if "mkl" in inv.packages and libblas and not libblas.build.endswith("mkl") and "nomkl" not in inv.packages:
        return [
            f"mkl {inv.packages['mkl'].version} is installed but libblas is the {libblas.build.rsplit('_', 1)[-1]} variant ({libblas.build})"
        ]
    return []


TOOLCHAIN = ("libblas", "_openmp_mutex", "llvm-openmp", "mkl", "intel-openmp", "libopenblas")


@rule(
    "EK010",
    "mixed-toolchain-channels",
    "warning",
    "pytorch channel build with conda-forge BLAS/OpenMP",
    rationale="pytorch-channel builds expect defaults-style mkl/intel-openmp; conda-forge's llvm-openmp and libblas mix two toolchains.",
    fix="Take torch and its toolchain from one channel (conda-forge pytorch, or pytorch + defaults).",
    sources=("https://github.com/pytorch/pytorch/issues/99625",),
    toolchain=True,
)
def mixed_channels(inv: Inventory) -> list[str]:
    if inv.torch_source() != "pytorch-channel":
        return []
    cf = [n for n in TOOLCHAIN if n in inv.packages and inv.packages[n].channel_name == "conda-forge"]
    return [f"pytorch from the pytorch channel with conda-forge {', '.join(cf)}"] if cf else []


@rule(
    "EK011",
    "legacy-pytorch-channel",
    "info",
    "pytorch from the deprecated pytorch channel",
    rationale="The pytorch channel published its last release (2.5.1) in Oct 2024; no fixes land there.",
    fix="Move to conda-forge pytorch (pytorch-gpu / pytorch-cpu) or pip wheels.",
    sources=("https://github.com/pytorch/pytorch/issues/138506",),
)
def legacy_channel(inv: Inventory) -> list[str]:
    if inv.torch_source() == "pytorch-channel":
        return [f"pytorch {inv.packages['pytorch'].version} {inv.packages['pytorch'].build} from the pytorch channel"]
    return []


@rule(
    "EK012",
    "legacy-llvm-openmp-16",
    "error",
    "llvm-openmp>=16 with pytorch-channel pytorch",
    rationale="CPU affinity collapses to one core after import torch; the pytorch channel pinned llvm-openmp<16 for this.",
    fix='conda install "llvm-openmp<16"',
    sources=("https://github.com/pytorch/pytorch/issues/99625", "https://github.com/pytorch/builder/pull/1389"),
    toolchain=True,
)
def legacy_llvm16(inv: Inventory) -> list[str]:
    llvm = inv.packages.get("llvm-openmp")
    if inv.torch_source() == "pytorch-channel" and llvm and at_least(llvm.version, "16"):
        return [f"llvm-openmp {llvm.version} with pytorch-channel pytorch"]
    return []


PIP_REPORT = "22.2"  # the first pip with `install --dry-run` and `--report`


@rule(
    "EK035",
    "pip-too-old",
    "error",
    "a pip too old for envkit's pip steps",
    rationale="envkit installs, records, checks and moves an env's pip wheels with `pip install --dry-run --report`: pip's own "
    "choice of exact files, which the record, the lock and a sync's difference are made of. pip has both options from 22.2 "
    "(July 2022) on. With an older pip in the env, each of those steps fails with pip's 'no such option: --report': a "
    "create cannot install the recipe's pip list, and a sync cannot put a wheel back or move one.",
    fix="Let the recipe allow pip 22.2 or later (pip >=22.2, or no pin on pip), then envkit sync (for a create: run it again); "
    "an env's pip that conda install downgraded comes back with envkit sync.",
    sources=("https://pip.pypa.io/en/stable/news/#v22-2",),
)
def pip_too_old(inv: Inventory) -> list[str]:
    # envkit's own pip steps need it: a plan with a pip list, or an env envkit installed wheels in
    # (an env conda made is not envkit's to sync, whatever its pip)
    pip = inv.packages.get("pip")
    wheels = [d for d in inv.pip.values() if d.managed]
    if pip is None or not wheels or not (inv.planned or (inv.record is not None and inv.record.pip)):
        return []
    have, needed = version_of(pip.version), version_of(PIP_REPORT)
    if have is None or needed is None or have >= needed:
        return []
    names = ", ".join(sorted(d.name for d in wheels))
    return [f"pip {pip.version}, with the pip wheels {names}: envkit's pip steps need pip {PIP_REPORT} or later"]


@rule(
    "EK032",
    "user-site-shadow",
    "error",
    "toolchain packages in the user site, ahead of the env's",
    rationale="`pip install --user` puts packages in ~/.local/lib/pythonX.Y/site-packages, which every python of that version "
    "that is not a venv (conda's included) puts on sys.path ahead of its own site-packages. A numpy or torch there "
    "replaces the env's in every env of that Python version, with its own BLAS and OpenMP runtimes, whatever the env's "
    "packages say. The probe's `origin` check shows it at run time.",
    fix="Uninstall them from the user site (with the env active, python -m pip uninstall NAME removes the copy found first), "
    "or keep this env off the user site: PYTHONNOUSERSITE: '1' under the recipe's threading.env (envkit's startup files "
    "take the user site out of a python started without activation too).",
    sources=("https://peps.python.org/pep-0370/", "https://docs.python.org/3/library/site.html"),
)
def user_site_shadow(inv: Inventory) -> list[str]:
    if not inv.user_site or inv.advice_setting("PYTHONNOUSERSITE"):
        return []
    return [f"{found}: imported ahead of the env's own" for found in inv.user_site]


def _cuda_build(inv: Inventory) -> tuple[str, str] | None:
    for name in ("cuda-version", "pytorch-cuda", "cudatoolkit"):
        if name in inv.packages:
            return name, inv.packages[name].version
    dist = inv.pip.get("torch")
    claim = wheel_torch_build(dist.version) if dist else None
    if claim and claim[1]:
        return "pip torch", claim[1]
    return None


@rule(
    "EK013",
    "cuda-newer-than-driver",
    "error",
    "CUDA build newer than the driver",
    rationale="torch.cuda.is_available() is False and torch warns the driver is too old when the build's CUDA exceeds the driver's (__cuda). "
    "A machine with no driver at all is not this rule's business (EK023): envs are made on login nodes for GPU nodes.",
    fix="Install a build for the driver's CUDA (cuda-version=X.Y) or upgrade the driver.",
    sources=("https://docs.conda.io/projects/conda/en/stable/user-guide/tasks/manage-virtual.html",),
    toolchain=True,
)
def cuda_vs_driver(inv: Inventory) -> list[str]:
    build = _cuda_build(inv)
    if build is None or not inv.cuda_driver:
        return []
    name, version = build
    b, d = version_of(version), version_of(inv.cuda_driver)
    if b is not None and d is not None and b > d:
        return [f"{name} {version} is newer than the driver's CUDA {inv.cuda_driver}"]
    return []


@rule(
    "EK023",
    "cuda-env-without-driver",
    "info",
    "CUDA env on a machine without an NVIDIA driver",
    rationale="Clusters make envs on login nodes without GPUs and use them on GPU nodes; CI has no GPU either. The env can be "
    "correct, but nothing here can prove its GPU part: the probe's gpu check says so as a warning.",
    fix="Run 'envkit probe' on a GPU node; it proves the driver, the devices and NCCL there.",
    sources=("https://docs.conda.io/projects/conda/en/stable/user-guide/tasks/manage-virtual.html",),
)
def cuda_without_driver(inv: Inventory) -> list[str]:
    build = _cuda_build(inv)
    if build is None or inv.cuda_driver or not inv.on_this_machine:
        return []
    return [f"{build[0]} {build[1]}: no NVIDIA driver on this machine (no __cuda), so the GPU part cannot be proven here"]


@rule(
    "EK038",
    "cuda-arch-above-gpus",
    "error",
    "packages built for newer GPUs than these",
    rationale="conda-forge packages built for some GPU architectures only depend on the cuda-arch metapackage (cuda-arch >= the lowest "
    "compute capability they have kernels for), which the __cuda_arch virtual package (the lowest compute capability of "
    "the machine's GPUs, CEP 46) constrains. An env solved where no GPU was seen (a login node, CI) can hold builds for "
    "newer GPUs than the ones it runs on: torch then fails at the first kernel with 'no kernel image is available for "
    "execution on the device'.",
    fix="Recreate the env here (envkit create --force), where the GPUs are detected, or declare their compute capability in "
    'the recipe (toolchain.pytorch.cuda_arch: "9.0" for H100/H200) and create it again; the probe\'s gpu check proves it.',
    sources=("https://conda.org/learn/ceps/cep-0046", "https://conda-forge.org/blog/2026/10/19/cuda-arch/"),
    toolchain=True,
)
def cuda_arch_above_gpus(inv: Inventory) -> list[str]:
    arch = inv.packages.get("cuda-arch")
    if arch is None or not inv.cuda_arch:
        return []
    need, have = version_of(arch.version), version_of(inv.cuda_arch)
    if need is None or have is None or need <= have:
        return []
    gpus = "the GPUs the plan is for are" if inv.planned else "this machine's GPUs are"
    return [
        f"cuda-arch {arch.version}: its packages need GPUs of compute capability {arch.version} or newer; {gpus} {inv.cuda_arch} (__cuda_arch)"
    ]


@rule(
    "EK039",
    "cuda-arch-unknown-gpus",
    "warning",
    "GPU builds picked without knowing the GPUs",
    rationale="Without a __cuda_arch (no GPU seen, none declared) the cuda-arch metapackage constrains nothing, and the solver "
    "prefers the variant with the highest build number: conda-forge ranks the builds for the newest GPUs first. The "
    "plan may then hold builds that have no kernels for the GPUs of the nodes the env is made for.",
    fix='Declare the lowest compute capability of those GPUs in the recipe (toolchain.pytorch.cuda_arch: "9.0" for H100/H200, '
    '"8.0" for A100), or set CONDA_OVERRIDE_CUDA_ARCH for this run; on a GPU node it is detected.',
    sources=("https://conda.org/learn/ceps/cep-0046", "https://conda-forge.org/blog/2026/10/19/cuda-arch/"),
)
def cuda_arch_unknown(inv: Inventory) -> list[str]:
    arch = inv.packages.get("cuda-arch")
    if arch is None or inv.cuda_arch or not inv.planned:
        return []
    return [
        f"cuda-arch {arch.version} was solved with no GPU to go by (no __cuda_arch): the builds picked need GPUs of compute "
        f"capability {arch.version} or newer"
    ]
