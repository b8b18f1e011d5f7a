"""The in-env probe package as ordinary code: its functions imported and called directly, the
package run on its Python floor (3.9, PyPy from Debian), and nothing of envkit visible inside the env."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envkit.probe.inenv import ddp, expect, inventory, numeric, report, threads
from envkit.probe.inenv.gpu import classify_gpu
from envkit.probe.runner import IN_ENV_PACKAGE, stage_probe
from tests.conftest import run_envkit
from tests.support.inenv import run_with_probe_package
from tests.support.natives import system_library

ROOT = Path(__file__).resolve().parents[2]
H200 = json.loads((Path(__file__).parent / "data" / "h200-gpu.json").read_text())["visible"]["data"]


# ------------------------------------------------------------------ functions, called directly


def test_report_lines_round_trip_and_ignore_noise() -> None:
    lines = 'noise\nENVKIT-JSON:{"a": 1}\nENVKIT-GPU:[1, 2]\nENVKIT-BAD:{not json\nrank 0 ok\n'
    assert report.parse_sections(lines) == {"JSON": {"a": 1}, "GPU": [1, 2]}
    assert report.parse_sections(None) == {}


def test_excerpt_puts_the_known_cause_first() -> None:
    stderr = "Traceback (most recent call last):\n  File x\nError: mkl-service + Intel(R) MKL: MKL_THREADING_LAYER=INTEL is incompatible with libgomp.so.1 library.\n"
    assert report.excerpt(stderr).startswith("Error: mkl-service + Intel(R) MKL: MKL_THREADING_LAYER=INTEL")
    assert report.excerpt("a\nb\nValueError: boom\n") == "ValueError: boom"
    assert len(report.excerpt("x" * 5000, limit=100)) == 100


def test_library_names_are_classified_like_threadpoolctl() -> None:
    assert inventory.classify("/env/lib/libmkl_rt.so.2") == ("blas", "mkl")
    assert inventory.classify("/env/lib/python3.11/site-packages/numpy.libs/libscipy_openblas64_-ff651d7f.so") == ("blas", "openblas")
    assert inventory.classify("/env/lib/python3.11/site-packages/torch/lib/libgomp-a34b3233.so.1") == ("openmp", "libgomp")
    assert inventory.classify("/usr/lib/llvm-14/lib/libomp.so.5") == ("openmp", "libomp")
    assert inventory.classify("/env/lib/libiomp5.so") == ("openmp", "libiomp5")
    assert inventory.classify("/env/lib/libiomp5_db.so") is None and inventory.classify("/lib/libc.so.6") is None


def _inv(*libs: dict[str, Any]) -> dict[str, Any]:
    return {"returncode": 0, "seconds": 0.1, "data": {"listing": "dl_iterate_phdr", "libraries": list(libs), "env": {}}}


def _lib(kind: str, api: str, path: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "api": api, "path": path, "realpath": path, **extra}


def test_runtimes_check_judges_the_mix() -> None:
    gomp = _lib("openmp", "libgomp", "/t/libgomp.so.1", num_threads=2)
    iomp = _lib("openmp", "libiomp5", "/e/libiomp5.so")
    omp = _lib("openmp", "libomp", "/e/libomp.so")
    mkl = _lib("blas", "mkl", "/e/libmkl_rt.so.2", threading_layer="gnu")
    assert inventory.check_runtimes(_inv(gomp, mkl), ["torch"])["status"] == "pass"
    two = inventory.check_runtimes(_inv(gomp, iomp, mkl), ["torch"])
    assert two["status"] == "warn" and two["data"]["openmp_runtimes"] == 2 and two["data"]["mkl_threading_layer"] == "gnu"
    assert inventory.check_runtimes(_inv(iomp, omp), ["torch"])["status"] == "fail"
    blas = inventory.check_runtimes(_inv(mkl, _lib("blas", "openblas", "/s/libscipy_openblas.so")), [])
    assert blas["status"] == "warn" and "two BLAS" in blas["remedy"]
    crashed = inventory.check_runtimes({"returncode": 1, "seconds": 1, "stderr": "Error: boom"}, ["torch"])
    assert crashed["status"] == "fail" and crashed["evidence"] == "Error: boom"


def test_numeric_classification() -> None:
    assert numeric.classify({"numpy_matmul_err": 1e-15, "numpy_solve_residual": 2e-16})[0] == "pass"
    status, evidence, remedy = numeric.classify({"numpy_matmul_err": 0.5, "torch_vs_numpy_err": float("nan")})
    assert status == "fail" and "numpy_matmul_err=5.00e-01" in evidence and "BLAS" in remedy


def test_threads_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "usable_cpus", lambda: 16)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    runtimes = {"data": {"env": {"OMP_NUM_THREADS": "1"}, "torch_threads": 1}}
    ok = threads.check_threads({"threading": {"OMP_NUM_THREADS": "1"}, "nproc": 2}, runtimes, {"data": {"rank_threads": [8, 8]}})
    assert ok["status"] == "pass" and "in each of 2 torchrun ranks" in ok["evidence"]
    over = threads.check_threads({"nproc": 4}, runtimes, {"data": {"rank_threads": [16, 16, 16, 16]}})
    assert over["status"] == "warn" and "4 x 16 threads oversubscribe" in over["evidence"] and "(4 here)" in over["remedy"]
    monkeypatch.delenv("OMP_NUM_THREADS")
    wrong = threads.check_threads({"threading": {"OMP_NUM_THREADS": "1"}}, runtimes)
    assert wrong["status"] == "fail" and "OMP_NUM_THREADS is None, the recipe sets '1'" in wrong["evidence"]
    # no torch in the env: no torch threads to report (it said "torch threads 1") or to weigh against the CPUs
    monkeypatch.setattr(threads, "usable_cpus", lambda: 1)
    plain = threads.check_threads({"nproc": 2}, {"data": {"env": {}, "torch_threads": None}})
    assert plain["status"] == "pass" and "no torch to count threads in; 1 usable CPUs" in plain["evidence"], plain["evidence"]
    # envkit's count, which a cgroup quota cuts (envkit/core/cpus.py), wins over the probe's affinity mask
    monkeypatch.setattr(threads, "usable_cpus", lambda: 16)
    quota = threads.check_threads({"nproc": 2, "usable_cpus": 2}, runtimes, {"data": {"rank_threads": [2, 2]}})
    assert quota["status"] == "warn" and "2 x 2 threads oversubscribe" in quota["evidence"] and "2 usable CPUs" in quota["evidence"]


def test_expect_check() -> None:
    runtimes = {
        "status": "pass",
        "evidence": "",
        "data": {"libraries": [1], "blas": ["mkl"], "openmp_runtimes": 1, "mkl_threading_layer": "gnu"},
    }
    assert (
        expect.check_expect({"expect": {"blas": "mkl", "openmp_runtimes": 1, "mkl_threading_layer": "gnu"}}, runtimes)["status"] == "pass"
    )
    bad = expect.check_expect({"expect": {"blas": "openblas", "openmp_runtimes": 2}}, runtimes)
    assert bad["status"] == "fail" and "blas: expected openblas, loaded mkl" in bad["evidence"]


def test_rank_report_fields() -> None:
    line = "rank 1 ok 3.0 threads=8 OMP_NUM_THREADS=None"
    assert ddp.field(line, "threads") == 8 and ddp.field(line, "OMP_NUM_THREADS") == "None" and ddp.field(line, "x") is None


def test_children_are_modules_of_the_package() -> None:
    """Every child the probe starts is `python -m <package>.<module>`, no code in strings."""
    from envkit.probe.inenv.proc import module_cmd

    cmd = module_cmd("seed_child", "[]")
    assert cmd[1:3] == ["-m", "envkit.probe.inenv.seed_child"]
    text = "\n".join(p.read_text() for p in (ROOT / "envkit" / "probe" / "inenv").glob("*.py"))
    assert '"-c"' not in text and "exec(" not in text


# ------------------------------------------------------------------ on the package's Python floor


def _pypy() -> str:
    found = shutil.which("pypy3")
    if found is None:
        pytest.fail("pypy3 is not installed (tools/test.sh installs Debian's pypy3, Python 3.9)")
    return found


def test_the_floor_is_python_3_9_on_pypy(tmp_path: Path) -> None:
    """The pure functions give the same answers on PyPy 3.9 as here."""
    pypy = _pypy()
    code = (
        "import json, sys\n"
        "from envkit_probe import gpu, report, numeric, inventory, ddp\n"
        "h200 = json.loads(sys.stdin.read())\n"
        "print(json.dumps({'version': list(sys.version_info[:2]), 'gpu': gpu.classify_gpu(h200), 'cpu': gpu.classify_gpu(dict(h200, cuda_build=None), 'cuda'),"
        " 'num': numeric.classify({'a': 0.5}), 'cls': inventory.classify('/x/libgomp-a34b3233.so.1'),"
        " 'sec': report.parse_sections('ENVKIT-X:[1]\\n'), 'field': ddp.field('rank 0 ok threads=3', 'threads')}))"
    )
    proc = run_with_probe_package(Path(pypy), ["-c", code], tmp_path, input=json.dumps(H200))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["version"] == [3, 9]
    assert got["gpu"] == list(classify_gpu(H200))
    assert got["cpu"] == list(classify_gpu(dict(H200, cuda_build=None), "cuda"))
    assert got["num"] == list(numeric.classify({"a": 0.5})) and got["cls"] == ["openmp", "libgomp"]
    assert got["sec"] == {"X": [1]} and got["field"] == 3


def test_a_whole_probe_runs_under_pypy_3_9(tmp_path: Path) -> None:
    """An env whose python is PyPy 3.9 (no numpy, no torch): the probe runs, reports, skips what is absent."""
    prefix = tmp_path / "pypy-env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python").symlink_to(_pypy())
    proc = run_envkit("probe", "-p", str(prefix), "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    statuses = {c["id"]: c["status"] for c in doc["data"]["checks"]}
    assert doc["data"]["python"].startswith("3.9")
    assert statuses["ddp-seed"] == statuses["gpu"] == statuses["numeric"] == "skip"
    assert statuses["runtimes"] == "pass" and statuses["threads"] == "pass"


# ------------------------------------------------------------------ isolation


def test_nothing_of_envkit_is_importable_inside_the_env(seed_env: Path) -> None:
    """The probe's children see the env and the staged package, never envkit, rich, yaml or rattler."""
    proc = run_envkit("probe", "-p", str(seed_env), "--json")
    runtimes = next(c for c in json.loads(proc.stdout)["data"]["checks"] if c["id"] == "runtimes")
    sys_path = runtimes["data"]["sys_path"]
    assert runtimes["data"]["foreign_importable"] == [], runtimes["data"]
    assert sys_path and not any(p.startswith((str(ROOT), sys.prefix)) for p in sys_path if p), sys_path
    assert any(p.endswith("/lib") and "envkit-probe-" in p for p in sys_path), sys_path


def test_staged_package_holds_only_the_probe(tmp_path: Path) -> None:
    lib = stage_probe(tmp_path)
    assert [p.name for p in lib.iterdir()] == [IN_ENV_PACKAGE]
    staged = sorted(p.name for p in (lib / IN_ENV_PACKAGE).iterdir())
    source = sorted(p.name for p in (ROOT / "envkit" / "probe" / "inenv").glob("*.py"))
    assert staged == source
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # even the interpreter envkit runs on cannot import envkit from there with -E -s
    proc = subprocess.run(
        [sys.base_prefix + "/bin/python3", "-E", "-s", "-c", "import envkit_probe, importlib.util as u; print(u.find_spec('envkit'))"],
        cwd=lib,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "None", proc.stderr


def test_a_runtime_is_known_by_what_it_is_not_by_its_file_s_name(tmp_path: Path) -> None:
    """LLVM's OpenMP runtime under GNU's name (what conda-forge's _openmp_mutex *_llvm does with a
    link; here a copy, which no link resolves) is LLVM's to the probe: the library's own entry
    points and version string say so. Real libraries, loaded in a real process."""
    disguised = tmp_path / "libgomp.so.1"
    shutil.copy(system_library("libomp.so.5"), disguised)
    gnu = system_library("libgomp.so.1")
    script = (
        "import ctypes, json, sys\n"
        f"ctypes.CDLL({str(disguised)!r}, mode=ctypes.RTLD_GLOBAL)\n"
        f"ctypes.CDLL({gnu!r}, mode=ctypes.RTLD_GLOBAL)\n"
        "from envkit.probe.inenv import inventory\n"
        "print(json.dumps(inventory.collect([])))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    libs = {lib["path"]: lib for lib in json.loads(proc.stdout)["libraries"]}
    assert libs[str(disguised)]["api"] == "libgomp" and libs[str(disguised)]["identity"] == "llvm-openmp"
    assert [lib["identity"] for path, lib in libs.items() if path != str(disguised) and lib["kind"] == "openmp"] == ["gnu-openmp"]
    verdict = inventory.check_runtimes({"returncode": 0, "seconds": 0.1, "data": {"libraries": list(libs.values())}}, [])
    assert verdict["status"] == "warn" and verdict["data"]["openmp_identities"] == ["gnu-openmp", "llvm-openmp"]
    assert f"openmp {disguised.name} (is llvm-openmp)" in verdict["evidence"]
