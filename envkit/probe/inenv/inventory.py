"""Which BLAS and OpenMP libraries a process has loaded, asked of the libraries themselves
(observed in a child, after its imports), and the `runtimes` check made of that observation."""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import os
import re
import sys
from typing import Any

from .report import Check, check, excerpt

KINDS = [
    ("blas", "mkl", r"^libmkl_rt\."),
    ("blas", "openblas", r"^lib(scipy_)?openblas"),
    ("blas", "blis", r"^libblis\."),
    ("blas", "flexiblas", r"^libflexiblas\."),
    ("openmp", "libgomp", r"^libgomp(-[0-9a-f]+)?\."),
    ("openmp", "libiomp5", r"^libiomp5(md)?\."),
    ("openmp", "libomp", r"^libomp\."),
    ("blas", "libblas", r"^lib(c)?blas\.so"),  # the libblas build's: OpenBLAS, MKL or BLIS (its identity says)
]
LAYERS = {0: "intel", 1: "sequential", 2: "pgi", 3: "gnu", 4: "tbb", -1: "not specified"}
ENV_VARS = (
    "MKL_THREADING_LAYER",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "KMP_DUPLICATE_LIB_OK",
    "MKL_SERVICE_FORCE_INTEL",
)
TITLE = "BLAS and OpenMP runtimes loaded"
FOREIGN = ("envkit", "rich", "yaml", "rattler")


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except Exception:
        return False


def loaded_paths() -> tuple[list[str], str | None]:
    """Every shared object mapped into this process, and how they were listed (None: not Linux)."""
    if not sys.platform.startswith("linux"):
        return [], None
    paths: list[str] = []

    class DlPhdrInfo(ctypes.Structure):
        _fields_ = [("addr", ctypes.c_void_p), ("name", ctypes.c_char_p), ("phdr", ctypes.c_void_p), ("phnum", ctypes.c_uint16)]

    callback_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(DlPhdrInfo), ctypes.c_size_t, ctypes.c_void_p)

    def visit(info: Any, size: int, data: Any) -> int:
        name = info.contents.name
        if name:
            paths.append(name.decode("utf-8", "replace"))
        return 0

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.dl_iterate_phdr(callback_type(visit), None)
        return sorted(set(paths)), "dl_iterate_phdr"
    except Exception:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].strip().startswith("/"):
                    paths.append(parts[5].strip())
        return sorted(set(paths)), "/proc/self/maps"


def _symbol(lib: Any, names: list[str]) -> Any:
    for name in names:
        try:
            return getattr(lib, name)
        except AttributeError:
            continue
    return None


# A file name says what a library was called, not what it is: conda-forge's _openmp_mutex *_llvm
# puts LLVM's libomp behind the name libgomp.so.1, and libblas.so.3 is OpenBLAS, MKL or BLIS by
# the libblas build. What a library exports, and the version string it carries, say what it is.
OPENMP_MARKERS = ((b"Intel(R) OMP", "intel-openmp"), (b"LLVM OMP", "llvm-openmp"))
IDENTITY_OF_NAME = {
    "libgomp": "gnu-openmp",
    "libomp": "llvm-openmp",
    "libiomp5": "intel-openmp",
    "mkl": "mkl",
    "openblas": "openblas",
    "blis": "blis",
    "flexiblas": "flexiblas",
}
BLAS_SYMBOLS = (
    ("mkl", ["MKL_Get_Version_String"]),
    ("openblas", ["openblas_get_config", "openblas_get_config64_", "scipy_openblas_get_config64_", "scipy_openblas_get_config"]),
    ("blis", ["bli_info_get_version_str"]),
    ("flexiblas", ["flexiblas_current_backend"]),
)


def _marked(path: str, markers: tuple[tuple[bytes, str], ...]) -> str | None:
    """The first marker's name whose bytes the file holds (read in 1 MiB pieces, overlapping)."""
    try:
        with open(path, "rb") as fh:
            tail = b""
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    return None
                window = tail + chunk
                for needle, name in markers:
                    if needle in window:
                        return name
                tail = window[-32:]
    except OSError:
        return None


def identity(kind: str, lib: Any, realpath: str) -> str:
    """What a loaded BLAS or OpenMP library really is (see OPENMP_MARKERS)."""
    if kind == "openmp":
        if _symbol(lib, ["__kmpc_fork_call"]) is None:  # the KMP entry point LLVM's and Intel's runtimes share
            return "gnu-openmp" if _symbol(lib, ["GOMP_parallel", "GOMP_parallel_start"]) is not None else "unknown"
        return _marked(realpath, OPENMP_MARKERS) or "llvm-openmp"
    for name, symbols in BLAS_SYMBOLS:
        if _symbol(lib, symbols) is not None:
            return name
    return "reference" if _symbol(lib, ["dgemm_", "cblas_dgemm"]) is not None else "unknown"


def what_it_is(lib: dict[str, Any]) -> str:
    """A library's identity; its name's where it could not be asked (it failed to open)."""
    return str(lib.get("identity") or IDENTITY_OF_NAME.get(lib["api"], lib["api"]))


def describe(kind: str, api: str, path: str) -> dict[str, Any]:
    """Ask an already-loaded library for its threads and layer (RTLD_NOLOAD: never load it here)."""
    entry: dict[str, Any] = {"kind": kind, "api": api, "path": path, "realpath": os.path.realpath(path)}
    try:
        lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 4) | ctypes.RTLD_GLOBAL)
    except OSError as exc:
        entry["error"] = str(exc)
        return entry
    entry["identity"] = identity(kind, lib, entry["realpath"])
    if api == "mkl":
        f = _symbol(lib, ["MKL_Get_Max_Threads"])
        if f:
            entry["num_threads"] = f()
        f = _symbol(lib, ["MKL_Set_Threading_Layer"])
        if f:  # an invalid layer (-1) changes nothing and returns the one in effect (threadpoolctl's trick)
            f.restype = ctypes.c_int
            entry["threading_layer"] = LAYERS.get(f(-1), "unknown")
        f = _symbol(lib, ["MKL_Get_Version_String"])
        if f:
            buf = ctypes.create_string_buffer(200)
            f(buf, 200)
            entry["version"] = buf.value.decode("utf-8", "replace").strip()
    elif api == "openblas":
        for pre in ("", "scipy_"):
            for suf in ("", "64_", "_64"):
                g = _symbol(lib, [pre + "openblas_get_num_threads" + suf])
                if g:
                    entry["num_threads"] = g()
                    p = _symbol(lib, [pre + "openblas_get_parallel" + suf])
                    if p:
                        entry["threading_layer"] = {0: "disabled", 1: "pthreads", 2: "openmp"}.get(p(), "unknown")
                    break
            if "num_threads" in entry:
                break
    elif kind == "openmp":
        f = _symbol(lib, ["omp_get_max_threads"])
        if f:
            entry["num_threads"] = f()
    return entry


def classify(path: str) -> tuple[str, str] | None:
    """By the name loaded, else by the file it links to (libblas.so.3 -> libopenblasp-r0.3.so)."""
    for name in (path, os.path.realpath(path)):
        base = os.path.basename(name).lower()
        for kind, api, pattern in KINDS:
            if re.match(pattern, base):
                return kind, api
    return None


def collect(imported: list[str]) -> dict[str, Any]:
    """What this process has loaded after importing `imported` (run in the child, after the imports)."""
    paths, listing = loaded_paths()
    libs = []
    for path in paths:
        found = classify(path)
        if found:
            libs.append(describe(found[0], found[1], path))
    out: dict[str, Any] = {
        "imported": imported,
        "libraries": libs,
        "listing": listing,
        "platform": sys.platform,
        "env": {k: os.environ.get(k) for k in ENV_VARS},
        "sys_path": list(sys.path),
        # envkit and its dependencies must not be importable in the env by accident
        "foreign_importable": [m for m in FOREIGN if _importable(m)],
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            out["torch_threads"] = torch.get_num_threads()
            out["torch_version"] = torch.__version__
        except Exception:
            pass
    return out


# radon cc 23: one verdict per combination of OpenMP runtimes loaded, as kb.md lists them
def check_runtimes(inv: dict[str, Any], order: list[str]) -> Check:
    r = inv
    if r["returncode"] != 0 or not r.get("data"):
        ev = "timed out" if r.get("timeout") else excerpt(r["stderr"])
        return check("runtimes", TITLE, "fail", ev, "fix the import failure first", {"imported": order}, r["seconds"])
    data = r["data"]
    if "listing" in data and not data["listing"]:
        why = "listing the libraries a process has loaded is implemented for Linux only; this is {}".format(data.get("platform"))
        info = {"imported": order, "torch_threads": data.get("torch_threads"), "env": data.get("env")}
        return check("runtimes", TITLE, "skip", why, "", info, r["seconds"])
    libs = data["libraries"]
    omp: dict[str, dict[str, Any]] = {}
    for lib in libs:
        if lib["kind"] == "openmp":
            omp.setdefault(lib["realpath"], lib)
    # judged by what each library is (identity), not by its file's name
    apis = sorted({lib["api"] for lib in omp.values()})
    kinds = sorted({what_it_is(lib) for lib in omp.values()})
    blas = sorted({what_it_is(lib) for lib in libs if lib["kind"] == "blas"})
    summary = {
        "imported": order,
        "libraries": libs,
        "openmp_runtimes": len(omp),
        "openmp_apis": apis,
        "openmp_identities": kinds,
        "blas": blas,
        "torch_threads": data.get("torch_threads"),
        "env": data.get("env"),
        "sys_path": data.get("sys_path"),
        "foreign_importable": data.get("foreign_importable"),
    }
    mkl = [lib for lib in libs if what_it_is(lib) == "mkl"]
    if mkl:
        summary["mkl_threading_layer"] = mkl[0].get("threading_layer")
    lines = [
        "{} {}{} ({} threads){}".format(
            lib["kind"],
            os.path.basename(lib["path"]),
            " (is {})".format(lib["identity"]) if lib.get("identity") not in (None, IDENTITY_OF_NAME.get(lib["api"])) else "",
            lib.get("num_threads", "?"),
            (", layer " + lib["threading_layer"]) if lib.get("threading_layer") else "",
        )
        for lib in libs
    ]
    evidence = "\n".join(lines) or "no BLAS or OpenMP library loaded"
    if "intel-openmp" in kinds and "llvm-openmp" in kinds:
        remedy = "libiomp5 and libomp in one process crash or deadlock: keep one provider (conda-forge: _openmp_mutex=*=*_llvm and no intel-openmp)"
        return check("runtimes", TITLE, "fail", evidence, remedy, summary, r["seconds"])
    if len(omp) > 1:
        remedy = "more than one OpenMP runtime is loaded; set MKL_THREADING_LAYER=GNU so MKL shares torch's libgomp"
        return check("runtimes", TITLE, "warn", evidence, remedy, summary, r["seconds"])
    if len(blas) > 1:
        remedy = "two BLAS libraries are loaded (often pip numpy over a conda MKL stack)"
        return check("runtimes", TITLE, "warn", evidence, remedy, summary, r["seconds"])
    return check("runtimes", TITLE, "pass", evidence, "", summary, r["seconds"])
