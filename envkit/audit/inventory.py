"""Everything the rules look at, read from disk without running the env's python."""

from __future__ import annotations

import contextlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit.activation import FILE_PREFIX
from envkit.activation.startup import carried_name, site_dir
from envkit.core.fsutil import read_exact
from envkit.prefix.envrecord import EnvRecord
from envkit.prefix.installed import (
    STATE,
    CondaPackage,
    PipDist,
    UnreadableRecord,
    conda_activation_vars,
    pip_dists,
    read_conda_meta,
    site_packages,
)
from envkit.prefix.record import RecordDenied, legacy_record_path, read_record, record_path
from envkit.recipe.model import EnvOp

if TYPE_CHECKING:
    from envkit.prefix.kernels import KernelSpec

# (kind, api, basename pattern): runtimes only, not their helpers (libiomp5_db, libomptarget, ...).
NATIVE_PATTERNS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("openmp", "libgomp", re.compile(r"^libgomp(-[0-9a-f]{8})?\.(so|dylib)")),
    ("openmp", "libiomp5", re.compile(r"^libiomp5(md)?\.(so|dylib|dll)")),
    ("openmp", "libomp", re.compile(r"^libomp\.(so|dylib)")),
    ("blas", "mkl", re.compile(r"^libmkl_rt\.(so|dylib)")),
    ("blas", "openblas", re.compile(r"^lib(scipy_)?openblas[^/]*\.(so|dylib)")),
)
EXPORT_RE = re.compile(r"""^\s*export\s+([A-Za-z_][A-Za-z0-9_]*)=(?:'([^']*)'|"([^"]*)"|(\S*))\s*$""")


@dataclass(frozen=True)
class NativeLib:
    """A BLAS or OpenMP library file in the env, with the package that put it there."""

    kind: str
    api: str  # what the library is (real_api), whatever its file's name says
    path: str  # relative to the prefix
    realpath: str
    owner: str  # "conda:<package>" | "pip:<dist>" | "unknown"
    named: str = ""  # what the file's name says, where that differs from `api`


@dataclass(frozen=True)
class ActivationVar:
    """A variable's value as activation leaves it, and which file or setting decides it."""

    value: str | None  # None: the variable is unset by activation
    source: str


@dataclass(frozen=True)
class ScriptState:
    """One activation file the env's record asks for: what envkit would write, and what is there."""

    path: str  # relative to the prefix
    expected: str
    current: str | None  # None: missing
    as_written: bool = False  # byte for byte what the record says envkit wrote (an older envkit's text, if not `expected`)
    listed: bool = True  # the record names it among the files envkit wrote (False: this envkit writes one more)


@dataclass(frozen=True)
class Inventory:
    """Everything the rules look at, read once: an env on disk or a plan not yet installed."""

    prefix: Path
    packages: dict[str, CondaPackage]
    pip: dict[str, PipDist]
    libs: tuple[NativeLib, ...]
    activation: dict[str, ActivationVar]
    activation_files: tuple[str, ...]
    numpy_imports_mkl: bool
    record: EnvRecord | None
    cpu_vendor: str | None
    cuda_driver: str | None
    # the lowest compute capability of the GPUs (__cuda_arch): this machine's for an env on it, the
    # ones a plan was solved for (detected or declared) for a plan
    cuda_arch: str | None = None
    envkit_scripts: tuple[ScriptState, ...] = ()
    legacy_record: bool = False
    unreadable: tuple[UnreadableRecord, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    on_this_machine: bool = True  # False for a plan made for another platform: no CPU, no driver to judge
    planned: bool = False  # a plan not yet installed (create, sync, lock), not an env on disk
    # the advice variables in the environment envkit itself runs in (a ~/.bashrc export, a Dockerfile
    # ENV): they reach every process started from there, the env's included
    shell: dict[str, str] = field(default_factory=dict)
    # conda-meta records (and envkit's record) the others who can reach the env cannot read, with
    # the bits they lack
    private_records: tuple[tuple[str, int], ...] = ()
    # toolchain modules in the user site this env's python reads ahead of its own site-packages
    # (`pip install --user`), each "NAME (VERSION) in FOLDER"
    user_site: tuple[str, ...] = ()
    # what `conda env config vars set` stored (conda-meta/state), before envkit's scripts run over it
    conda_vars: dict[str, str] = field(default_factory=dict)
    # what envkit's activation sets (None: unsets), as its record keeps it; `activation` says what
    # wins once every script has run
    envkit_settings: dict[str, str | None] = field(default_factory=dict)
    # Jupyter kernelspecs whose kernel is this env's python, started without activation
    kernels: tuple[KernelSpec, ...] = ()
    # what envkit's startup files carry from the rest of the activation, as its record keeps it (EK037)
    carried: dict[str, str] = field(default_factory=dict)
    # the env has a python, whose site-packages can hold envkit's startup files
    startup_site: bool = False

    def advice_setting(self, name: str) -> tuple[str, str] | None:
        """(value, where it comes from) of a variable the env's processes will see: its activation
        (envkit's, a script, conda's env vars) first, else the shell envkit runs in."""
        var = self.activation.get(name)
        if var is not None:
            return None if var.value is None else (var.value, var.source)
        if name in self.shell:
            return self.shell[name], "the environment envkit runs in (a shell profile, a Dockerfile ENV, the job)"
        return None

    def setting(self, name: str) -> str | None:
        var = self.activation.get(name)
        return var.value if var else None

    def torch_source(self) -> str | None:
        """'pip', 'pytorch-channel', 'conda-forge', 'conda' or None."""
        if "torch" in self.pip and self.pip["torch"].installer == "pip":
            return "pip"
        pkg = self.packages.get("pytorch")
        if pkg is None:
            return "pip" if "torch" in self.pip else None
        if pkg.channel_name == "pytorch":
            return "pytorch-channel"
        if pkg.channel_name == "conda-forge":
            return "conda-forge"
        return "conda"


def _candidate_lib_paths(prefix: Path) -> list[Path]:
    found: list[Path] = []
    for pattern in ("lib/lib*.so*", "lib/lib*.dylib"):
        found.extend(prefix.glob(pattern))
    for site in site_packages(prefix):
        for pattern in ("*/lib/lib*.so*", "*.libs/lib*.so*", "*/.dylibs/lib*.dylib", "*/lib/*.dylib"):
            found.extend(site.glob(pattern))
    return found


def _owner(rel: str, pip: dict[str, PipDist], conda: dict[str, str]) -> str:
    """`pip:<dist>` for a wheel's file, `conda:<package>` for a file a conda record lists."""
    parts = rel.split("/")
    if "site-packages" in parts:
        idx = parts.index("site-packages")
        top = parts[idx + 1] if len(parts) > idx + 1 else ""
        top = top[: -len(".libs")] if top.endswith(".libs") else top
        for dist in pip.values():
            if (top in dist.top_level or top == dist.name.replace("-", "_")) and dist.installer == "pip":
                return f"pip:{dist.name}"
    else:
        for dist in pip.values():
            if rel in dist.outside_files:
                return f"pip:{dist.name}"
    return f"conda:{conda[rel]}" if rel in conda else "unknown"


# The OpenMP runtimes' own version strings (kmp_version.cpp in LLVM's and Intel's sources): a copy
# of LLVM's or Intel's runtime under GNU's name says what it is there.
OPENMP_MARKERS = ((b"Intel(R) OMP", "libiomp5"), (b"LLVM OMP", "libomp"))
MARKED_AT_MOST = 16 << 20  # a runtime is a few MiB; a larger file is not read through


def real_api(kind: str, named: str, real: str) -> str:
    """What a BLAS or OpenMP library file is: by the name of the file a link leads to (conda-forge's
    _openmp_mutex *_llvm makes libgomp.so.1 a link to libomp.so), and for a file under GNU
    OpenMP's name, by the version string it carries (LLVM's runtime copied as libgomp.so.1)."""
    base = os.path.basename(real).lower()
    found = next((api for k, api, pattern in NATIVE_PATTERNS if k == kind and pattern.match(base)), named)
    if found != "libgomp":
        return found
    try:
        if os.path.getsize(real) > MARKED_AT_MOST:
            return found
        data = Path(real).read_bytes()
    except OSError:
        return found
    return next((api for marker, api in OPENMP_MARKERS if marker in data), found)


def _read_libs(prefix: Path, pip: dict[str, PipDist], packages: dict[str, CondaPackage]) -> tuple[NativeLib, ...]:
    conda = {rel: pkg.name for pkg in packages.values() for rel in pkg.libraries}
    out = []
    seen = set()
    for path in _candidate_lib_paths(prefix):
        base = path.name.lower()
        for kind, api, pattern in NATIVE_PATTERNS:
            if pattern.match(base):
                rel = str(path.relative_to(prefix))
                if rel in seen:
                    break
                seen.add(rel)
                real = os.path.realpath(path)
                what = real_api(kind, api, real)
                out.append(NativeLib(kind, what, rel, real, _owner(rel, pip, conda), api if what != api else ""))
                break
    return tuple(sorted(out, key=lambda lib: lib.path))


# radon cc 21: conda's activation order has four sources (env_vars.d, state, activate.d, envkit's record); one branch each
def _read_activation(
    prefix: Path, record: EnvRecord | None, conda: dict[str, tuple[str, str]]
) -> tuple[dict[str, ActivationVar], tuple[str, ...], dict[str, str | None]]:
    """Variables the env's activation sets, in the order conda applies them: its env vars
    (`conda`: packages' env_vars.d, then conda-meta/state), then activate.d's scripts in name
    order, where envkit's own script stands for the settings its record keeps. Also returns those
    settings."""
    out: dict[str, ActivationVar] = {}
    files: list[str] = []
    for name, (value, source) in conda.items():
        out[name] = ActivationVar(value, source)
    envkit: dict[str, str | None] = {}
    if record is not None:
        from envkit.activation.writer import recorded_activation

        for op in recorded_activation(prefix, record).ops:
            if op.action in ("set", "unset"):
                envkit[op.name] = op.value if op.action == "set" else None
    own = f"{FILE_PREFIX}{record.recipe.name}.sh" if record is not None and record.recipe is not None else None
    applied = False
    folder = prefix / "etc" / "conda" / "activate.d"
    for path in sorted(folder.glob("*.sh")) if folder.is_dir() else []:
        rel = str(path.relative_to(prefix))
        files.append(rel)
        if path.name.startswith(FILE_PREFIX) and record is not None:
            if path.name == own:
                out.update({name: ActivationVar(value, "envkit") for name, value in envkit.items()})
                applied = True
            continue
        for line in path.read_text(errors="replace").splitlines():
            m = EXPORT_RE.match(line)
            if m:
                value = next((g for g in m.groups()[1:] if g is not None), "")
                out[m.group(1)] = ActivationVar(value, rel)
    if not applied:  # its script is missing or renamed (EK014 says so): what the record asks for
        out.update({name: ActivationVar(value, "envkit") for name, value in envkit.items()})
    return out, tuple(files), envkit


def read_activation(prefix: Path, record: EnvRecord | None) -> dict[str, ActivationVar]:
    """What the env's activation sets, and where each value comes from, as the audit reads it."""
    return _read_activation(prefix, record, conda_activation_vars(prefix))[0]


def carried_values(activation: dict[str, ActivationVar]) -> dict[str, str]:
    """The threading values the env's activation sets from outside envkit's settings (conda's env
    vars, other activate.d scripts): a python started without activation has them only if envkit's
    startup files carry them (envkit.activation.startup)."""
    return {
        name: var.value
        for name, var in sorted(activation.items())
        if var.value is not None and var.source != "envkit" and carried_name(name)
    }


def _numpy_imports_mkl(prefix: Path) -> bool:
    for site in site_packages(prefix):
        init = site / "numpy" / "_distributor_init.py"
        if init.is_file() and re.search(r"^\s*import mkl\b", init.read_text(errors="replace"), re.M):
            return True
    return False


def _cpu_vendor() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cuda_driver_version() -> str | None:
    """The driver's maximum CUDA as conda sees it (__cuda); CONDA_OVERRIDE_CUDA wins."""
    if "CONDA_OVERRIDE_CUDA" in os.environ:
        return os.environ["CONDA_OVERRIDE_CUDA"] or None
    return _detected("__cuda")


def cuda_arch_version() -> str | None:
    """The lowest compute capability of this machine's GPUs as conda sees it (__cuda_arch, CEP 46:
    none without __cuda; rattler's detection honours CONDA_OVERRIDE_CUDA and _ARCH)."""
    return _detected("__cuda_arch")


def _detected(wanted: str) -> str | None:
    from envkit.solve import backend  # rattler: only when the driver is actually asked for

    try:
        detected = backend.virtual_packages(backend.native_platform())
    except Exception:  # detection must never break an audit
        return None
    for name_version in map(backend.describe_virtual, detected):
        name, _, version = name_version.partition("=")
        if name == wanted:
            return version
    return None


def _envkit_scripts(prefix: Path, record: EnvRecord | None) -> tuple[ScriptState, ...]:
    if record is None:
        return ()
    from envkit.activation.writer import recorded_activation, text_sha256  # renders scripts: envkit's envs only

    written = (record.activation.sha256 if record.activation else None) or {}
    listed = record.activation.files if record.activation else None
    out = []
    for f in recorded_activation(prefix, record).files(prefix):
        path = str(f.path.relative_to(prefix))
        current = read_exact(f.path)
        as_written = current is not None and written.get(path) == text_sha256(current)
        out.append(ScriptState(path, f.text, current, as_written, listed is None or path in listed))
    return tuple(out)


def plan_inventory(
    prefix: Path,
    packages: list[CondaPackage],
    pip_names: list[str],
    activation: tuple[EnvOp, ...],
    *,
    cuda_driver: str | None = None,
    cuda_arch: str | None = None,
    machine: bool = True,
) -> Inventory:
    """What an env will be, before anything is installed: the solved packages, the pip names the
    recipe asks for, and the activation envkit will write. Files are not known yet, so rules that
    read files on disk have nothing to say at this moment; the rest judge the plan as they would
    judge the env."""
    pip = {name: PipDist(name, "", "pip", "", (name.replace("-", "_"),), ()) for name in pip_names}
    settings: dict[str, ActivationVar] = {}
    for op in activation:
        if op.action == "set":
            settings[op.name] = ActivationVar(op.value, "envkit (planned)")
        elif op.action == "unset":
            settings[op.name] = ActivationVar(None, "envkit (planned)")
    return Inventory(
        prefix=prefix,
        packages={p.name: p for p in packages},
        pip=pip,
        libs=(),
        activation=settings,
        activation_files=(),
        numpy_imports_mkl=False,
        record=None,
        cpu_vendor=_cpu_vendor() if machine else None,
        cuda_driver=cuda_driver,
        cuda_arch=cuda_arch,
        on_this_machine=machine,
        planned=True,
    )


# Variables the write-ups users copy recommend: the audit knows what each really does (EK025-EK029).
ADVICE_VARS = (
    "OMP_NUM_THREADS",
    "MKL_SERIAL",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_DEBUG_CPU_TYPE",
    "NCCL_P2P_DISABLE",
    "NCCL_IB_DISABLE",
    "KMP_AFFINITY",
    "PYTHONNOUSERSITE",
)

USER_SITE_MODULES = ("numpy", "scipy", "torch", "mkl", "threadpoolctl")  # the probe's `origin` check looks for the same


def user_site_modules(prefix: Path) -> tuple[str, ...]:
    """What `pip install --user` put where this env's python looks first: the user site of its
    Python version (PEP 370: $PYTHONUSERBASE, else ~/.local), unless the python is a venv that
    keeps the user site off. Whether PYTHONNOUSERSITE keeps it off is the rule's to weigh."""
    versions = [site.parent.name for site in site_packages(prefix)]  # the env python's own, where it says which
    if not versions:
        return ()
    cfg = prefix / "pyvenv.cfg"
    with contextlib.suppress(OSError):
        if cfg.is_file() and re.search(
            r"^include-system-site-packages\s*=\s*false", cfg.read_text(errors="replace"), re.MULTILINE | re.IGNORECASE
        ):
            return ()
    base = os.environ.get("PYTHONUSERBASE") or os.path.join(os.path.expanduser("~"), ".local")
    site = Path(base) / "lib" / versions[-1] / "site-packages"
    try:
        names = os.listdir(site)
    except OSError:
        return ()
    found = []
    for mod in USER_SITE_MODULES:
        if mod in names or f"{mod}.py" in names:
            versions_seen = sorted(
                n[len(mod) + 1 : -len(".dist-info")] for n in names if n.startswith(f"{mod}-") and n.endswith(".dist-info")
            )
            found.append(f"{mod}{f' {versions_seen[-1]}' if versions_seen else ''} in {site}")
    return tuple(found)


def _bits_granted(folder: Path) -> int:
    """The read bits (group, others) that those who may enter every directory down to `folder` and
    list it expect of the files in it."""
    try:
        folder = folder.absolute()
        modes = [folder.stat().st_mode, *(d.stat().st_mode for d in folder.parents)]
    except OSError:
        return 0
    wanted = 0
    if modes[0] & stat.S_IRGRP and all(m & (stat.S_IXGRP | stat.S_IXOTH) for m in modes):
        wanted |= stat.S_IRGRP
    if modes[0] & stat.S_IROTH and all(m & stat.S_IXOTH for m in modes):
        wanted |= stat.S_IROTH
    return wanted


def private_records(prefix: Path) -> tuple[tuple[str, int], ...]:
    """Package records, and envkit's own record, missing read bits that the env's directories
    grant: group or others who can reach them cannot read them. rattler writes package records
    0600 (prefix-dev/pixi#4284), and envkit wrote its record 0600 until it set its writes right;
    conda creates files under the umask. ACLs are not looked at."""
    out = []
    for folder, files in (
        (prefix / "conda-meta", sorted((prefix / "conda-meta").glob("*.json"))),
        (record_path(prefix).parent, [record_path(prefix)]),
    ):
        wanted = _bits_granted(folder)
        if not wanted:
            continue
        for path in files:
            try:
                lacking = wanted & ~path.stat().st_mode
            except OSError:
                continue
            if lacking:
                out.append((str(path.relative_to(prefix)), lacking))
    return tuple(out)


def read_inventory(
    prefix: Path,
    *,
    cpu_vendor: str | None = None,
    cuda_driver: str | None = None,
    cuda_arch: str | None = None,
    kernels: tuple[KernelSpec, ...] | None = None,
) -> Inventory:
    """`kernels`: every kernelspec Jupyter finds (envkit.prefix.kernels.installed_kernels), read once for
    an audit of many envs; None: looked up for this one."""
    from envkit.activation.writer import recorded_activation
    from envkit.prefix.kernels import env_kernels, kernels_of  # an env on disk only: plans have no kernels

    try:
        record = read_record(prefix)
    except RecordDenied:  # the rest can still be audited; EK030 says why and who can fix it
        record = None
    pip = pip_dists(prefix)
    conda = conda_activation_vars(prefix)
    activation, files, envkit_settings = _read_activation(prefix, record, conda)
    packages, unreadable = read_conda_meta(prefix)
    return Inventory(
        prefix=prefix,
        packages=packages,
        pip=pip,
        libs=_read_libs(prefix, pip, packages),
        activation=activation,
        activation_files=files,
        numpy_imports_mkl=_numpy_imports_mkl(prefix),
        record=record,
        cpu_vendor=cpu_vendor if cpu_vendor is not None else _cpu_vendor(),
        cuda_driver=cuda_driver,
        cuda_arch=cuda_arch,
        envkit_scripts=_envkit_scripts(prefix, record),
        conda_vars={name: value for name, (value, source) in conda.items() if source == STATE},
        envkit_settings=envkit_settings,
        legacy_record=legacy_record_path(prefix).is_file(),
        unreadable=unreadable,
        shell={name: os.environ[name] for name in ADVICE_VARS if name in os.environ},
        private_records=private_records(prefix),
        user_site=user_site_modules(prefix),
        kernels=env_kernels(prefix) if kernels is None else kernels_of(prefix, kernels),
        carried=dict(recorded_activation(prefix, record).carried) if record is not None else {},
        startup_site=site_dir(prefix) is not None,
    )
