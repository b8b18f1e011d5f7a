"""envkit probe: runs inside the target env with its own python. Standard library only.

Reads a JSON config on stdin, prints one JSON document on stdout. Every check that needs a fresh
process runs in its own subprocess with a timeout, several at once; the probe never hangs.
"""

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

PROBE_VERSION = 1
PY = sys.executable

# Runs in a fresh interpreter after importing modules: lists BLAS/OpenMP libraries mapped into the
# process (dl_iterate_phdr, /proc/self/maps as fallback) and asks each library for its state.
# One write per report line: a line shorter than PIPE_BUF cannot be split by other writers of the
# same pipe (the DDP ranks write to it while the observations run in a thread).
REPORT_FN = r"""
import json as _json, sys as _sys
def report(tag, value):
    _sys.stdout.write("ENVKIT-" + tag + ":" + _json.dumps(value) + "\n")
    _sys.stdout.flush()
"""

INVENTORY_SNIPPET = r"""
import ctypes, ctypes.util, json, os, sys
LISTING = None
def loaded_paths():
    global LISTING
    paths = []
    if sys.platform.startswith("linux"):
        LISTING = "dl_iterate_phdr"
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
            LISTING = "/proc/self/maps"
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
out = {"imported": imported, "libraries": libs, "listing": LISTING, "platform": sys.platform, "env": {k: os.environ.get(k) for k in ("MKL_THREADING_LAYER", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "KMP_DUPLICATE_LIB_OK", "MKL_SERVICE_FORCE_INTEL")}}
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
report("NUMERIC", out)
"""

GPU_SNIPPET = r"""
import ctypes, json, os
import torch
out = {"cuda_build": torch.version.cuda, "torch_version": torch.__version__, "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
# The driver is asked directly (not through torch) so that an unusable GPU can be explained:
# no driver, a driver older than the build, or devices hidden by CUDA_VISIBLE_DEVICES.
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    out["driver_error"] = str(exc)
else:
    def cu_name(rc):
        name = ctypes.c_char_p()
        if cu.cuGetErrorName(rc, ctypes.byref(name)) == 0 and name.value:
            return name.value.decode()
        return "CUresult %d" % rc
    version = ctypes.c_int()
    if cu.cuDriverGetVersion(ctypes.byref(version)) == 0:
        out["driver_cuda"] = "%d.%d" % (version.value // 1000, version.value % 1000 // 10)
    rc = cu.cuInit(0)
    out["cu_init"] = "CUDA_SUCCESS" if rc == 0 else cu_name(rc)
    if rc == 0:
        count = ctypes.c_int()
        if cu.cuDeviceGetCount(ctypes.byref(count)) == 0:
            out["driver_devices"] = count.value
out["cuda_available"] = bool(out["cuda_build"]) and torch.cuda.is_available()
try:
    import torch.distributed as dist
    out["nccl_available"] = bool(dist.is_available() and dist.is_nccl_available())
except Exception:
    dist = None
    out["nccl_available"] = False
if out["cuda_available"]:
    out["device_count"] = torch.cuda.device_count()
    out["devices"] = [torch.cuda.get_device_name(i) for i in range(out["device_count"])]
    out["capability"] = list(torch.cuda.get_device_capability(0))
    out["arch_list"] = torch.cuda.get_arch_list()
    gen = torch.Generator().manual_seed(11)
    a, b = torch.randn(512, 512, generator=gen, dtype=torch.float64), torch.randn(512, 512, generator=gen, dtype=torch.float64)
    ref = a @ b
    got = (a.float().cuda() @ b.float().cuda()).double().cpu()
    out["matmul_rel_err"] = float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))
    try:
        out["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:
        pass
    if out["nccl_available"]:
        # One rank on one GPU: proves NCCL loads, builds a communicator and reduces on this driver.
        try:
            dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
            t = torch.full((1024,), 3.0, device="cuda")
            dist.all_reduce(t)
            torch.cuda.synchronize()
            out["nccl_all_reduce"] = "ok" if float(t[0]) == 3.0 else "wrong result %r" % float(t[0])
            dist.destroy_process_group()
        except Exception as exc:
            out["nccl_all_reduce"] = repr(exc)[:500]
report("GPU", out)
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
threads = "threads=%d OMP_NUM_THREADS=%s" % (torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS"))
sys.stdout.write("rank %s ok %s %s\n" % (os.environ.get("RANK"), float(t[0]), threads))  # one write: ranks share the pipe
sys.stdout.flush()
"""

# Kills a child and everything below it. A process group is not enough: torchrun starts each rank
# with start_new_session=True, and an orphaned rank would keep the pipes open (and the CPU busy).
KILL_TREE = r"""
import os as _os, signal as _signal
def kill_tree(pid):
    below = {}
    try:
        for entry in _os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open("/proc/%s/stat" % entry) as fh:
                        ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                below.setdefault(ppid, []).append(int(entry))
    except OSError:
        pass
    victims = [pid]
    for victim in victims:
        victims.extend(below.get(victim, []))
    for victim in victims:  # the root first, so it starts nothing new
        try:
            _os.kill(victim, _signal.SIGKILL)
        except OSError:
            pass
def finish(popen, grace=5.0):
    # Output of a killed child; a pipe still held by something that escaped is abandoned, not awaited.
    try:
        return popen.communicate(timeout=grace)
    except Exception:
        for pipe in (popen.stdout, popen.stderr):
            try:
                pipe.close()
            except Exception:
                pass
        popen.wait()
        return "", ""
"""
# The probe runs as one -c string, so helpers it shares with its snippets are shared as source text.
_SHARED = {}
exec(KILL_TREE, _SHARED)
kill_tree, finish = _SHARED["kill_tree"], _SHARED["finish"]

# The seed scenario's parent: import the MKL side first (as Ultralytics does with numpy/cv2), then
# start one child with subprocess and the inherited environment, the way the trainer does.
PARENT_SNIPPET = (
    KILL_TREE
    + r"""
import json, subprocess, sys
first = json.loads(sys.argv[1]); cmd = json.loads(sys.argv[2]); timeout = float(sys.argv[3])
for mod in first:
    __import__(mod)
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    so, se = p.communicate(timeout=timeout)
    out = {"returncode": p.returncode, "stdout": so[-400000:], "stderr": se[-4000:]}
except subprocess.TimeoutExpired:
    kill_tree(p.pid)
    so, se = finish(p)
    out = {"returncode": None, "timeout": True, "stdout": (so or "")[-400000:], "stderr": (se or "")[-4000:]}
print("ENVKIT-JSON:" + json.dumps(out))
"""
)


BACKGROUND = set()


def deprioritize(pid):
    """Let a background check run only on CPU the DDP job leaves idle (SCHED_IDLE on Linux);
    promote_all() hands it normal priority again once the DDP job is over."""
    BACKGROUND.add(pid)
    try:
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        try:
            os.setpriority(os.PRIO_PROCESS, pid, 10)
        except (AttributeError, OSError):
            pass


def promote_all():
    for pid in list(BACKGROUND):
        try:
            os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
        except (AttributeError, OSError):
            pass


class _Done:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run_py(args, timeout, env=None, background=True):
    """Run the env's python. Background checks get a lower CPU priority so the DDP job, the
    longest one, keeps its share of the cores; every run has a timeout and is killed after it."""
    start = time.monotonic()
    try:
        popen = subprocess.Popen([PY] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        if background:
            deprioritize(popen.pid)
        try:
            out, err_text = popen.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(popen.pid)
            out, err_text = finish(popen)
            raise subprocess.TimeoutExpired(popen.args, timeout, output=out, stderr=err_text) from None
        proc = _Done(popen.returncode, out, err_text)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return {
            "returncode": None,
            "timeout": True,
            "stdout": "",
            "stderr": err[-4000:],
            "data": None,
            "sections": {},
            "seconds": round(time.monotonic() - start, 2),
        }
    sections = parse_sections(proc.stdout)
    return {
        "returncode": proc.returncode,
        "stdout": proc.stdout[-4000:],
        "stderr": proc.stderr[-4000:],
        "data": sections.get("JSON"),
        "sections": sections,
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


def runtime_code(cfg, launch=False):
    """Code that imports torch first, then the MKL side (a DDP worker's order), and then reports the
    loaded runtimes, the numeric checks and the GPU. Importing torch costs seconds of CPU, so the
    seed child runs this code and its observations serve several checks. With launch, the same
    child then becomes the torch.distributed launcher (whose own `import torch` it would otherwise
    repeat) while the numeric and GPU observations run in a thread beside it."""
    order = [m for m in ("torch", "numpy", "mkl") if importable(m)]
    order += [m for m in cfg.get("imports", []) if m not in order and m in ("scipy", "sklearn")]
    observations = ""
    if importable("numpy"):
        observations += _guarded("NUMERIC", NUMERIC_SNIPPET)
    if importable("torch"):
        observations += _guarded("GPU", GPU_SNIPPET)
    if not launch:
        return REPORT_FN + INVENTORY_SNIPPET + "\n" + observations, order
    body = "\n".join("    " + line for line in observations.splitlines()) or "    pass"
    return REPORT_FN + INVENTORY_SNIPPET + "\ndef _observe():\n" + body + "\n" + LAUNCH_SNIPPET, order


# The end of the seed child when the DDP job is on: it runs `python -m torch.distributed.run ARGS`
# in this same process (argv[2] holds ARGS), so the job's ranks are its children.
LAUNCH_SNIPPET = r"""
import runpy, threading
sys.stdout.flush()
_observer = threading.Thread(target=_observe)
_observer.start()
sys.argv = ["torch.distributed.run"] + json.loads(sys.argv[2])
_code = 0
try:
    runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    _code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
except BaseException as exc:
    sys.stderr.write("torch.distributed.run failed: %r\n" % (exc,))
    _code = 1
_observer.join()
sys.stdout.flush()
sys.exit(_code)
"""


def parse_sections(stdout):
    """Snippets report as `ENVKIT-<TAG>:<json>` lines; anything else on stdout is ignored."""
    sections = {}
    for line in (stdout or "").splitlines():
        if line.startswith("ENVKIT-") and ":" in line:
            tag, _, payload = line.partition(":")
            try:
                sections[tag[len("ENVKIT-") :]] = json.loads(payload)
            except ValueError:
                pass
    return sections


SEED_TITLE = "MKL parent, torch-first children"
GLOO_TITLE = "torch.distributed.run --nproc_per_node %d gloo all_reduce"


def _ddp_fail(cid, title, child, info, seconds):
    ev = excerpt(child.get("stderr"))
    if child.get("timeout"):
        ev = "timed out; killed with everything it started" + ("\n" + ev if ev else "")
    ev = ev or "the child failed with no output"
    remedy = (
        "set MKL_THREADING_LAYER=GNU for this env (envkit writes it into etc/conda/activate.d; envkit audit --fix repairs it)"
        if "MKL_THREADING_LAYER" in ev
        else "see the evidence"
    )
    return check(cid, title, "fail", ev, remedy, info, seconds)


def _parent_ran(seed, gloo):
    """Whether the DDP parent imported its modules (then each of them imports)."""
    return bool(seed.get("data", {}).get("parent_ran") or gloo.get("data", {}).get("parent_ran"))


def ddp_checks(cfg, timeout):
    """The seed scenario and the real DDP job. A parent imports the MKL side first (as the
    Ultralytics trainer does) and starts a child that imports torch first and then the MKL side (the
    seed scenario), reports what is loaded, and then runs `torch.distributed.run` with a gloo
    all_reduce in the same process, as the job's launcher. When that child fails at its imports, the
    job is run again as a plain `python -m torch.distributed.run` from the same kind of parent, so
    the ranks' own evidence is reported.

    Returns (seed check, gloo check, the seed child's runtime observations or None)."""
    side = mkl_side(cfg)
    if not importable("torch"):
        skip = "torch is not installed"
        return check("ddp-seed", SEED_TITLE, "skip", skip), check("ddp-gloo", GLOO_TITLE % 0, "skip", skip), None
    ddp = bool(cfg.get("ddp", True))
    workdir = tempfile.mkdtemp(prefix="ddp-", dir=cfg.get("workdir") or None) if ddp else None
    try:
        return _ddp_checks(cfg, timeout, side, workdir)
    finally:
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def _ddp_checks(cfg, timeout, side, workdir):
    nproc = int(cfg.get("nproc", 2))
    ddp = workdir is not None
    job_args = []
    if ddp:
        worker = os.path.join(workdir, "worker.py")
        with open(worker, "w") as fh:
            fh.write(GLOO_WORKER)
        # torchrun makes a log directory per run and leaves it behind: keep it inside ours
        logs = os.path.join(workdir, "logs")
        job_args = ["--standalone", "--nnodes", "1", "--nproc_per_node", str(nproc), "--log_dir", logs, worker] + side
    code, order = runtime_code(cfg, launch=ddp)
    seed_cmd = [PY, "-c", code, json.dumps(order), json.dumps(job_args)]
    r = _from_mkl_parent(side, seed_cmd, timeout)
    seed_child = r["child"]
    sections = parse_sections(seed_child.get("stdout"))
    parent_ran = r["parent_ran"]
    seed_info = {"parent_imports": side, "child_imports": order, "parent_ran": parent_ran}
    gloo_info = {"parent_imports": side, "nproc": nproc, "parent_ran": parent_ran}
    observed = None
    # The inventory line is printed once the child's imports are done: then the seed scenario passed.
    if not parent_ran or "JSON" not in sections or (not ddp and seed_child.get("returncode") != 0):
        seed = _ddp_fail("ddp-seed", SEED_TITLE, seed_child, seed_info, r["seconds"])
    else:
        how = "a child of a parent that imported %s imported %s" % (", ".join(side) or "nothing", ", ".join(order))
        seed = check("ddp-seed", SEED_TITLE, "pass", how, "", seed_info, r["seconds"])
        observed = {
            "returncode": 0,
            "stdout": "",
            "stderr": seed_child.get("stderr", ""),
            "data": sections.get("JSON"),
            "sections": sections,
            "seconds": r["seconds"],
        }
    if not ddp:
        return seed, check("ddp-gloo", GLOO_TITLE % nproc, "skip", "disabled by the recipe (probe.ddp)"), observed
    job = seed_child
    if observed is None and parent_ran:
        launcher = [PY, "-m", "torch.distributed.run"] + job_args
        job = _from_mkl_parent(side, launcher, timeout)["child"]
    ranks = sorted(line.strip() for line in (job.get("stdout") or "").splitlines() if line.startswith("rank "))
    if job.get("returncode") != 0 or len(ranks) != nproc:
        gloo = _ddp_fail("ddp-gloo", GLOO_TITLE % nproc, job, gloo_info, r["seconds"])
    else:
        gloo_info["rank_threads"] = [_field(line, "threads") for line in ranks]
        gloo_info["rank_omp_num_threads"] = [_field(line, "OMP_NUM_THREADS") for line in ranks]
        gloo = check("ddp-gloo", GLOO_TITLE % nproc, "pass", "\n".join(ranks), "", gloo_info, r["seconds"])
    return seed, gloo, observed


def _field(line, name):
    """A `name=value` field of a rank's report line (an int when it is one)."""
    for part in line.split():
        key, _, value = part.partition("=")
        if key == name:
            return int(value) if value.isdigit() else value
    return None


def _from_mkl_parent(side, cmd, timeout):
    """Run a child from a parent that first imports the MKL side; the child's output comes back
    (the parent's stderr stands in when the parent itself failed)."""
    r = run_py(["-c", PARENT_SNIPPET, json.dumps(side), json.dumps(cmd), str(timeout)], timeout + 15, background=False)
    child = r.get("data")
    parent_ran = r["returncode"] == 0 and bool(child)
    return {"child": child if parent_ran else {"stderr": r["stderr"]}, "parent_ran": parent_ran, "seconds": r["seconds"]}


def _guarded(tag, snippet):
    body = "\n".join("    " + line for line in snippet.strip().splitlines())
    return "try:\n%s\nexcept Exception as exc:\n    report('ERR-%s', repr(exc))\n" % (body, tag)


def inventory(cfg, timeout):
    """The runtime observations in a process of their own (used when the DDP-style child failed)."""
    code, order = runtime_code(cfg)
    return run_py(["-c", code, json.dumps(order)], timeout), order


def check_runtimes(inv, order):
    r = inv
    if r["returncode"] != 0 or not r.get("data"):
        ev = "timed out" if r.get("timeout") else excerpt(r["stderr"])
        return check(
            "runtimes", "BLAS and OpenMP runtimes loaded", "fail", ev, "fix the import failure first", {"imported": order}, r["seconds"]
        )
    data = r["data"]
    if "listing" in data and not data["listing"]:
        return check(
            "runtimes",
            "BLAS and OpenMP runtimes loaded",
            "skip",
            "listing the libraries a process has loaded is implemented for Linux only; this is %s" % data.get("platform"),
            "",
            {"imported": order, "torch_threads": data.get("torch_threads"), "env": data.get("env")},
            r["seconds"],
        )
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


def section_result(tag, snippet, timeout, shared):
    """One section of a shared runtime observation, or the snippet run in a process of its own."""
    if shared is None or tag not in shared.get("sections", {}):
        shared = run_py(["-c", REPORT_FN + snippet], timeout)
    section = shared["sections"].get(tag)
    return dict(shared, data=section, returncode=0 if section else shared["returncode"])


def check_numeric(timeout, shared=None):
    if not importable("numpy"):
        return check("numeric", "numeric sanity", "skip", "numpy is not installed")
    r = section_result("NUMERIC", NUMERIC_SNIPPET, timeout, shared)
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


def usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


THREADS_TITLE = "thread settings in effect"


def check_threads(cfg, runtimes, gloo=None):
    """The recipe's variables in the activated env, then threads per DDP rank against the CPUs. The
    ranks' own thread counts are used when the gloo job ran (torchrun sets OMP_NUM_THREADS=1 for
    its workers when it is unset); otherwise the seed child's, as ranks started another way get."""
    data = runtimes.get("data") or {}
    env = data.get("env") or {}
    expected = cfg.get("threading", {})
    problems = []
    for var, want in sorted(expected.items()):
        have = os.environ.get(var)
        if have != want:
            problems.append("%s is %r, the recipe sets %r" % (var, have, want))
    nproc = int(cfg.get("nproc", 2)) if cfg.get("ddp", True) else 1
    cpus = usable_cpus()
    ranks = [n for n in ((gloo or {}).get("data") or {}).get("rank_threads", []) if isinstance(n, int)]
    per_rank = max(ranks) if ranks else (data.get("torch_threads") or 1)
    where = "in each of %d torchrun ranks" % nproc if ranks else "in a process (x %d ranks)" % nproc
    evidence = "OMP_NUM_THREADS=%s MKL_NUM_THREADS=%s; torch threads %s %s; %d usable CPUs" % (
        env.get("OMP_NUM_THREADS"),
        env.get("MKL_NUM_THREADS"),
        per_rank,
        where,
        cpus,
    )
    info = {"expected": expected, "torch_threads": data.get("torch_threads"), "rank_threads": ranks, "cpus": cpus, "nproc": nproc}
    if problems:
        return check(
            "threads",
            THREADS_TITLE,
            "fail",
            "; ".join(problems),
            "activate the env (conda activate / envkit run) or run envkit audit --fix",
            info,
        )
    share = max(1, cpus // max(nproc, 1))
    if nproc > 1 and per_rank * nproc > cpus:
        return check(
            "threads",
            THREADS_TITLE,
            "warn",
            evidence + ": %d x %d threads oversubscribe the CPUs" % (nproc, per_rank),
            "set threading.omp_num_threads to about physical cores / ranks (%d here)" % share,
            info,
        )
    if ranks and env.get("OMP_NUM_THREADS") is None and nproc > 1 and per_rank < share:
        return check(
            "threads",
            THREADS_TITLE,
            "warn",
            evidence + ": OMP_NUM_THREADS is unset, so torch.distributed.run gave each rank %d thread(s)" % per_rank,
            "set threading.omp_num_threads to about physical cores / ranks (%d here)" % share,
            info,
        )
    return check("threads", THREADS_TITLE, "pass", evidence, "", info)


GPU_TITLE = "CUDA, devices, NCCL"


def check_gpu(timeout, shared=None, torch_build=None):
    if not importable("torch"):
        return check("gpu", GPU_TITLE, "skip", "torch is not installed")
    r = section_result("GPU", GPU_SNIPPET, timeout, shared)
    data = r.get("data")
    if not data:
        error = (r.get("sections") or {}).get("ERR-GPU")
        ev = "the GPU check raised %s" % error if error else ("timed out" if r.get("timeout") else excerpt(r["stderr"]))
        return check("gpu", GPU_TITLE, "fail", ev, "see the evidence", seconds=r["seconds"])
    status, evidence, remedy = classify_gpu(data, torch_build)
    return check("gpu", GPU_TITLE, status, evidence, remedy, data, r["seconds"])


def _major_minor(text):
    try:
        major, minor = str(text).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def arch_supported(arch_list, capability):
    """Whether a build's compiled architectures can run on a GPU of this compute capability: a cubin
    for the same major and an equal or lower minor, or PTX for an equal or lower architecture."""
    major, minor = capability
    for arch in arch_list:
        kind, _, digits = arch.partition("_")
        if not digits.isdigit() or len(digits) < 2:
            continue
        a_major, a_minor = int(digits[:-1]), int(digits[-1])
        if kind == "sm" and a_major == major and a_minor <= minor:
            return True
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return True
    return False


def classify_gpu(data, torch_build=None):
    """(status, evidence, remedy) from the GPU observations. torch_build is the build the env was
    made for ('cuda' or 'cpu', from the recipe or the installed pytorch record), or None."""
    build, driver = data.get("cuda_build"), data.get("driver_cuda")
    driver_gpus = data.get("driver_devices") or 0
    machine = (
        "no NVIDIA driver here"
        if "driver_error" in data
        else "driver CUDA %s, %d GPU(s) visible to the driver" % (driver or "unknown", driver_gpus)
    )
    if not build:
        ev = "torch %s is a CPU build (%s)" % (data.get("torch_version", "?"), machine)
        if torch_build == "cuda":
            return (
                "fail",
                ev + "; this env was made for a CUDA build",
                "a CPU torch shadows the CUDA one or was solved instead: see 'envkit audit' for a pip torch over "
                "conda's pytorch, or recreate the env with a cuda pytorch variant",
            )
        return "skip", ev, ""
    if not data.get("cuda_available"):
        head = "CUDA %s build, but no usable GPU: " % build
        if "driver_error" in data:
            return (
                "warn",
                head + "no NVIDIA driver (%s)" % data["driver_error"],
                "run it on a GPU node; on this machine the env can only use the CPU",
            )
        need, have = _major_minor(build), _major_minor(driver)
        if need and have and need[0] > have[0]:
            return (
                "fail",
                head + "the driver supports CUDA %s, this build needs %s" % (driver, build),
                "update the NVIDIA driver, or pin a build for CUDA %s (toolchain.pytorch.cuda in the recipe)" % driver,
            )
        visible = data.get("visible_devices")
        if data.get("cu_init") == "CUDA_ERROR_NO_DEVICE" and visible is not None:
            return (
                "warn",
                head + "CUDA_VISIBLE_DEVICES=%r hides every GPU" % visible,
                "unset CUDA_VISIBLE_DEVICES or list the GPUs this job may use",
            )
        if data.get("cu_init") == "CUDA_ERROR_NO_DEVICE" or (data.get("cu_init") == "CUDA_SUCCESS" and not driver_gpus):
            return "warn", head + "the driver reports no GPU", "run it on a GPU node"
        return (
            "fail",
            head + "the driver answered cuInit with %s (%s)" % (data.get("cu_init"), machine),
            "check the driver with nvidia-smi; the evidence names the driver's error",
        )
    cap = data.get("capability") or [0, 0]
    sm = "sm_%d%d" % (cap[0], cap[1])
    compat = ""
    need, have = _major_minor(build), _major_minor(driver)
    if need and have and need > have:
        compat = " (minor-version compatibility)"
    parts = [
        "%d device(s): %s (%s)" % (data.get("device_count", 0), ", ".join(data.get("devices", [])), sm),
        "CUDA build %s, driver %s%s" % (build, driver or "unknown", compat),
    ]
    problems, remedies = [], []
    arch = data.get("arch_list") or []
    if arch and not arch_supported(arch, cap):
        problems.append("this build has no kernels for %s (it has %s)" % (sm, " ".join(arch)))
        remedies.append("install a pytorch build that supports %s (usually a newer one)" % sm)
    err = data.get("matmul_rel_err")
    if err is None or not err <= 1e-3:  # NaN fails too
        problems.append("a float32 GPU matmul is off from the float64 CPU result by %s (relative)" % err)
        remedies.append("see the evidence; suspect the driver or the GPU")
    else:
        parts.append("matmul rel. error %.1e" % err)
    if data.get("nccl_available"):
        reduce = data.get("nccl_all_reduce")
        if reduce == "ok":
            parts.append("NCCL %s all_reduce ok" % data.get("nccl_version", "?"))
        else:
            problems.append("NCCL %s is there but a 1-rank all_reduce failed: %s" % (data.get("nccl_version", "?"), reduce))
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


def check_expect(cfg, runtimes_result):
    expect = cfg.get("expect") or {}
    if not expect:
        return check("expect", "recipe expectations", "skip", "the recipe states no probe.expect")
    summary = runtimes_result.get("data") or {}
    if runtimes_result["status"] == "skip":
        return check("expect", "recipe expectations", "skip", "needs the runtime inventory: " + runtimes_result["evidence"])
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


def _direct_children():
    me = os.getpid()
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == me:
                        kids.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return kids


def stop_on_signal(workdir):
    """SIGTERM (envkit stopping the probe, or dying: the probe is its parent-death signal) stops
    every check with everything it started, removes the scratch dir, and ends the probe."""

    def stop(signum, frame):
        try:
            for kid in _direct_children():
                kill_tree(kid)
        finally:
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)
            os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def main():
    cfg = json.loads(sys.stdin.read() or "{}")
    stop_on_signal(cfg.get("workdir"))
    timeout = float(cfg.get("timeout", 120))
    started = time.monotonic()
    imports = [m for m in cfg.get("imports", [])]
    orders = [list(o) for o in cfg.get("import_orders", [])]
    # The DDP job is the longest check: start it first so everything else overlaps with it.
    # Evidence is reused where it is the same observation: a module that begins a passing import
    # order was imported first in a fresh process; an order that is a prefix of the DDP-style
    # child's imports ran in that fresh process. Failures always get their own process, so the
    # report says which part broke.
    with ThreadPoolExecutor(max_workers=len(imports) + len(orders) + 4) as pool:
        fut_ddp = pool.submit(ddp_checks, cfg, timeout)
        child_order = runtime_code(cfg)[1] if importable("torch") else []

        def is_prefix(o):
            return list(o) == child_order[: len(o)]

        fut_orders = {tuple(o): pool.submit(check_order, o, timeout) for o in orders if not is_prefix(o)}
        first_of = {}
        for o in orders:
            first_of.setdefault(o[0], o)
        side = mkl_side(cfg) if importable("torch") else []
        fut_imports = {m: pool.submit(check_import, m, timeout) for m in imports if m not in first_of and m not in side}
        seed, gloo, observed = fut_ddp.result()
        promote_all()
        order_results = {}
        for o in orders:
            key = tuple(o)
            if key in fut_orders:
                order_results[key] = fut_orders[key].result()
            elif seed["status"] == "pass":
                order_results[key] = check(
                    "import-order:" + ",".join(o),
                    "import " + " then ".join(o),
                    "pass",
                    "imported in this order by the DDP-style child (ddp-seed)",
                )
            else:
                order_results[key] = check_order(o, timeout)
        checks = []
        for m in imports:
            if m in fut_imports:
                checks.append(fut_imports[m].result())
                continue
            if m in side and m not in first_of:
                if "parent_imports" in seed.get("data", {}) and seed["status"] != "skip" and _parent_ran(seed, gloo):
                    where = "first" if side[0] == m else "after " + ", ".join(side[: side.index(m)])
                    checks.append(check("import:" + m, "import " + m, "pass", "imported %s in a fresh process by the DDP parent" % where))
                else:
                    checks.append(check_import(m, timeout))
                continue
            covering = order_results[tuple(first_of[m])]
            if covering["status"] == "pass":
                checks.append(check("import:" + m, "import " + m, "pass", "imported first in a fresh process by " + covering["id"]))
            else:
                checks.append(check_import(m, timeout))
        checks += [order_results[tuple(o)] for o in orders]
        checks.append(seed)
        checks.append(gloo)
        if observed is not None:
            inv, order = observed, child_order
        else:
            inv, order = inventory(cfg, timeout)
        healthy = inv["returncode"] == 0
        runtimes = check_runtimes(inv, order)
        checks.append(runtimes)
        checks.append(check_numeric(timeout, inv if healthy else None))
        checks.append(check_threads(cfg, inv, gloo))
        checks.append(check_gpu(timeout, inv if healthy else None, cfg.get("torch_build")))
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
