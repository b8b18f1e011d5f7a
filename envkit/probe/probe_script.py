"""envkit probe: runs inside the target env with its own python. Standard library only.

Reads a JSON config on stdin, prints one JSON document on stdout. Every check that needs a fresh
process runs in its own subprocess with a timeout, several at once; the probe never hangs.
"""

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

PROBE_VERSION = 1
PY = sys.executable

# Runs in a fresh interpreter after importing modules: lists BLAS/OpenMP libraries mapped into the
# process (dl_iterate_phdr, /proc/self/maps as fallback) and asks each library for its state.
INVENTORY_SNIPPET = r"""
import ctypes, ctypes.util, json, os, sys
def loaded_paths():
    paths = []
    if sys.platform.startswith("linux"):
        class DlPhdrInfo(ctypes.Structure):
            _fields_ = [("addr", ctypes.c_void_p), ("name", ctypes.c_char_p), ("phdr", ctypes.c_void_p), ("phnum", ctypes.c_uint16)]
        CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(DlPhdrInfo), ctypes.c_size_t, ctypes.c_void_p)
        def cb(info, size, data):
            name = info.contents.name
            if name:
                paths.append(name.decode("utf-8", "replace"))
            return 0
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            libc.dl_iterate_phdr(CB(cb), None)
        except Exception:
            with open("/proc/self/maps") as fh:
                for line in fh:
                    parts = line.split(None, 5)
                    if len(parts) == 6 and parts[5].strip().startswith("/"):
                        paths.append(parts[5].strip())
    return sorted(set(paths))
import re
KINDS = [("blas", "mkl", r"^libmkl_rt\."), ("blas", "openblas", r"^lib(scipy_)?openblas"), ("blas", "blis", r"^libblis\."),
         ("blas", "flexiblas", r"^libflexiblas\."), ("openmp", "libgomp", r"^libgomp(-[0-9a-f]+)?\."), ("openmp", "libiomp5", r"^libiomp5(md)?\."),
         ("openmp", "libomp", r"^libomp\.")]
LAYERS = {0: "intel", 1: "sequential", 2: "pgi", 3: "gnu", 4: "tbb", -1: "not specified"}
def sym(lib, names):
    for n in names:
        try:
            return getattr(lib, n)
        except AttributeError:
            continue
    return None
def describe(kind, api, path):
    entry = {"kind": kind, "api": api, "path": path, "realpath": os.path.realpath(path)}
    try:
        lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 4) | ctypes.RTLD_GLOBAL)
    except OSError as exc:
        entry["error"] = str(exc)
        return entry
    if api == "mkl":
        f = sym(lib, ["MKL_Get_Max_Threads"])
        if f: entry["num_threads"] = f()
        f = sym(lib, ["MKL_Set_Threading_Layer"])
        if f:
            f.restype = ctypes.c_int
            entry["threading_layer"] = LAYERS.get(f(-1), "unknown")
        f = sym(lib, ["MKL_Get_Version_String"])
        if f:
            buf = ctypes.create_string_buffer(200)
            f(buf, 200)
            entry["version"] = buf.value.decode("utf-8", "replace").strip()
    elif api == "openblas":
        for pre in ("", "scipy_"):
            for suf in ("", "64_", "_64"):
                g = sym(lib, [pre + "openblas_get_num_threads" + suf])
                if g:
                    entry["num_threads"] = g()
                    p = sym(lib, [pre + "openblas_get_parallel" + suf])
                    if p: entry["threading_layer"] = {0: "disabled", 1: "pthreads", 2: "openmp"}.get(p(), "unknown")
                    break
            if "num_threads" in entry: break
    elif kind == "openmp":
        f = sym(lib, ["omp_get_max_threads"])
        if f: entry["num_threads"] = f()
    return entry
import importlib
order = json.loads(sys.argv[1])
imported = []
for mod in order:
    importlib.import_module(mod)
    imported.append(mod)
libs = []
for path in loaded_paths():
    base = os.path.basename(path).lower()
    for kind, api, pattern in KINDS:
        if re.match(pattern, base):
            libs.append(describe(kind, api, path))
            break
out = {"imported": imported, "libraries": libs, "env": {k: os.environ.get(k) for k in ("MKL_THREADING_LAYER", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "KMP_DUPLICATE_LIB_OK", "MKL_SERVICE_FORCE_INTEL")}}
try:
    import torch
    out["torch_threads"] = torch.get_num_threads()
    out["torch_version"] = torch.__version__
except Exception:
    pass
print("ENVKIT-JSON:" + json.dumps(out))
"""

NUMERIC_SNIPPET = r"""
import json, random
random.seed(7)
n = 24
a = [[random.uniform(-1, 1) + (n if i == j else 0) for j in range(n)] for i in range(n)]
b = [[random.uniform(-1, 1) for j in range(n)] for i in range(n)]
ref = [[sum(a[i][k] * b[k][j] for k in range(n)) for j in range(n)] for i in range(n)]
out = {}
import numpy as np
A, B = np.array(a), np.array(b)
C = A @ B
out["numpy_matmul_err"] = float(np.max(np.abs(C - np.array(ref))))
x = np.linalg.solve(A, B[:, 0])
out["numpy_solve_residual"] = float(np.max(np.abs(A @ x - B[:, 0])))
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    T = torch.tensor(a, dtype=torch.float64) @ torch.tensor(b, dtype=torch.float64)
    out["torch_vs_numpy_err"] = float(np.max(np.abs(T.numpy() - C)))
print("ENVKIT-JSON:" + json.dumps(out))
"""

GPU_SNIPPET = r"""
import json
import torch
out = {"cuda_available": torch.cuda.is_available(), "cuda_build": torch.version.cuda}
try:
    import torch.distributed as dist
    out["nccl_available"] = bool(dist.is_available() and dist.is_nccl_available())
except Exception:
    out["nccl_available"] = False
if out["cuda_available"]:
    out["device_count"] = torch.cuda.device_count()
    out["devices"] = [torch.cuda.get_device_name(i) for i in range(out["device_count"])]
    out["capability"] = list(torch.cuda.get_device_capability(0))
    x = torch.ones(256, 256, device="cuda")
    out["matmul_ok"] = bool(torch.allclose((x @ x).sum().cpu(), torch.tensor(256.0 * 256 * 256)))
    try:
        out["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:
        pass
    try:
        out["driver_cuda"] = torch._C._cuda_getDriverVersion()
    except Exception:
        pass
print("ENVKIT-JSON:" + json.dumps(out))
"""

# A DDP worker: torch first (as DDP workers do), then the MKL side, then a gloo all_reduce.
GLOO_WORKER = r"""
import os, sys
import torch
import torch.distributed as dist
for extra in sys.argv[1:]:
    __import__(extra)
dist.init_process_group("gloo")
t = torch.ones(4) * (dist.get_rank() + 1)
dist.all_reduce(t)
world = dist.get_world_size()
expected = world * (world + 1) / 2
assert float(t[0]) == expected, (float(t[0]), expected)
dist.destroy_process_group()
print("rank", os.environ.get("RANK"), "ok", float(t[0]))
"""

# The seed scenario's parent: import the MKL side first (as Ultralytics does with numpy/cv2), then
# start children with subprocess.run and the inherited environment, the way the trainer does.
PARENT_SNIPPET = r"""
import json, subprocess, sys
first = json.loads(sys.argv[1]); child_cmd = json.loads(sys.argv[2]); timeout = float(sys.argv[3])
for mod in first:
    __import__(mod)
try:
    p = subprocess.run(child_cmd, capture_output=True, text=True, timeout=timeout)
    print("ENVKIT-JSON:" + json.dumps({"returncode": p.returncode, "stdout": p.stdout[-4000:], "stderr": p.stderr[-4000:]}))
except subprocess.TimeoutExpired as exc:
    print("ENVKIT-JSON:" + json.dumps({"returncode": None, "timeout": True, "stderr": str(exc)}))
"""


def run_py(args, timeout, env=None):
    start = time.monotonic()
    try:
        proc = subprocess.run([PY] + args, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return {"returncode": None, "timeout": True, "stdout": "", "stderr": err[-4000:], "seconds": round(time.monotonic() - start, 2)}
    data = None
    for line in proc.stdout.splitlines():
        if line.startswith("ENVKIT-JSON:"):
            data = json.loads(line[len("ENVKIT-JSON:") :])
    return {
        "returncode": proc.returncode,
        "stdout": proc.stdout[-4000:],
        "stderr": proc.stderr[-4000:],
        "data": data,
        "seconds": round(time.monotonic() - start, 2),
    }


# Lines that name a known toolchain failure; shown first so evidence is the cause, not a traceback.
SIGNATURES = (
    "MKL_THREADING_LAYER",
    "undefined symbol",
    "OMP: Error",
    "Intel MKL FATAL",
    "GLIBCXX_",
    "OpenBLAS Warning",
    "driver on your system is too old",
)


def excerpt(text, limit=800):
    text = (text or "").strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    known = []
    for ln in lines:
        if any(sig in ln for sig in SIGNATURES) and ln.strip() not in known:
            known.append(ln.strip())
    if known:
        return "\n".join(known[:4])[-limit:]
    keep = [ln for ln in lines if "Error" in ln or "error" in ln]
    chosen = "\n".join((keep or lines)[-6:])
    return chosen[-limit:]


def check(cid, title, status, evidence="", remedy="", data=None, seconds=None):
    out = {"id": cid, "title": title, "status": status, "evidence": evidence, "remedy": remedy, "data": data or {}}
    if seconds is not None:
        out["seconds"] = seconds
    return out


def importable(mod):
    import importlib.util

    try:
        return importlib.util.find_spec(mod) is not None
    except Exception:
        return False


def check_import(mod, timeout):
    r = run_py(["-c", "import " + mod], timeout)
    if r["returncode"] == 0:
        return check("import:" + mod, "import " + mod, "pass", seconds=r["seconds"])
    why = "timed out" if r.get("timeout") else excerpt(r["stderr"])
    return check(
        "import:" + mod,
        "import " + mod,
        "fail",
        why,
        "install the package or fix its dependencies; the evidence names the missing piece",
        seconds=r["seconds"],
    )


def check_order(order, timeout):
    code = "; ".join("import " + m for m in order)
    cid = "import-order:" + ",".join(order)
    r = run_py(["-c", code], timeout)
    if r["returncode"] == 0:
        return check(cid, "import " + " then ".join(order), "pass", seconds=r["seconds"])
    ev = "timed out" if r.get("timeout") else excerpt(r["stderr"])
    remedy = (
        "set MKL_THREADING_LAYER=GNU in the env's activation (envkit audit --fix)" if "MKL_THREADING_LAYER" in ev else "see the evidence"
    )
    return check(cid, "import " + " then ".join(order), "fail", ev, remedy, seconds=r["seconds"])


def mkl_side(cfg):
    mods = ["numpy"] if importable("numpy") else []
    if importable("mkl"):
        mods.append("mkl")
    return mods


def check_seed(cfg, timeout):
    """The DDP crash without torch.distributed: parent imports the MKL side, child imports torch first."""
    side = mkl_side(cfg)
    if not importable("torch"):
        return check("ddp-seed", "MKL parent, torch-first children", "skip", "torch is not installed", "")
    child = [PY, "-c", "; ".join(["import torch"] + ["import " + m for m in side])]
    r = run_py(["-c", PARENT_SNIPPET, json.dumps(side), json.dumps(child), str(timeout)], timeout + 10)
    data = r.get("data") or {}
    if r["returncode"] != 0 or data.get("returncode") != 0:
        ev = excerpt(data.get("stderr") or r["stderr"]) or "child failed with no output"
        remedy = (
            "set MKL_THREADING_LAYER=GNU for this env (envkit writes it into etc/conda/activate.d; envkit audit --fix repairs it)"
            if "MKL_THREADING_LAYER" in ev
            else "see the evidence"
        )
        return check(
            "ddp-seed", "MKL parent, torch-first children", "fail", ev, remedy, {"parent_imports": side, "child": child[2]}, r["seconds"]
        )
    return check("ddp-seed", "MKL parent, torch-first children", "pass", "", "", {"parent_imports": side, "child": child[2]}, r["seconds"])


def check_gloo(cfg, timeout):
    if not importable("torch"):
        return check("ddp-gloo", "torch.distributed.run gloo all_reduce", "skip", "torch is not installed")
    if not cfg.get("ddp", True):
        return check("ddp-gloo", "torch.distributed.run gloo all_reduce", "skip", "disabled by the recipe (probe.ddp)")
    nproc = int(cfg.get("nproc", 2))
    side = mkl_side(cfg)
    tmp = tempfile.mkdtemp(prefix="envkit-probe-")
    worker = os.path.join(tmp, "worker.py")
    with open(worker, "w") as fh:
        fh.write(GLOO_WORKER)
    child = [PY, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc_per_node", str(nproc), worker] + side
    r = run_py(["-c", PARENT_SNIPPET, json.dumps(side), json.dumps(child), str(timeout)], timeout + 10)
    data = r.get("data") or {}
    title = "torch.distributed.run --nproc_per_node %d gloo all_reduce" % nproc
    if data.get("returncode") == 0:
        return check(
            "ddp-gloo", title, "pass", data.get("stdout", "").strip()[-300:], "", {"nproc": nproc, "parent_imports": side}, r["seconds"]
        )
    ev = excerpt(data.get("stderr") or r["stderr"]) or ("timed out" if data.get("timeout") else "launcher failed")
    remedy = "set MKL_THREADING_LAYER=GNU for this env (envkit audit --fix)" if "MKL_THREADING_LAYER" in ev else "see the evidence"
    return check("ddp-gloo", title, "fail", ev, remedy, {"nproc": nproc, "parent_imports": side}, r["seconds"])


def inventory(cfg, timeout):
    order = [m for m in ("torch", "numpy", "mkl") if importable(m)]
    order += [m for m in cfg.get("imports", []) if m not in order and m in ("scipy", "sklearn")]
    r = run_py(["-c", INVENTORY_SNIPPET, json.dumps(order)], timeout)
    return r, order


def check_runtimes(inv, order):
    r = inv
    if r["returncode"] != 0 or not r.get("data"):
        ev = "timed out" if r.get("timeout") else excerpt(r["stderr"])
        return check(
            "runtimes", "BLAS and OpenMP runtimes loaded", "fail", ev, "fix the import failure first", {"imported": order}, r["seconds"]
        )
    data = r["data"]
    libs = data["libraries"]
    omp = {}
    for lib in libs:
        if lib["kind"] == "openmp":
            omp.setdefault(lib["realpath"], lib)
    apis = sorted({l["api"] for l in omp.values()})
    blas = sorted({l["api"] for l in libs if l["kind"] == "blas"})
    summary = {
        "imported": order,
        "libraries": libs,
        "openmp_runtimes": len(omp),
        "openmp_apis": apis,
        "blas": blas,
        "torch_threads": data.get("torch_threads"),
        "env": data.get("env"),
    }
    mkl = [l for l in libs if l["api"] == "mkl"]
    if mkl:
        summary["mkl_threading_layer"] = mkl[0].get("threading_layer")
    lines = [
        "%s %s (%s threads)%s"
        % (
            l["kind"],
            os.path.basename(l["path"]),
            l.get("num_threads", "?"),
            (", layer " + l["threading_layer"]) if l.get("threading_layer") else "",
        )
        for l in libs
    ]
    evidence = "\n".join(lines) or "no BLAS or OpenMP library loaded"
    if "libiomp5" in apis and "libomp" in apis:
        return check(
            "runtimes",
            "BLAS and OpenMP runtimes loaded",
            "fail",
            evidence,
            "libiomp5 and libomp in one process crash or deadlock: keep one provider (conda-forge: _openmp_mutex=*=*_llvm and no intel-openmp)",
            summary,
            r["seconds"],
        )
    if len(omp) > 1:
        return check(
            "runtimes",
            "BLAS and OpenMP runtimes loaded",
            "warn",
            evidence,
            "more than one OpenMP runtime is loaded; set MKL_THREADING_LAYER=GNU so MKL shares torch's libgomp",
            summary,
            r["seconds"],
        )
    if len(blas) > 1:
        return check(
            "runtimes",
            "BLAS and OpenMP runtimes loaded",
            "warn",
            evidence,
            "two BLAS libraries are loaded (often pip numpy over a conda MKL stack)",
            summary,
            r["seconds"],
        )
    return check("runtimes", "BLAS and OpenMP runtimes loaded", "pass", evidence, "", summary, r["seconds"])


def check_numeric(timeout):
    if not importable("numpy"):
        return check("numeric", "numeric sanity", "skip", "numpy is not installed")
    r = run_py(["-c", NUMERIC_SNIPPET], timeout)
    data = r.get("data")
    if r["returncode"] != 0 or not data:
        return check(
            "numeric",
            "numeric sanity",
            "fail",
            "timed out" if r.get("timeout") else excerpt(r["stderr"]),
            "fix the import failure first",
            seconds=r["seconds"],
        )
    bad = {k: v for k, v in data.items() if v > 1e-8}
    ev = ", ".join("%s=%.2e" % (k, v) for k, v in sorted(data.items()))
    if bad:
        return check(
            "numeric",
            "numeric sanity",
            "fail",
            ev,
            "BLAS returns wrong results: mixed BLAS copies or a bad MKL_INTERFACE_LAYER are the usual causes",
            data,
            r["seconds"],
        )
    return check("numeric", "numeric sanity (matmul, solve, numpy vs torch)", "pass", ev, "", data, r["seconds"])


def check_threads(cfg, runtimes):
    data = runtimes.get("data") or {}
    env = data.get("env") or {}
    expected = cfg.get("threading", {})
    problems = []
    for var, want in sorted(expected.items()):
        have = os.environ.get(var)
        if have != want:
            problems.append("%s is %r, the recipe sets %r" % (var, have, want))
    nproc = int(cfg.get("nproc", 2)) if cfg.get("ddp", True) else 1
    cpus = os.cpu_count() or 1
    per_rank = data.get("torch_threads") or 1
    evidence = "OMP_NUM_THREADS=%s MKL_NUM_THREADS=%s torch threads=%s, %d ranks on %d CPUs" % (
        env.get("OMP_NUM_THREADS"),
        env.get("MKL_NUM_THREADS"),
        data.get("torch_threads"),
        nproc,
        cpus,
    )
    info = {"expected": expected, "torch_threads": data.get("torch_threads"), "cpus": cpus, "nproc": nproc}
    if problems:
        return check(
            "threads",
            "thread settings in effect",
            "fail",
            "; ".join(problems),
            "activate the env (conda activate / envkit run) or run envkit audit --fix",
            info,
        )
    if nproc > 1 and per_rank * nproc > cpus:
        return check(
            "threads",
            "thread settings in effect",
            "warn",
            evidence + ": %d x %d threads oversubscribe the CPU" % (nproc, per_rank),
            "set threading.omp_num_threads to about physical cores / ranks",
            info,
        )
    return check("threads", "thread settings in effect", "pass", evidence, "", info)


def check_gpu(timeout):
    if not importable("torch"):
        return check("gpu", "CUDA, devices, NCCL", "skip", "torch is not installed")
    r = run_py(["-c", GPU_SNIPPET], timeout)
    data = r.get("data")
    if r["returncode"] != 0 or not data:
        return check("gpu", "CUDA, devices, NCCL", "fail", excerpt(r["stderr"]), "see the evidence", seconds=r["seconds"])
    if not data.get("cuda_build"):
        return check("gpu", "CUDA, devices, NCCL", "skip", "torch is a CPU build", "", data, r["seconds"])
    if not data.get("cuda_available"):
        return check(
            "gpu",
            "CUDA, devices, NCCL",
            "warn",
            "CUDA %s build but no usable GPU (no device, or the driver is older than the build)" % data.get("cuda_build"),
            "run on a GPU node, or install a build for the driver's CUDA version",
            data,
            r["seconds"],
        )
    ev = "%d device(s): %s; CUDA build %s; NCCL %s" % (
        data["device_count"],
        ", ".join(data.get("devices", [])),
        data.get("cuda_build"),
        data.get("nccl_version", "unavailable"),
    )
    status = "pass" if data.get("matmul_ok") and data.get("nccl_available") else "warn"
    remedy = "" if status == "pass" else "NCCL is missing or a GPU matmul failed: multi-GPU DDP will not work"
    return check("gpu", "CUDA, devices, NCCL", status, ev, remedy, data, r["seconds"])


def check_expect(cfg, runtimes_result):
    expect = cfg.get("expect") or {}
    if not expect:
        return check("expect", "recipe expectations", "skip", "the recipe states no probe.expect")
    summary = runtimes_result.get("data") or {}
    if runtimes_result["status"] == "fail" and not summary.get("libraries"):
        return check("expect", "recipe expectations", "fail", "the runtime inventory failed", "fix the runtimes check first")
    problems, seen = [], []
    if "blas" in expect:
        have = summary.get("blas", [])
        seen.append("blas=%s" % ",".join(have))
        if have != [expect["blas"]]:
            problems.append("blas: expected %s, loaded %s" % (expect["blas"], ",".join(have) or "none"))
    if "openmp_runtimes" in expect:
        seen.append("openmp_runtimes=%s" % summary.get("openmp_runtimes"))
        if summary.get("openmp_runtimes") != expect["openmp_runtimes"]:
            problems.append(
                "openmp_runtimes: expected %s, found %s (%s)"
                % (expect["openmp_runtimes"], summary.get("openmp_runtimes"), ",".join(summary.get("openmp_apis", [])))
            )
    if "mkl_threading_layer" in expect:
        seen.append("mkl_threading_layer=%s" % summary.get("mkl_threading_layer"))
        if summary.get("mkl_threading_layer") != expect["mkl_threading_layer"]:
            problems.append(
                "mkl_threading_layer: expected %s, MKL reports %s" % (expect["mkl_threading_layer"], summary.get("mkl_threading_layer"))
            )
    if "torch_threads" in expect:
        seen.append("torch_threads=%s" % summary.get("torch_threads"))
        if summary.get("torch_threads") != expect["torch_threads"]:
            problems.append("torch_threads: expected %s, got %s" % (expect["torch_threads"], summary.get("torch_threads")))
    if problems:
        return check(
            "expect",
            "recipe expectations",
            "fail",
            "; ".join(problems),
            "the env does not match its recipe; recreate it or fix the recipe",
            {"expect": expect},
        )
    return check("expect", "recipe expectations", "pass", ", ".join(seen), "", {"expect": expect})


def main():
    cfg = json.loads(sys.stdin.read() or "{}")
    timeout = float(cfg.get("timeout", 120))
    started = time.monotonic()
    imports = [m for m in cfg.get("imports", [])]
    orders = [list(o) for o in cfg.get("import_orders", [])]
    with ThreadPoolExecutor(max_workers=max(2, min(8, (os.cpu_count() or 2) * 2))) as pool:
        fut_imports = [pool.submit(check_import, m, timeout) for m in imports]
        fut_orders = [pool.submit(check_order, o, timeout) for o in orders]
        fut_seed = pool.submit(check_seed, cfg, timeout)
        fut_gloo = pool.submit(check_gloo, cfg, timeout)
        fut_inv = pool.submit(inventory, cfg, timeout)
        fut_num = pool.submit(check_numeric, timeout)
        fut_gpu = pool.submit(check_gpu, timeout)
        checks = [f.result() for f in fut_imports] + [f.result() for f in fut_orders]
        checks.append(fut_seed.result())
        checks.append(fut_gloo.result())
        inv, order = fut_inv.result()
        runtimes = check_runtimes(inv, order)
        checks.append(runtimes)
        checks.append(fut_num.result())
        checks.append(check_threads(cfg, inv))
        checks.append(fut_gpu.result())
        checks.append(check_expect(cfg, runtimes))
    doc = {
        "envkit_probe": PROBE_VERSION,
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "prefix": sys.prefix,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "seconds": round(time.monotonic() - started, 2),
        "checks": checks,
    }
    sys.stdout.write(json.dumps(doc) + "\n")


if __name__ == "__main__":
    main()
