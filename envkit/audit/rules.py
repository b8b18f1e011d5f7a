"""The audit rule catalog. One rule = id, slug, severity, title, rationale, fix, sources, and a pure
check over the inventory returning evidence lines (one finding each). `safe_fix` marks rules that
`envkit audit --fix` may repair by writing activation settings or moving envkit's record; packages
are never changed. `advise` tailors the fix to the env, so that a fix naming a package command
says what else that command would take with it."""

from __future__ import annotations

import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Literal

from envkit.audit.inventory import Inventory, carried_values
from envkit.core.cpus import usable_cpus
from envkit.prefix.installed import dependents, wheel_torch_build
from envkit.prefix.record import RECORD_REL

if TYPE_CHECKING:
    import rattler

Severity = Literal["error", "warning", "info"]
SEVERITY_ORDER: dict[str, int] = {"info": 0, "warning": 1, "error": 2}


@dataclass(frozen=True)
class Rule:
    """One catalog entry: what it checks, why it matters, how to fix it, and where that is documented."""

    id: str
    slug: str
    severity: Severity
    title: str
    rationale: str
    fix: str
    sources: tuple[str, ...]
    check: Callable[[Inventory], list[str]]
    safe_fix: str | None = None  # name of the fix in audit.fix, when one exists
    advise: Callable[[Inventory], str] | None = None  # the fix for this env, when it depends on the env
    toolchain: bool = False  # about which BLAS/OpenMP/torch builds meet in the env: the toolchain map lists it as a conflict

    def fix_for(self, inv: Inventory) -> str:
        return self.advise(inv) if self.advise is not None else self.fix


def _ver(text: str) -> rattler.Version | None:
    import rattler  # loaded when a rule compares versions, not by every audit (conda's hooks)

    try:
        return rattler.Version(text.split("+", 1)[0])
    except Exception:
        return None


def _at_least(text: str, floor: str) -> bool:
    v = _ver(text)
    f = _ver(floor)
    return v is not None and f is not None and v >= f


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


def seed_crash(inv: Inventory) -> list[str]:
    service = _has_mkl_service(inv)
    foreign = _foreign_openmp(inv)
    layer = (inv.setting("MKL_THREADING_LAYER") or "").upper()
    if not service or not foreign or layer == "GNU":
        return []
    state = f"MKL_THREADING_LAYER={layer}" if layer else "MKL_THREADING_LAYER is not set by activation"
    return [f"{service} with a non-Intel OpenMP runtime ({', '.join(foreign)}); {state}"]


def legacy_mkl(inv: Inventory) -> list[str]:
    mkl = inv.packages.get("mkl")
    if inv.torch_source() == "pytorch-channel" and mkl and _at_least(mkl.version, "2024.1"):
        return [f"pytorch {inv.packages['pytorch'].version} from the pytorch channel with mkl {mkl.version}"]
    return []


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


def intel_and_llvm(inv: Inventory) -> list[str]:
    unproven = "on disk, not proven loaded: 'envkit probe' (runtimes) shows whether one process loads both"
    if "intel-openmp" in inv.packages and "llvm-openmp" in inv.packages:
        both = f"intel-openmp {inv.packages['intel-openmp'].version} and llvm-openmp {inv.packages['llvm-openmp'].version}"
        return [f"{both} both installed; {unproven}"]
    if "llvm-openmp" in inv.packages and "intel-openmp" in inv.pip:
        return [f"pip intel-openmp {inv.pip['intel-openmp'].version} over conda llvm-openmp; {unproven}"]
    return []


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


def _env_var_rule(name: str) -> Callable[[Inventory], list[str]]:
    def check(inv: Inventory) -> list[str]:
        var = inv.activation.get(name)
        if var is not None and var.value is not None:
            return [f"{name}={var.value} set by {var.source}"]
        return []

    return check


def _torch(inv: Inventory) -> bool:
    return "pytorch" in inv.packages or "torch" in inv.pip


def _openmp_apis(inv: Inventory) -> set[str]:
    """The OpenMP runtimes the env's processes can load: libraries on disk, else what the packages
    and torch's build bring."""
    apis = {lib.api for lib in inv.libs if lib.api in ("libgomp", "libomp", "libiomp5")}
    if not apis:
        if "llvm-openmp" in inv.packages:
            apis.add("libomp")
        if "intel-openmp" in inv.packages:
            apis.add("libiomp5")
        if "libgomp" in inv.packages:
            apis.add("libgomp")
    if inv.torch_source() in ("pip", "pytorch-channel"):
        apis.add("libgomp")
    return apis


def mkl_serial(inv: Inventory) -> list[str]:
    found = inv.advice_setting("MKL_SERIAL")
    if found is None:
        return []
    value, where = found
    return [f"MKL_SERIAL={value} from {where}: every MKL call in this env's processes runs on one thread"]


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


def nccl_transports(inv: Inventory) -> list[str]:
    out = []
    for name, what in (("NCCL_P2P_DISABLE", "GPU-to-GPU transfers over NVLink/PCIe"), ("NCCL_IB_DISABLE", "InfiniBand/RoCE between nodes")):
        found = inv.advice_setting(name)
        if found is not None and found[0].strip() not in ("", "0"):
            out.append(f"{name}={found[0]} from {found[1]}: turns off {what} for every job run from this env")
    return out


def kmp_affinity(inv: Inventory) -> list[str]:
    found = inv.advice_setting("KMP_AFFINITY")
    if found is None:
        return []
    where = f"KMP_AFFINITY={found[0]} from {found[1]}"
    if inv.torch_source() in ("pip", "pytorch-channel"):
        return [f"{where}: torch's OpenMP runtime here is GNU libgomp, which does not read it (torch's threads stay unpinned)"]
    apis = _openmp_apis(inv)
    if apis and apis <= {"libgomp"}:
        return [f"{where}: the only OpenMP runtime here is GNU libgomp, which does not read it"]
    return []


def omp_one_thread(inv: Inventory) -> list[str]:
    found = inv.advice_setting("OMP_NUM_THREADS")
    if found is None or found[0].strip() != "1" or not _torch(inv):
        return []
    return [f"OMP_NUM_THREADS=1 from {found[1]}: every process of this env, a single-process run included, computes on one core"]


def pip_over_conda_advice(inv: Inventory) -> str:
    pairs = [(p, c) for p, c in PIP_CONDA_PAIRS if p in inv.pip and inv.pip[p].installer == "pip" and c in inv.packages]
    if not pairs:
        return RULES_BY_ID["EK006"].fix
    pips, condas = " ".join(p for p, _ in pairs), " ".join(c for _, c in pairs)
    by_hand = (
        f"pip uninstall {pips}, then conda install --force-reinstall {condas}: the wheel overwrote the conda package's files, "
        "so removing it alone leaves the conda package broken."
    )
    if inv.record is not None and isinstance(inv.record.get("packages"), list):
        return f"envkit sync does both steps (it takes the wheel away and links the conda package again); by hand: {by_hand}"
    return by_hand


PIP_CONDA_PAIRS = (("numpy", "numpy"), ("torch", "pytorch"), ("scipy", "scipy"), ("mkl", "mkl"), ("intel-openmp", "intel-openmp"))


def pip_over_conda(inv: Inventory) -> list[str]:
    out = []
    for pip_name, conda_name in PIP_CONDA_PAIRS:
        dist = inv.pip.get(pip_name)
        if dist and dist.installer == "pip" and conda_name in inv.packages:
            out.append(f"pip {pip_name} {dist.version} installed over conda {conda_name} {inv.packages[conda_name].version}")
    return out


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


def blas_variant(inv: Inventory) -> list[str]:
    libblas = inv.packages.get("libblas")
    if "mkl" in inv.packages and libblas and not libblas.build.endswith("mkl") and "nomkl" not in inv.packages:
        return [
            f"mkl {inv.packages['mkl'].version} is installed but libblas is the {libblas.build.rsplit('_', 1)[-1]} variant ({libblas.build})"
        ]
    return []


TOOLCHAIN = ("libblas", "_openmp_mutex", "llvm-openmp", "mkl", "intel-openmp", "libopenblas")


def mixed_channels(inv: Inventory) -> list[str]:
    if inv.torch_source() != "pytorch-channel":
        return []
    cf = [n for n in TOOLCHAIN if n in inv.packages and inv.packages[n].channel_name == "conda-forge"]
    return [f"pytorch from the pytorch channel with conda-forge {', '.join(cf)}"] if cf else []


def legacy_channel(inv: Inventory) -> list[str]:
    if inv.torch_source() == "pytorch-channel":
        return [f"pytorch {inv.packages['pytorch'].version} {inv.packages['pytorch'].build} from the pytorch channel"]
    return []


def legacy_llvm16(inv: Inventory) -> list[str]:
    llvm = inv.packages.get("llvm-openmp")
    if inv.torch_source() == "pytorch-channel" and llvm and _at_least(llvm.version, "16"):
        return [f"llvm-openmp {llvm.version} with pytorch-channel pytorch"]
    return []


def _cuda_build(inv: Inventory) -> tuple[str, str] | None:
    for name in ("cuda-version", "pytorch-cuda", "cudatoolkit"):
        if name in inv.packages:
            return name, inv.packages[name].version
    dist = inv.pip.get("torch")
    claim = wheel_torch_build(dist.version) if dist else None
    if claim and claim[1]:
        return "pip torch", claim[1]
    return None


def cuda_vs_driver(inv: Inventory) -> list[str]:
    build = _cuda_build(inv)
    if build is None or not inv.cuda_driver:
        return []
    name, version = build
    b, d = _ver(version), _ver(inv.cuda_driver)
    if b is not None and d is not None and b > d:
        return [f"{name} {version} is newer than the driver's CUDA {inv.cuda_driver}"]
    return []


def activation_drift(inv: Inventory) -> list[str]:
    out = []
    for script in inv.envkit_scripts:
        if script.current is None:
            if script.listed:  # else it is one this envkit writes and an older one did not (EK031)
                out.append(f"{script.path} is missing")
        elif script.current != script.expected and not script.as_written:
            out.append(f"{script.path} differs from what the env's record (etc/envkit/record.json) asks for")
    return out


def activation_from_older_envkit(inv: Inventory) -> list[str]:
    # untouched since envkit wrote them (the record keeps their digests), but this envkit writes them otherwise
    older = [
        f"{s.path} is as an older envkit wrote it; this envkit writes it differently"
        for s in inv.envkit_scripts
        if s.current is not None and s.current != s.expected and s.as_written
    ]
    # a file the record does not name: envkit writes one more now, such as the startup files that
    # give a python started without activation the settings (envkit.activation.startup), or the
    # env's python moved since (`conda install python=3.12`), away from the site-packages they are in
    activation = (inv.record or {}).get("activation")
    listed = activation.get("files") if isinstance(activation, dict) else None
    where = {PurePosixPath(str(f)).name: str(PurePosixPath(str(f)).parent) for f in listed} if isinstance(listed, list) else {}
    for s in inv.envkit_scripts:
        if s.current is None and not s.listed:
            name, folder = PurePosixPath(s.path).name, str(PurePosixPath(s.path).parent)
            if where.get(name, folder) != folder:
                older.append(f"{s.path} is not there: the env's python moved, and the file is in {where[name]}, which it no longer reads")
            else:
                older.append(f"{s.path} is not there: this envkit writes it too")
    return older


def unreadable_records(inv: Inventory) -> list[str]:
    # a record this user may not read may well be sound: EK030 says why and who can fix it
    return [f"{bad.path}: {bad.reason}" for bad in inv.unreadable if not bad.denied]


def env_drift(inv: Inventory) -> list[str]:
    # only envs whose packages envkit installed (create, sync) have a package list to drift from;
    # `audit --fix` on an env conda made writes a record of activation settings alone. Records this
    # user may not read hide packages that are there: no drift can be told then (EK030 says so).
    if inv.record is None or not isinstance(inv.record.get("packages"), list) or any(bad.denied for bad in inv.unreadable):
        return []
    from envkit.audit.drift import drift  # the sync module is not loaded for plans (lock, create)

    return drift(inv.record, inv.packages, inv.pip)


PIP_REPORT = "22.2"  # the first pip with `install --dry-run` and `--report`


def pip_too_old(inv: Inventory) -> list[str]:
    # envkit's own pip steps need it: a plan with a pip list, or an env envkit installed wheels in
    # (an env conda made is not envkit's to sync, whatever its pip)
    pip = inv.packages.get("pip")
    wheels = [d for d in inv.pip.values() if d.managed]
    if pip is None or not wheels or not (inv.planned or (inv.record is not None and inv.record.get("pip"))):
        return []
    have, needed = _ver(pip.version), _ver(PIP_REPORT)
    if have is None or needed is None or have >= needed:
        return []
    names = ", ".join(sorted(d.name for d in wheels))
    return [f"pip {pip.version}, with the pip wheels {names}: envkit's pip steps need pip {PIP_REPORT} or later"]


def user_site_shadow(inv: Inventory) -> list[str]:
    if not inv.user_site or inv.advice_setting("PYTHONNOUSERSITE"):
        return []
    return [f"{found}: imported ahead of the env's own" for found in inv.user_site]


def _replaced_conda_vars(inv: Inventory) -> list[tuple[str, str, str | None]]:
    """(name, conda's value, envkit's value or None for unset) where the two differ."""
    out = []
    for name, value in sorted(inv.conda_vars.items()):
        var = inv.activation.get(name)
        if var is not None and var.source == "envkit" and var.value != value:
            out.append((name, value, var.value))
    return out


def conda_var_replaced(inv: Inventory) -> list[str]:
    return [
        f"conda's {name}={theirs} (conda env config vars) gives way to envkit's "
        + (f"{name}={ours}" if ours is not None else f"unset {name}")
        + " at activation"
        for name, theirs, ours in _replaced_conda_vars(inv)
    ]


def unset_replaced_conda_vars(inv: Inventory) -> str:
    names = " ".join(name for name, _, _ in _replaced_conda_vars(inv))
    return (
        f"Keep one: envkit's value, with conda env config vars unset {names} -p {inv.prefix}; or conda's, by putting it in the "
        "recipe's threading.env and running envkit sync (then unset it in conda too). envkit export writes envkit's value."
    )


def envkit_setting_overridden(inv: Inventory) -> list[str]:
    out = []
    for name, ours in sorted(inv.envkit_settings.items()):
        var = inv.activation.get(name)
        if var is not None and var.source != "envkit" and var.value != ours:
            theirs = f"sets {name}={var.value}" if var.value is not None else f"unsets {name}"
            mine = f"{name}={ours}" if ours is not None else f"unset {name}"
            out.append(f"{var.source} {theirs} after envkit's {mine} (conda runs activate.d scripts in name order)")
    return out


def legacy_record(inv: Inventory) -> list[str]:
    if inv.legacy_record:
        return ["conda-meta/envkit.json: conda reads every conda-meta/*.json as a package record, so conda list/install/remove fail here"]
    return []


def shared_env_private_records(inv: Inventory) -> list[str]:
    if not inv.private_records:
        return []
    who = " and ".join(
        w for bit, w in ((stat.S_IRGRP, "its group"), (stat.S_IROTH, "other users")) if any(lack & bit for _, lack in inv.private_records)
    )
    names = [rel for rel, _ in inv.private_records if rel.startswith("conda-meta/")]
    out = []
    if names:
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        out.append(f"{len(names)} package record(s) that only their owner can read, in an env {who} can reach: {shown}")
    if len(names) < len(inv.private_records):
        out.append(f"{RECORD_REL}, envkit's record of the env, only its owner can read, in an env {who} can reach")
    return out


def kernel_settings(inv: Inventory) -> list[str]:
    # what envkit's activation sets and the threading values its startup files carry (EK037): the
    # rest of conda's env vars and other scripts miss the kernel too, but they are not envkit's to write
    settings = inv.envkit_settings | inv.carried
    return [
        f"{k.path} (kernel '{k.name}') starts {k.python} without activation: " + "; ".join(differences)
        for k in inv.kernels
        if (differences := k.differences(settings))
    ]


WITHOUT_ACTIVATION = "a python started without activation (a job script's `srun ENV/bin/python`, a console script, a kernel)"


def activation_only_settings(inv: Inventory) -> list[str]:
    # what envkit's startup files should carry (the threading values conda's env vars or another
    # activate.d script set, less the names envkit's settings set: EK031, EK033 and EK034 judge
    # those), against what its record says they carry
    own = inv.envkit_settings
    wanted = {name: value for name, value in carried_values(inv.activation).items() if name not in own}
    if inv.planned or not inv.startup_site or not (wanted or inv.carried):
        return []
    out = []
    for name in sorted(wanted.keys() | inv.carried.keys()):
        now, given = wanted.get(name), inv.carried.get(name)
        if now == given:
            continue
        if name in own:  # a record that carries a name envkit sets itself: the files give it over envkit's value
            out.append(f"{name}={given} reaches {WITHOUT_ACTIVATION} through envkit's startup files, over envkit's own setting")
        elif given is None:
            out.append(f"{name}={now} is set by {inv.activation[name].source} at activation only: {WITHOUT_ACTIVATION} does not get it")
        elif now is None:
            out.append(f"{name}={given} reaches {WITHOUT_ACTIVATION} through envkit's startup files, but activation no longer sets it")
        else:
            source = inv.activation[name].source
            out.append(f"{name} is {now} at activation ({source}) but {given} for {WITHOUT_ACTIVATION}, from envkit's startup files")
    return out


def cuda_without_driver(inv: Inventory) -> list[str]:
    build = _cuda_build(inv)
    if build is None or inv.cuda_driver or not inv.on_this_machine:
        return []
    return [f"{build[0]} {build[1]}: no NVIDIA driver on this machine (no __cuda), so the GPU part cannot be proven here"]


def cuda_arch_above_gpus(inv: Inventory) -> list[str]:
    arch = inv.packages.get("cuda-arch")
    if arch is None or not inv.cuda_arch:
        return []
    need, have = _ver(arch.version), _ver(inv.cuda_arch)
    if need is None or have is None or need <= have:
        return []
    gpus = "the GPUs the plan is for are" if inv.planned else "this machine's GPUs are"
    return [
        f"cuda-arch {arch.version}: its packages need GPUs of compute capability {arch.version} or newer; {gpus} {inv.cuda_arch} (__cuda_arch)"
    ]


def cuda_arch_unknown(inv: Inventory) -> list[str]:
    arch = inv.packages.get("cuda-arch")
    if arch is None or inv.cuda_arch or not inv.planned:
        return []
    return [
        f"cuda-arch {arch.version} was solved with no GPU to go by (no __cuda_arch): the builds picked need GPUs of compute "
        f"capability {arch.version} or newer"
    ]


def reserved_variable(inv: Inventory) -> list[str]:
    """envkit's settings or conda's env config vars that set a variable a shell, conda or the
    loader acts on (an env made before envkit refused them, or vars set with conda)."""
    from envkit.recipe.reserved import why_reserved

    out = []
    for source, names in (("envkit's activation", inv.envkit_settings), ("conda env config vars", inv.conda_vars)):
        for name in sorted(names):
            if (why := why_reserved(name)) is not None:
                out.append(f"{source} sets {name}: it is {why}")
    return out


def stale_requests(inv: Inventory) -> list[str]:
    """conda's requests (conda-meta/history) that are not the recipe's specs: conda honours them
    at every later install or update, and can move the env away from its recipe with them."""
    from envkit.prefix.history import stale_requests as stale

    if inv.planned or not isinstance(inv.record, dict):
        return []
    return [
        f"conda-meta/history requests {asked}" + (f" where the recipe asks {ours}" if ours else ", which the recipe does not ask for")
        for asked, ours in stale(inv.prefix, inv.record)
    ]


def not_a_conda_env(inv: Inventory) -> list[str]:
    from envkit.prefix.history import not_an_env

    if inv.planned:
        return []
    why = not_an_env(inv.prefix)
    return [why] if why else []


def _probe_verdict(inv: Inventory, state: str) -> list[str]:
    from envkit.prefix.health import health_of

    if inv.planned:
        return []
    health = health_of(inv.record)
    if health.state != state:
        return []
    return [f"the last probe ({health.line()}) said {state}: envkit probe -p {inv.prefix} shows each check"]


def probe_warned(inv: Inventory) -> list[str]:
    return _probe_verdict(inv, "warn")


def probe_failed(inv: Inventory) -> list[str]:
    return _probe_verdict(inv, "unhealthy")


def oversubscription(inv: Inventory) -> list[str]:
    if not inv.on_this_machine:  # a lock, or another platform's plan: this machine's CPUs say nothing
        return []
    cpus = usable_cpus()
    ops = ((inv.record or {}).get("activation") or {}).get("ops") or ()
    computed = {op.get("name") for op in ops if isinstance(op, dict) and op.get("computed")}
    out = []
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        value = inv.setting(var)
        if value and value.isdigit() and int(value) > cpus:
            found = f"{var}={value} exceeds the {cpus} CPU{'s' if cpus > 1 else ''} a process here may use"
            if var in computed and inv.activation[var].source == "envkit":
                found += " (the physical cores where its scripts were written: 'envkit sync' here writes this machine's)"
            out.append(found)
    return out


def torchrun_threads(inv: Inventory) -> list[str]:
    if _torch(inv) and inv.advice_setting("OMP_NUM_THREADS") is None:
        return [
            "torch is installed and OMP_NUM_THREADS is not set: one process uses torch's default (the physical cores), torchrun 1 per rank"
        ]
    return []


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


def multiple_mkl(inv: Inventory) -> list[str]:
    reals = {lib.realpath: lib.path for lib in inv.libs if lib.api == "mkl"}
    owners = {lib.owner for lib in inv.libs if lib.api == "mkl"}
    if len(owners) > 1:
        return [f"libmkl_rt from {', '.join(sorted(owners))}: {', '.join(sorted(reals.values()))}"]
    majors = {lib.path.split(".so.")[-1] for lib in inv.libs if lib.api == "mkl" and ".so." in lib.path}
    if len(majors) > 1:
        return [f"libmkl_rt with sonames {', '.join(sorted(majors))}: {', '.join(sorted(reals.values()))}"]
    return []


def numpy_mkl_init(inv: Inventory) -> list[str]:
    if inv.numpy_imports_mkl:
        return ["numpy/_distributor_init.py runs `import mkl` (defaults/Intel MKL numpy): every numpy import loads mkl-service"]
    return []


RULES: tuple[Rule, ...] = (
    Rule(
        "EK001",
        "ddp-mkl-threading-layer",
        "error",
        "mkl-service with a non-Intel OpenMP runtime and no MKL_THREADING_LAYER=GNU",
        "A parent that imports MKL first makes mkl-service put MKL_THREADING_LAYER=INTEL into the C environment; "
        "children started with subprocess (vfork, so the atfork reset never runs) inherit it, import torch (libgomp) first, "
        "and mkl-service exits: 'MKL_THREADING_LAYER=INTEL is incompatible with libgomp'. Single-GPU works, DDP crashes. "
        "mkl-service judges the runtime by file name: anything but libiomp5.so is foreign, LLVM's libomp.so included.",
        "Export MKL_THREADING_LAYER=GNU in the env's activation (envkit audit --fix does it).",
        (
            "https://github.com/IntelPython/mkl-service/issues/14",
            "https://github.com/pytorch/pytorch/issues/37377",
            "https://github.com/numpy/numpy/issues/24683",
        ),
        seed_crash,
        "threading-layer-gnu",
        toolchain=True,
    ),
    Rule(
        "EK002",
        "legacy-pytorch-mkl-2024",
        "error",
        "pytorch-channel build with mkl>=2024.1",
        "mkl 2024.1 stopped exporting iJIT_NotifyEvent, which pytorch-channel libtorch_cpu.so imports: import torch fails with 'undefined symbol: iJIT_NotifyEvent'.",
        'conda install "mkl<2024.1" (or move to conda-forge pytorch).',
        ("https://github.com/pytorch/pytorch/issues/123097",),
        legacy_mkl,
        toolchain=True,
    ),
    Rule(
        "EK003",
        "duplicate-openmp",
        "error",
        "two Intel/LLVM OpenMP runtimes on disk",
        "Two libiomp5/libomp copies register in one process ('OMP: Error #15') and libiomp5 with libomp crashes or deadlocks.",
        "Keep one provider: remove pip intel-openmp/mkl over conda ones, or use conda-forge's llvm-openmp only.",
        ("https://github.com/joblib/threadpoolctl/blob/master/multiple_openmp.md", "https://github.com/pytorch/pytorch/issues/78490"),
        duplicate_openmp,
        toolchain=True,
    ),
    Rule(
        "EK004",
        "intel-and-llvm-openmp",
        "warning",
        "intel-openmp and llvm-openmp both installed",
        "conda-forge makes these mutually exclusive; a mixed-channel env can still hold both (the legacy pytorch channel on defaults "
        "does: pytorch needs llvm-openmp<16, defaults mkl needs intel-openmp). libiomp5 + libomp in one process is unrecoverable, "
        "but having both on disk does not load both: with MKL_THREADING_LAYER=GNU nothing loads libiomp5. A static audit cannot "
        "prove what loads, so this is a warning and the probe's runtimes check, which sees the loaded libraries, is the one that fails.",
        "Do not remove intel-openmp where packages depend on it; keep MKL off libiomp5 (MKL_THREADING_LAYER=GNU) and confirm with envkit probe.",
        (
            "https://github.com/conda-forge/conda-forge.github.io/issues/727",
            "https://github.com/joblib/threadpoolctl/blob/master/multiple_openmp.md",
        ),
        intel_and_llvm,
        advise=intel_and_llvm_advice,
        toolchain=True,
    ),
    Rule(
        "EK005",
        "kmp-duplicate-lib-ok",
        "error",
        "KMP_DUPLICATE_LIB_OK set",
        "It hides OMP Error #15 while two OpenMP runtimes keep running; the runtime warns it 'may cause crashes or silently produce incorrect results'.",
        "Remove it (conda env config vars unset KMP_DUPLICATE_LIB_OK) and fix the duplicate runtime instead.",
        ("https://github.com/llvm/llvm-project/blob/main/openmp/runtime/src/i18n/en_US.txt",),
        _env_var_rule("KMP_DUPLICATE_LIB_OK"),
    ),
    Rule(
        "EK006",
        "pip-over-conda",
        "error",
        "pip numpy/torch/mkl installed over conda packages",
        "The wheel brings its own BLAS or OpenMP runtime next to conda's: two BLAS libraries, two OpenMP runtimes, shadowed modules.",
        "pip uninstall the wheel, then conda install --force-reinstall the conda package (the wheel overwrote its files).",
        ("https://github.com/prefix-dev/pixi/issues/6818",),
        pip_over_conda,
        advise=pip_over_conda_advice,
        toolchain=True,
    ),
    Rule(
        "EK007",
        "openblas-pthreads-openmp",
        "warning",
        "pthreads OpenBLAS with an OpenMP torch",
        "OpenBLAS built with pthreads called inside OpenMP regions prints 'Detect OpenMP Loop and this application may hang' and slows or hangs.",
        'conda install "libopenblas=*=*openmp*" or set OPENBLAS_NUM_THREADS=1.',
        ("https://github.com/pytorch/pytorch/issues/52047",),
        openblas_pthreads,
        toolchain=True,
    ),
    Rule(
        "EK008",
        "blas-variant-not-mkl",
        "warning",
        "MKL installed but libblas is another variant",
        "conda-forge selects BLAS by the libblas build string; installing mkl alone leaves numpy on OpenBLAS.",
        'conda install "libblas=*=*mkl"',
        ("https://github.com/conda-forge/conda-forge.github.io/issues/938",),
        blas_variant,
        toolchain=True,
    ),
    Rule(
        "EK009",
        "mkl-debug-cpu-type",
        "warning",
        "MKL_DEBUG_CPU_TYPE set",
        "The undocumented switch stopped working in MKL 2020.1; it does nothing now.",
        "Remove it; on AMD CPUs consider the openblas or blis variant.",
        ("https://github.com/pytorch/builder/issues/460",),
        _env_var_rule("MKL_DEBUG_CPU_TYPE"),
    ),
    Rule(
        "EK010",
        "mixed-toolchain-channels",
        "warning",
        "pytorch channel build with conda-forge BLAS/OpenMP",
        "pytorch-channel builds expect defaults-style mkl/intel-openmp; conda-forge's llvm-openmp and libblas mix two toolchains.",
        "Take torch and its toolchain from one channel (conda-forge pytorch, or pytorch + defaults).",
        ("https://github.com/pytorch/pytorch/issues/99625",),
        mixed_channels,
        toolchain=True,
    ),
    Rule(
        "EK011",
        "legacy-pytorch-channel",
        "info",
        "pytorch from the deprecated pytorch channel",
        "The pytorch channel published its last release (2.5.1) in Oct 2024; no fixes land there.",
        "Move to conda-forge pytorch (pytorch-gpu / pytorch-cpu) or pip wheels.",
        ("https://github.com/pytorch/pytorch/issues/138506",),
        legacy_channel,
    ),
    Rule(
        "EK012",
        "legacy-llvm-openmp-16",
        "error",
        "llvm-openmp>=16 with pytorch-channel pytorch",
        "CPU affinity collapses to one core after import torch; the pytorch channel pinned llvm-openmp<16 for this.",
        'conda install "llvm-openmp<16"',
        ("https://github.com/pytorch/pytorch/issues/99625", "https://github.com/pytorch/builder/pull/1389"),
        legacy_llvm16,
        toolchain=True,
    ),
    Rule(
        "EK013",
        "cuda-newer-than-driver",
        "error",
        "CUDA build newer than the driver",
        "torch.cuda.is_available() is False and torch warns the driver is too old when the build's CUDA exceeds the driver's (__cuda). "
        "A machine with no driver at all is not this rule's business (EK023): envs are made on login nodes for GPU nodes.",
        "Install a build for the driver's CUDA (cuda-version=X.Y) or upgrade the driver.",
        ("https://docs.conda.io/projects/conda/en/stable/user-guide/tasks/manage-virtual.html",),
        cuda_vs_driver,
        toolchain=True,
    ),
    Rule(
        "EK014",
        "activation-drift",
        "error",
        "envkit activation scripts missing or edited",
        "The env's record says which threading settings it needs; missing or edited scripts mean they are not applied.",
        "envkit audit --fix rewrites them from etc/envkit/record.json.",
        ("https://docs.conda.io/projects/conda/en/stable/user-guide/tasks/manage-environments.html#macos-and-linux",),
        activation_drift,
        "rewrite-activation",
    ),
    Rule(
        "EK015",
        "thread-oversubscription",
        "warning",
        "thread counts above the CPU count",
        "Each process starts that many threads; above the core count they thrash, and DDP multiplies it by the rank count. "
        "Judged against the CPUs a process here may use: its affinity mask (taskset, a Slurm job's CPUs) and its cgroup's "
        "CPU quota (docker --cpus, a Kubernetes limit), not the machine's total. A lock, or a plan for another platform, "
        "is not judged by this machine's CPUs.",
        "Set OMP_NUM_THREADS/MKL_NUM_THREADS to about physical cores / ranks.",
        ("https://github.com/pytorch/pytorch/blob/main/torch/distributed/run.py",),
        oversubscription,
    ),
    Rule(
        "EK016",
        "mkl-service-force-intel",
        "error",
        "MKL_SERVICE_FORCE_INTEL set",
        "It silences mkl-service's abort but keeps libiomp5 and libgomp loaded together and still prints the error in every process.",
        "Remove it and export MKL_THREADING_LAYER=GNU instead.",
        ("https://github.com/pytorch/pytorch/issues/37377",),
        _env_var_rule("MKL_SERVICE_FORCE_INTEL"),
    ),
    Rule(
        "EK017",
        "mkl-on-amd",
        "info",
        "MKL BLAS on an AMD CPU",
        "MKL takes slower code paths on non-Intel CPUs and MKL_DEBUG_CPU_TYPE no longer helps.",
        'Consider "libblas=*=*openblas" or "*blis" on AMD machines (measure first).',
        ("https://github.com/pytorch/builder/issues/1245",),
        mkl_on_amd,
    ),
    Rule(
        "EK018",
        "multiple-mkl-runtimes",
        "error",
        "more than one libmkl_rt",
        "Two MKL copies (conda + pip wheel, or two sonames) load kernels from the wrong copy: 'Intel MKL FATAL ERROR: Cannot load libmkl_avx2.so'.",
        "Remove the pip mkl wheel or the conda mkl so one remains.",
        ("https://github.com/ContinuumIO/anaconda-issues/issues/720",),
        multiple_mkl,
        advise=multiple_mkl_advice,
        toolchain=True,
    ),
    Rule(
        "EK019",
        "torchrun-threads-unset",
        "info",
        "OMP_NUM_THREADS not set for a torch env",
        "torchrun sets OMP_NUM_THREADS=1 per worker only when it is unset and nproc>1, with a warning; plain runs use every core per "
        "process. That is the right default for one process and for as many ranks as cores; with fewer ranks than cores, one thread "
        "per rank leaves cores idle.",
        "Leave it unset env-wide; for N ranks on C cores launch with OMP_NUM_THREADS=C/N (the Threading policy section of docs/guides/recipes.md has the figures).",
        ("https://github.com/pytorch/pytorch/blob/main/torch/distributed/run.py",),
        torchrun_threads,
    ),
    Rule(
        "EK020",
        "numpy-imports-mkl",
        "info",
        "numpy imports mkl-service at import time",
        "Anaconda/Intel MKL numpy runs `import mkl` in _distributor_init.py, which is what arms the DDP crash (EK001).",
        "Nothing to do on its own; make sure EK001 is clean.",
        ("https://github.com/AnacondaRecipes/numpy-feedstock",),
        numpy_mkl_init,
    ),
    Rule(
        "EK021",
        "record-breaks-conda",
        "error",
        "envkit record at conda-meta/envkit.json",
        "envkit 0.1 kept its record at conda-meta/envkit.json. conda, mamba and micromamba read every conda-meta/*.json as a "
        "package record named NAME-VERSION-BUILD.json, so conda list, list --explicit, env export, install, remove, remove --all, "
        "rename and create --clone fail on the env with 'not enough values to unpack', and conda doctor's consistency check errors.",
        "envkit audit --fix moves it to etc/envkit/record.json, where conda does not read it and conda rename carries it along.",
        ("https://github.com/conda/conda/blob/main/conda/core/prefix_data.py",),
        legacy_record,
        "move-record",
    ),
    Rule(
        "EK023",
        "cuda-env-without-driver",
        "info",
        "CUDA env on a machine without an NVIDIA driver",
        "Clusters make envs on login nodes without GPUs and use them on GPU nodes; CI has no GPU either. The env can be "
        "correct, but nothing here can prove its GPU part: the probe's gpu check says so as a warning.",
        "Run 'envkit probe' on a GPU node; it proves the driver, the devices and NCCL there.",
        ("https://docs.conda.io/projects/conda/en/stable/user-guide/tasks/manage-virtual.html",),
        cuda_without_driver,
    ),
    Rule(
        "EK024",
        "drift-from-recipe",
        "warning",
        "the env's packages differ from what envkit installed",
        "Something changed the env after envkit made it from its recipe: conda install or remove, pip install, an update. "
        "The env is no longer what its recipe (and its lock, and its last probe) describe, and the team's other machines "
        "do not have the change.",
        "envkit sync brings it back to its recipe (or put the change into the recipe first, then envkit sync; a newer version the recipe"
        " already allows, conda's or a pip wheel's, comes with envkit sync --update NAME).",
        ("https://pixi.sh/latest/workspace/lock_file/",),
        env_drift,
    ),
    Rule(
        "EK025",
        "mkl-serial",
        "warning",
        "MKL_SERIAL set",
        "MKL_SERIAL=YES is a switch of MKL 10.x that forced the sequential (single-threaded) MKL; oneMKL documents the threading "
        "layer (MKL_THREADING_LAYER) and thread counts (MKL_NUM_THREADS) instead. Where it still acts, every MKL call of every "
        "process of the env runs on one thread, single-process work included; where it does not, it only misleads.",
        "Remove it; to limit MKL per process set MKL_NUM_THREADS for that launch, or mkl_num_threads in the recipe.",
        (
            "https://www.intel.com/content/www/us/en/docs/onemkl/developer-guide-linux/2025-1/dynamic-select-the-interface-and-threading-layer.html",
        ),
        mkl_serial,
    ),
    Rule(
        "EK026",
        "mkl-enable-instructions",
        "warning",
        "MKL_ENABLE_INSTRUCTIONS set",
        "It restricts MKL's dispatch to an older instruction set (AVX2_ONLY keeps AVX-512 code out) on Intel CPUs and is ignored "
        "on others; together with MKL_DEBUG_CPU_TYPE=5 it is copied as a way to 'disable MKL', which neither does: MKL still "
        "loads and runs, and MKL_DEBUG_CPU_TYPE is ignored since MKL 2020.1.",
        "Remove both; to run without MKL choose another BLAS (toolchain.blas: openblas, or conda install nomkl).",
        (
            "https://www.intel.com/content/www/us/en/docs/onemkl/developer-guide-linux/2025-0/instruction-set-specific-dispatch-on-intel-archs.html",
        ),
        mkl_enable_instructions,
    ),
    Rule(
        "EK027",
        "nccl-transports-disabled",
        "warning",
        "NCCL_P2P_DISABLE or NCCL_IB_DISABLE set env-wide",
        "NCCL_P2P_DISABLE=1 turns off direct GPU-to-GPU copies (NVLink, PCIe peer-to-peer) and NCCL_IB_DISABLE=1 InfiniBand/RoCE, "
        "for every job: traffic goes through host memory or TCP sockets, several times slower on machines that have them. They are "
        "workarounds for one machine's fault (peer-to-peer broken by PCIe ACS/IOMMU or a virtualised host, a consumer GPU without "
        "P2P, a fabric that does not work), which NCCL's own documentation lists under debugging, not configuration.",
        "Unset them in the env; where a machine needs one, set it for that machine's jobs after checking: nvidia-smi topo -m "
        "(NV#/PIX links), NCCL_DEBUG=INFO (look for 'via P2P' and 'NET/IB'), nccl-tests all_reduce_perf with and without.",
        ("https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",),
        nccl_transports,
    ),
    Rule(
        "EK028",
        "kmp-affinity-with-libgomp",
        "warning",
        "KMP_AFFINITY with GNU OpenMP only",
        "KMP_AFFINITY is read by Intel's libiomp5 and LLVM's libomp; GNU libgomp (pip torch, pytorch-channel builds, "
        "_openmp_mutex *_gnu) ignores it, so the pinning it was copied for never happens.",
        "Use the standard variables every runtime reads: OMP_PROC_BIND=close and OMP_PLACES=cores.",
        ("https://gcc.gnu.org/onlinedocs/libgomp/Environment-Variables.html",),
        kmp_affinity,
        toolchain=True,
    ),
    Rule(
        "EK029",
        "omp-num-threads-one",
        "warning",
        "OMP_NUM_THREADS=1 for every process of a torch env",
        "One thread is right for a rank when there are as many ranks as cores (torchrun sets it itself when the variable is "
        "unset), but env-wide it also holds for single-process runs: CPU inference measured 1.55x slower with 1 thread than "
        "with 2 on a 2-core machine (bench/threads.py), and the gap grows with the cores.",
        "Unset it env-wide (recipe: drop threading.omp_num_threads; conda env config vars unset; your shell profile); set it "
        "per launch: OMP_NUM_THREADS=C/N torchrun --nproc-per-node N ...",
        ("https://github.com/pytorch/pytorch/blob/main/torch/distributed/run.py",),
        omp_one_thread,
    ),
    Rule(
        "EK022",
        "unreadable-package-records",
        "error",
        "package records in conda-meta that cannot be read",
        "Every conda-meta/*.json is a package record. One that is empty, binary, not JSON, nested beyond reason or missing "
        "its name, version or build makes conda stop with CorruptedEnvironmentError (or ignore the package), and hides "
        "the package from every audit rule: the env is not what its records say.",
        "Reinstall the package the file names (conda install --force-reinstall NAME), or delete the file and recreate the "
        "env; conda doctor's consistency check reads the same files.",
        ("https://github.com/conda/conda/blob/main/conda/core/prefix_data.py",),
        unreadable_records,
    ),
    Rule(
        "EK030",
        "private-package-records",
        "warning",
        "package records (or envkit's record) only their owner can read, in an env others can reach",
        "rattler's installer (pixi's, and envkit's before it set them right) writes every conda-meta/*.json with mode 0600, "
        "where conda creates them under the umask (0644 as a rule); envkit itself wrote etc/envkit/record.json 0600 until "
        "it did the same. In an env the team shares (/opt/envs on a GPU node, a project directory), nobody but its creator "
        "can read those files, so what reads them fails for everyone else: conda list and conda install on package records, "
        "envkit's own audit (which would report them as unreadable under EK022), and, on envkit's record, the envkit "
        "commands that need it (sync, export, activation show).",
        "envkit audit --fix, run by the env's owner (or root), adds the read bits the env's directories already give "
        "(chmod g+r,o+r on the files named); nothing else changes. A sync by the owner opens envkit's record as well.",
        ("https://github.com/prefix-dev/pixi/issues/4284",),
        shared_env_private_records,
        "open-records",
    ),
    Rule(
        "EK031",
        "activation-from-older-envkit",
        "warning",
        "activation files as an older envkit wrote them, or without those it writes now",
        "The scripts are untouched since envkit wrote them (the record keeps each one's digest), but this envkit writes them "
        "otherwise: a later envkit mended how they behave in some shell. One such mend: envkit's fish scripts used to leave "
        "status 4 when a variable they save was not set (fish's `set` passes an earlier failure through), so "
        "`conda activate ENV; and python train.py` in fish never trained; and its cmd.exe scripts ended with whatever ERRORLEVEL "
        'came before them, on which conda\'s cmd.exe activation stops ("Activation script ... failed"). Another: envkit now '
        "also writes startup files into the env's site-packages (_envkit_settings.py, .pth and .start), so that a python "
        "started without activation (a job script's `srun ENV/bin/python`, a console script such as ENV/bin/yolo, a "
        "shebang, an IDE) gets the settings; an env made before has none, and a multi-GPU train started that way meets the "
        "seed crash. They also go missing when conda moves the env's python (`conda install python=3.12`): they stay in "
        "the old python's site-packages, which the new one does not read, and the finding says where. Files edited by "
        "hand are EK014's.",
        "envkit audit --fix rewrites them from etc/envkit/record.json (the settings stay the same; startup files in an old "
        "python's folder move to the new one's); so does envkit sync.",
        (
            "https://fishshell.com/docs/current/cmds/set.html",
            "https://docs.python.org/3/library/site.html",
            "https://peps.python.org/pep-0829/",
        ),
        activation_from_older_envkit,
        "rewrite-activation",
    ),
    Rule(
        "EK032",
        "user-site-shadow",
        "error",
        "toolchain packages in the user site, ahead of the env's",
        "`pip install --user` puts packages in ~/.local/lib/pythonX.Y/site-packages, which every python of that version "
        "that is not a venv (conda's included) puts on sys.path ahead of its own site-packages. A numpy or torch there "
        "replaces the env's in every env of that Python version, with its own BLAS and OpenMP runtimes, whatever the env's "
        "packages say. The probe's `origin` check shows it at run time.",
        "Uninstall them from the user site (with the env active, python -m pip uninstall NAME removes the copy found first), "
        "or keep this env off the user site: PYTHONNOUSERSITE: '1' under the recipe's threading.env (envkit's startup files "
        "take the user site out of a python started without activation too).",
        ("https://peps.python.org/pep-0370/", "https://docs.python.org/3/library/site.html"),
        user_site_shadow,
    ),
    Rule(
        "EK033",
        "conda-env-var-replaced",
        "warning",
        "a conda env var that envkit's activation replaces",
        "conda applies the variables of `conda env config vars set` before it runs the env's activate.d scripts, so envkit's "
        "value is what processes get (conda activate and conda run alike, tested). conda's own records keep the other one: "
        "`conda env config vars list` shows it, `conda env export` writes it under variables:, and an env made again from that "
        "export, where envkit's scripts are not, gets it. For MKL_THREADING_LAYER=INTEL that is the DDP crash envkit's GNU was "
        "there to prevent; either way the two places disagree about what the env does.",
        "Keep one: envkit's value, with conda env config vars unset NAME -n ENV; or conda's, by putting it in the recipe's "
        "threading.env and running envkit sync (then unset it in conda too). envkit export writes envkit's value.",
        ("https://docs.conda.io/projects/conda/en/latest/user-guide/tasks/manage-environments.html#setting-environment-variables",),
        conda_var_replaced,
        advise=unset_replaced_conda_vars,
    ),
    Rule(
        "EK034",
        "envkit-setting-overridden",
        "error",
        "an activation script that undoes envkit's settings",
        "conda runs an env's etc/conda/activate.d scripts one after another in name order, so a script whose name sorts after "
        "envkit-RECIPE.sh (a package's, or one written by hand) has the last word on any variable it also sets: "
        "export MKL_THREADING_LAYER=INTEL there brings back the DDP crash envkit's GNU is there to prevent, and the recipe, "
        "the record and envkit's own script all still say GNU. envkit run and the probe source the scripts in the same order, so "
        "they see it too (and `envkit toolchain` names the script that wins).",
        "Take the line out of that script (a package's script comes back with the package: ask its maintainers, or remove the "
        "package), or, if its value is the one you want, put it in the recipe's threading.env and run envkit sync.",
        ("https://github.com/conda/conda/blob/main/conda/activate.py",),
        envkit_setting_overridden,
        toolchain=True,
    ),
    Rule(
        "EK035",
        "pip-too-old",
        "error",
        "a pip too old for envkit's pip steps",
        "envkit installs, records, checks and moves an env's pip wheels with `pip install --dry-run --report`: pip's own "
        "choice of exact files, which the record, the lock and a sync's difference are made of. pip has both options from 22.2 "
        "(July 2022) on. With an older pip in the env, each of those steps fails with pip's 'no such option: --report': a "
        "create cannot install the recipe's pip list, and a sync cannot put a wheel back or move one.",
        "Let the recipe allow pip 22.2 or later (pip >=22.2, or no pin on pip), then envkit sync (for a create: run it again); "
        "an env's pip that conda install downgraded comes back with envkit sync.",
        ("https://pip.pypa.io/en/stable/news/#v22-2",),
        pip_too_old,
    ),
    Rule(
        "EK036",
        "jupyter-kernel-settings",
        "warning",
        "a Jupyter kernel of the env that starts without its activation settings",
        "A kernelspec written by `python -m ipykernel install` starts the env's python directly, with the Jupyter server's "
        "environment and the spec's own `env`, and runs no activation. The env's startup files (_envkit_settings.pth) fill "
        "in what the server's environment lacks, but a value the server has wins there: one from the shell it was started "
        "in, or MKL_THREADING_LAYER=INTEL, which mkl-service writes into the environment of a server process that imported "
        "it, for every kernel it starts. A DDP run launched from such a notebook (ultralytics' multi-GPU train spawns "
        "torch.distributed.run) gets the seed crash MKL_THREADING_LAYER=GNU is there to prevent, and thread counts are "
        "whatever the server had. The spec's `env` wins over the server's. Kernels started through conda run or nb_conda_kernels are "
        "activated and not looked at. The spec's `env` cannot unset a variable the server has.",
        "envkit audit --fix writes envkit's settings into each such kernel.json's env (the rest of the file as it was; a `$` "
        "written as `$$`, since Jupyter expands $NAME there); from then on envkit sync, and create over the env, write the "
        "settings they change there too. The threading values the startup files carry from conda's own activation "
        "(EK037) go into the kernel with them, and come out once activation no longer sets them. A prepend or append is not "
        "written: the spec's env cannot add to a variable.",
        (
            "https://jupyter-client.readthedocs.io/en/stable/kernels.html#kernel-specs",
            "https://github.com/anaconda/nb_conda_kernels/issues/54",
        ),
        kernel_settings,
        "kernel-settings",
    ),
    Rule(
        "EK037",
        "activation-only-settings",
        "warning",
        "threading settings that only an activated python gets",
        "`conda env config vars set MKL_THREADING_LAYER=GNU` (the fix the forums give for the seed crash), the `variables:` "
        "of an environment.yml that `conda env create` read (envkit's own export writes them there), a package's "
        "etc/conda/env_vars.d and a hand-written activate.d script all set their values when the env is activated, and only "
        "then. A python started without activation gets none of them: a Slurm job's `srun ENV/bin/python train.py`, a "
        "console script such as ENV/bin/yolo or ENV/bin/torchrun, a shebang, an IDE's run button, a Jupyter kernel. The "
        "audit and the probe of the activated env pass, and the multi-GPU run started that way meets the seed crash "
        "(mkl-service: MKL_THREADING_LAYER=INTEL is incompatible with libgomp). Only the variables of the BLAS and OpenMP "
        "runtimes, NCCL's and PYTHONNOUSERSITE are looked at; a project's own variables are the project's business. Values "
        "carried before and changed since (`conda env config vars set` again, or `unset`) are found too.",
        "envkit audit --fix writes the values into envkit's startup files in the env's site-packages (_envkit_settings.pth, "
        ".py and .start), which set each one only where the process does not have it, so an activation's value still wins, "
        "and records them in etc/envkit/record.json; after a later `conda env config vars set` or `unset`, the audit finds "
        "the difference and --fix writes them again. conda's own settings stay where they are.",
        (
            "https://docs.conda.io/projects/conda/en/stable/user-guide/tasks/manage-environments.html#setting-environment-variables",
            "https://docs.python.org/3/library/site.html",
            "https://github.com/pytorch/pytorch/issues/37377",
        ),
        activation_only_settings,
        "carry-activation",
    ),
    Rule(
        "EK038",
        "cuda-arch-above-gpus",
        "error",
        "packages built for newer GPUs than these",
        "conda-forge packages built for some GPU architectures only depend on the cuda-arch metapackage (cuda-arch >= the lowest "
        "compute capability they have kernels for), which the __cuda_arch virtual package (the lowest compute capability of "
        "the machine's GPUs, CEP 46) constrains. An env solved where no GPU was seen (a login node, CI) can hold builds for "
        "newer GPUs than the ones it runs on: torch then fails at the first kernel with 'no kernel image is available for "
        "execution on the device'.",
        "Recreate the env here (envkit create --force), where the GPUs are detected, or declare their compute capability in "
        'the recipe (toolchain.pytorch.cuda_arch: "9.0" for H100/H200) and create it again; the probe\'s gpu check proves it.',
        ("https://conda.org/learn/ceps/cep-0046", "https://conda-forge.org/blog/2026/10/19/cuda-arch/"),
        cuda_arch_above_gpus,
        toolchain=True,
    ),
    Rule(
        "EK039",
        "cuda-arch-unknown-gpus",
        "warning",
        "GPU builds picked without knowing the GPUs",
        "Without a __cuda_arch (no GPU seen, none declared) the cuda-arch metapackage constrains nothing, and the solver "
        "prefers the variant with the highest build number: conda-forge ranks the builds for the newest GPUs first. The "
        "plan may then hold builds that have no kernels for the GPUs of the nodes the env is made for.",
        'Declare the lowest compute capability of those GPUs in the recipe (toolchain.pytorch.cuda_arch: "9.0" for H100/H200, '
        '"8.0" for A100), or set CONDA_OVERRIDE_CUDA_ARCH for this run; on a GPU node it is detected.',
        ("https://conda.org/learn/ceps/cep-0046", "https://conda-forge.org/blog/2026/10/19/cuda-arch/"),
        cuda_arch_unknown,
    ),
    Rule(
        "EK040",
        "reserved-variable",
        "error",
        "activation sets a variable a shell, conda or the loader acts on",
        "Some variables are not settings but instructions: bash runs PS0 and PROMPT_COMMAND at every prompt, zsh expands "
        "RPS1 and SPROMPT (and runs what they hold under prompt_subst), HISTFILESIZE=0 empties ~/.bash_history the moment "
        "it is set, CONDA_PREFIX and CONDA_SHLVL are conda's activation state (conda deactivate then fails with 'This should "
        "not happen!'), LD_PRELOAD loads a library into every program. envkit refuses them in recipes; an env made "
        "before that, or given them through conda env config vars, still sets them at every activation.",
        "Take the variable out of the recipe's threading.env and run envkit sync; for conda's, conda env config vars unset NAME -p PREFIX.",
        (
            "https://www.gnu.org/software/bash/manual/html_node/Bash-Variables.html",
            "https://zsh.sourceforge.io/Doc/Release/Parameters.html",
            "https://docs.conda.io/projects/conda/en/latest/dev-guide/deep-dives/activation.html",
            "https://man7.org/linux/man-pages/man8/ld.so.8.html",
        ),
        reserved_variable,
    ),
    Rule(
        "EK041",
        "stale-conda-request",
        "warning",
        "conda keeps a request the recipe does not make",
        "conda works out an env's requested specs from conda-meta/history and holds every later `conda install` or "
        "`conda update` to them. A request made with conda (`conda install mkl=2024.1.0`) that the recipe does not make "
        "stays there after the env is put back to its recipe, and the next unrelated `conda install tqdm` moves mkl back "
        "to 2024.1.0: the toolchain the recipe pins (and the probe proved) is gone without a word. envkit sync records the "
        "recipe's specs as the env's requests and ends the others.",
        "Run envkit sync: it puts the packages back and writes the recipe's specs as the env's requests (it names the "
        "requests it ends). To keep the request, put the spec in the recipe instead.",
        ("https://docs.conda.io/projects/conda/en/latest/commands/env/export.html",),
        stale_requests,
    ),
    Rule(
        "EK042",
        "not-a-conda-env",
        "error",
        "a prefix conda does not take for an env",
        "conda marks an env by its conda-meta/history file: without it `conda list`, `conda install` and `conda activate` "
        "answer that the prefix is not a conda environment, and `conda env list` leaves it out. A conda-meta folder with "
        "no package record in it describes nothing: what the prefix holds was not installed by conda or envkit.",
        "Recreate the env (envkit create --force from its recipe, or conda create); envkit sync refuses such a prefix.",
        ("https://github.com/conda/conda/blob/main/conda/base/constants.py",),
        not_a_conda_env,
    ),
    Rule(
        "EK043",
        "probe-warned",
        "warning",
        "the env's last probe warned",
        "The probe runs the env's own python: it imports the toolchain, lists the BLAS and OpenMP libraries the process "
        "really maps, runs a numeric check and a DDP-style launch. A warning there (two BLAS libraries loaded, more than "
        "one OpenMP runtime, threads that oversubscribe the CPUs) is something the static rules may not see from the "
        "files alone; every health verdict (list, toolchain, audit, conda doctor) shows it until a probe passes.",
        "Run envkit probe for each check's evidence and remedy; fix the cause (usually a recipe change and envkit sync), "
        "and the next probe records the new verdict.",
        ("https://github.com/joblib/threadpoolctl/blob/master/multiple_openmp.md",),
        probe_warned,
    ),
    Rule(
        "EK044",
        "probe-failed",
        "error",
        "the env's last probe failed",
        "A failed probe check means the env does what envkit exists to prevent: a crash in the DDP launch, an import that "
        "fails, wrong numbers, a setting missing at run time. The failure stays in the env's record until a probe passes.",
        "Run envkit probe for each check's evidence and remedy; fix the cause, then probe again.",
        ("https://github.com/pytorch/pytorch/issues/37377",),
        probe_failed,
    ),
)

RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}
assert len(RULES_BY_ID) == len(RULES), "duplicate audit rule id"
assert len({r.slug for r in RULES}) == len(RULES), "duplicate audit rule slug"


def lookup(rule_id: str) -> Rule | None:
    key = rule_id.strip()
    return RULES_BY_ID.get(key.upper()) or next((r for r in RULES if r.slug == key.lower()), None)
