"""Every audit rule fires on a real layout built here (real solves, real installs, real pip wheels
layered on top) and stays quiet on clean envs. Each layout is written twice: by rattler (as envkit
and pixi install) and by the real conda, whose records differ (channel with the subdir appended,
its own history), so a rule that reads one installer's records right and the other's wrong fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from envkit.audit.engine import findings_for
from envkit.audit.inventory import read_inventory
from envkit.audit.rules import RULES
from envkit.prefix.envrecord import JSON, EnvRecord
from envkit.solve import backend
from tests.conftest import run_envkit
from tests.support.conda import Conda, conda_exe
from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_tar_bz2
from tests.support.natives import system_library
from tests.support.wheelchannel import cache_root, download_wheels

LINUX = "linux-64"
Swap = dict[str, tuple[Path, str]]
Installer = Callable[[Path, list[Path], list[str], Swap | None], Path]


def _swap_records(swap: Swap) -> list[object]:
    """The records a forced install puts in place of the solved ones (another channel's build)."""
    out = []
    for name, (channel, spec) in swap.items():
        other = backend.solve([channel.as_uri()], [spec], LINUX, backend.virtual_packages(LINUX))
        out += [r for r in other if r.name.normalized == name]
    return out


def rattler_installer(pkgs: Path) -> Installer:
    def make(prefix: Path, channels: list[Path], specs: list[str], swap: Swap | None = None) -> Path:
        records = backend.solve([c.as_uri() for c in channels], specs, LINUX, backend.virtual_packages(LINUX))
        forced = _swap_records(swap or {})
        records = [r for r in records if r.name.normalized not in (swap or {})] + forced
        backend.install(records, prefix, pkgs, specs, None)
        return prefix

    return make


def conda_installer(conda: Conda) -> Installer:
    def make(prefix: Path, channels: list[Path], specs: list[str], swap: Swap | None = None) -> Path:
        conda.create(prefix, channels, specs)
        for record in _swap_records(swap or {}):  # an explicit archive skips conda's solver, as users force it
            conda.ok("install", "-y", "-q", "-p", str(prefix), str(record.url))  # type: ignore[attr-defined]
        return prefix

    return make


@pytest.fixture(scope="module", params=["rattler", "conda"])
def installer(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Installer:
    pkgs = tmp_path_factory.mktemp(f"pkgs-{request.param}")
    if request.param == "rattler":
        return rattler_installer(pkgs)
    return conda_installer(Conda(conda_exe(), pkgs))


def pip_layer(prefix: Path, wheel_name: str) -> None:
    """A real `pip install` of a cached wheel into the env's prefix (INSTALLER=pip, RECORD written)."""
    wheel = next(w for w in download_wheels(cache_root() / "wheels") if w.name.startswith(wheel_name))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile", "--prefix", str(prefix), str(wheel)],
        check=True,
        timeout=600,
    )


def wheel_member(prefix_name: str, member_suffix: str) -> bytes:
    wheel = next(w for w in download_wheels(cache_root() / "wheels") if w.name.startswith(prefix_name))
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(next(n for n in zf.namelist() if n.endswith(member_suffix)))


def ids(prefix: Path, cpu_vendor: str | None = None, cuda_driver: str | None = None) -> set[str]:
    return {f.rule_id for f in findings_for(read_inventory(prefix, cpu_vendor=cpu_vendor, cuda_driver=cuda_driver))}


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory, replica: dict[str, Path], installer: Installer) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("layouts")
    cf, pt, df = replica["conda-forge"], replica["pytorch"], replica["defaults"]
    envs: dict[str, Path] = {}
    envs["legacy"] = installer(root / "legacy", [pt, df], ["python 3.12.*", "pytorch ==2.5.1 *cpu*", "mkl <2024.1", "cpuonly"], None)
    envs["legacy-mkl2024"] = installer(
        root / "legacy-mkl2024", [pt, df], ["python 3.12.*", "pytorch ==2.5.1 *cpu*", "mkl >=2024.1", "cpuonly"], None
    )
    envs["legacy-llvm22"] = installer(
        root / "legacy-llvm22",
        [pt, df],
        ["python 3.12.*", "pytorch ==2.5.1 *cpu*", "cpuonly"],
        {"llvm-openmp": (cf, "llvm-openmp 22.*")},
    )
    envs["mkl-openblas"] = installer(root / "mkl-openblas", [cf], ["python 3.12.*", "numpy", "mkl"], None)
    envs["torch-pip-numpy"] = installer(root / "torch-pip-numpy", [cf], ["python 3.12.*", "pytorch * cpu_mkl*", "libblas * *mkl"], None)
    pip_layer(envs["torch-pip-numpy"], "numpy-")
    envs["clean-openblas"] = installer(root / "clean-openblas", [cf], ["python 3.12.*", "numpy", "nomkl"], None)
    envs["cf-mkl-service"] = installer(
        root / "cf-mkl-service", [cf], ["python 3.12.*", "numpy", "mkl-service", "libblas * *mkl", "_openmp_mutex * *_llvm"], None
    )

    # Packages that vendor real runtime binaries (bytes taken from the PyPI wheels).
    vendor = root / "vendor-channel"
    iomp = wheel_member("intel_openmp-", "lib/libiomp5.so")
    mkl_rt = wheel_member("mkl-2026", "lib/libmkl_rt.so.3")
    write_tar_bz2(
        vendor, PkgMeta("vendored-omp", "1.0", "0"), [PkgFile("lib/python3.12/site-packages/vendored_omp/lib/libiomp5.so", iomp, 0o755)]
    )
    write_tar_bz2(vendor, PkgMeta("intel-openmp", "2024.1.0", "0"), [PkgFile("lib/libiomp5.so", iomp, 0o755)])
    write_tar_bz2(vendor, PkgMeta("mkl", "2024.1.0", "0"), [PkgFile("lib/libmkl_rt.so.2", mkl_rt, 0o755)])
    write_tar_bz2(
        vendor,
        PkgMeta("vendored-mkl", "1.0", "0"),
        [PkgFile("lib/python3.12/site-packages/vendored_mkl/lib/libmkl_rt.so.3", mkl_rt, 0o755)],
    )
    init = b"# Anaconda/Intel MKL numpy: make sure MKL is initialised before numpy's BLAS is used\ntry:\n    import mkl\nexcept ImportError:\n    pass\n"
    write_tar_bz2(
        vendor, PkgMeta("numpy", "1.26.4", "py312_mkl_0"), [PkgFile("lib/python3.12/site-packages/numpy/_distributor_init.py", init)]
    )
    index_channel(vendor)
    envs["two-iomp"] = installer(root / "two-iomp", [vendor], ["vendored-omp", "intel-openmp"], None)
    envs["two-mkl"] = installer(root / "two-mkl", [vendor], ["vendored-mkl", "mkl"], None)
    envs["mkl-numpy"] = installer(root / "mkl-numpy", [vendor], ["numpy"], None)
    return envs


def test_catalog_is_complete_and_explains_itself() -> None:
    assert len(RULES) >= 15
    for rule in RULES:
        assert rule.rationale and rule.fix and rule.sources and all(s.startswith("https://") for s in rule.sources)


def test_ek001_seed_crash_risk(raw_payload_env: Path, seed_env: Path) -> None:
    assert "EK001" in ids(raw_payload_env)
    assert "EK001" not in ids(seed_env)


def test_legacy_channel_rules(layouts: dict[str, Path]) -> None:
    legacy = ids(layouts["legacy"])
    assert {"EK004", "EK011"} <= legacy  # intel-openmp + llvm-openmp on disk (a warning); the deprecated channel
    assert not {"EK002", "EK010", "EK012"} & legacy  # on pytorch + defaults nothing mixes and the pins hold
    assert "EK002" in ids(layouts["legacy-mkl2024"])
    assert {"EK010", "EK012"} <= ids(layouts["legacy-llvm22"])  # conda-forge's llvm-openmp 22 forced in


def test_ek004_names_what_conda_remove_would_take(layouts: dict[str, Path]) -> None:
    """The legacy layout's intel-openmp carries mkl, which carries pytorch and numpy: the fix says so."""
    ek004 = next(f for f in findings_for(read_inventory(layouts["legacy"])) if f.rule_id == "EK004")
    assert ek004.severity == "warning" and "not proven loaded" in ek004.evidence
    assert "would also remove" in ek004.fix and "pytorch" in ek004.fix and "mkl" in ek004.fix and "so do not" in ek004.fix


def test_ek001_counts_llvm_openmp_as_foreign(layouts: dict[str, Path]) -> None:
    """mkl-service with conda-forge's LLVM OpenMP and no layer set: libomp.so is foreign to mkl-service too."""
    ek001 = next(f for f in findings_for(read_inventory(layouts["cf-mkl-service"])) if f.rule_id == "EK001")
    assert "llvm-openmp" in ek001.evidence


def test_duplicate_runtimes_on_disk(layouts: dict[str, Path]) -> None:
    assert "EK003" in ids(layouts["two-iomp"])
    assert "EK018" in ids(layouts["two-mkl"])


def test_pip_numpy_over_conda_with_torch(layouts: dict[str, Path]) -> None:
    found = ids(layouts["torch-pip-numpy"])
    assert {"EK006", "EK007"} <= found
    inv = read_inventory(layouts["torch-pip-numpy"])
    assert inv.pip["numpy"].installer == "pip"
    assert any(lib.owner == "pip:numpy" and "scipy_openblas" in lib.path for lib in inv.libs)
    # by hand on an env envkit did not install; where it did, `envkit sync` does both steps
    fix = next(f.fix for f in findings_for(inv) if f.rule_id == "EK006")
    assert fix.startswith("pip uninstall numpy, then conda install --force-reinstall numpy")
    packages: list[JSON] = [{"name": n, "version": p.version, "build": p.build} for n, p in inv.packages.items()]
    ours = replace(inv, record=EnvRecord.from_json({"packages": packages}))
    fix = next(f.fix for f in findings_for(ours) if f.rule_id == "EK006")
    assert fix.startswith("envkit sync does both steps") and "conda install --force-reinstall numpy" in fix


def test_blas_variant_and_amd(layouts: dict[str, Path]) -> None:
    assert "EK008" in ids(layouts["mkl-openblas"])
    assert "EK017" in ids(layouts["mkl-openblas"], cpu_vendor="AuthenticAMD")
    assert "EK017" not in ids(layouts["mkl-openblas"], cpu_vendor="GenuineIntel")


def test_numpy_distributor_init(layouts: dict[str, Path]) -> None:
    assert "EK020" in ids(layouts["mkl-numpy"])


@pytest.mark.parametrize(
    ("var", "rule"), [("KMP_DUPLICATE_LIB_OK", "EK005"), ("MKL_SERVICE_FORCE_INTEL", "EK016"), ("MKL_DEBUG_CPU_TYPE", "EK009")]
)
def test_env_var_rules_from_conda_state_and_scripts(layouts: dict[str, Path], tmp_path: Path, var: str, rule: str) -> None:
    prefix = layouts["clean-openblas"]
    state = prefix / "conda-meta" / "state"
    state.write_text(json.dumps({"env_vars": {var: "5"}}))  # what `conda env config vars set` writes
    try:
        assert rule in ids(prefix)
    finally:
        state.unlink()
    script = prefix / "etc" / "conda" / "activate.d" / "user.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f"export {var}=TRUE\n")
    try:
        assert rule in ids(prefix)
    finally:
        script.unlink()
    assert rule not in ids(prefix)


def test_cuda_build_vs_driver(replica: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, installer: Installer) -> None:
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "12.9")
    prefix = installer(tmp_path / "cuda", [replica["conda-forge"]], ["python 3.12.*", "pytorch * cuda*", "cuda-version 12.9.*"], None)
    assert "EK013" in ids(prefix, cuda_driver="12.4")
    assert "EK013" not in ids(prefix, cuda_driver="12.9")
    # no driver at all (a login node, CI): not an error here; EK023 says the GPU part is unproven
    assert "EK013" not in ids(prefix) and "EK023" in ids(prefix)


def test_clean_envs_have_no_errors_or_warnings(layouts: dict[str, Path], seed_env: Path) -> None:
    # The last probe's verdict (EK043/EK044) is left out: the session's seed env is probed by other
    # tests, in their order, and its PyPI numpy brings an OpenBLAS of its own that the probe names.
    # tests/probe/test_probe.py covers the verdict rules.
    verdicts = {"EK043", "EK044"}
    for prefix in (layouts["clean-openblas"], seed_env):
        found = findings_for(read_inventory(prefix, cpu_vendor="GenuineIntel"))
        serious = [f for f in found if f.severity != "info" and f.rule_id not in verdicts]
        assert serious == [], (prefix, serious)


def _libomp() -> str:
    return system_library("libomp.so.5")


@pytest.mark.parametrize(("layer", "code"), [("INTEL", 1), ("GNU", 0)])
def test_mkl_service_takes_llvm_libomp_for_foreign_as_it_does_libgomp(seed_env: Path, layer: str, code: int) -> None:
    """What EK001 encodes, on real binaries: a real libomp loaded first, then `import mkl`."""
    script = f"import ctypes; ctypes.CDLL({_libomp()!r}, mode=ctypes.RTLD_GLOBAL)\nimport mkl\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MKL_")}
    proc = subprocess.run(
        [str(seed_env / "bin" / "python"), "-c", script],
        capture_output=True,
        text=True,
        env={**env, "MKL_THREADING_LAYER": layer},
        timeout=120,
        check=False,
    )
    assert proc.returncode == code, proc.stderr
    if code:
        assert "MKL_THREADING_LAYER=INTEL is incompatible with libomp.so.5 library" in proc.stderr


ADVICE = [
    # (variable, value, layout, rule, words the evidence must carry)
    ("MKL_SERIAL", "yes", "cf-mkl-service", "EK025", "runs on one thread"),
    ("MKL_ENABLE_INSTRUCTIONS", "AVX2_ONLY", "cf-mkl-service", "EK026", "MKL_ENABLE_INSTRUCTIONS=AVX2_ONLY"),
    ("NCCL_P2P_DISABLE", "1", "legacy", "EK027", "NVLink/PCIe"),
    ("NCCL_IB_DISABLE", "1", "legacy", "EK027", "InfiniBand"),
    ("KMP_AFFINITY", "granularity=fine,compact,1,0", "legacy", "EK028", "GNU libgomp, which does not read it"),
    ("OMP_NUM_THREADS", "1", "legacy", "EK029", "a single-process run included"),
]


@pytest.mark.parametrize(("var", "value", "layout", "rule", "words"), ADVICE, ids=lambda v: str(v)[:24])
def test_advice_users_copy_from_activation_conda_vars_and_the_shell(
    layouts: dict[str, Path], monkeypatch: pytest.MonkeyPatch, var: str, value: str, layout: str, rule: str, words: str
) -> None:
    """Each piece of copied advice is known wherever it is set: the env's conda vars, an activation
    script, or the environment envkit runs in (a ~/.bashrc export, a Dockerfile ENV)."""
    prefix = layouts[layout]
    assert rule not in ids(prefix)
    for where in ("state", "script", "shell"):
        state = prefix / "conda-meta" / "state"
        script = prefix / "etc" / "conda" / "activate.d" / "user.sh"
        if where == "state":
            state.write_text(json.dumps({"env_vars": {var: value}}))
        elif where == "script":
            script.parent.mkdir(parents=True, exist_ok=True)
            script.write_text(f"export {var}={value}\n")
        else:
            monkeypatch.setenv(var, value)
        try:
            found = [f for f in findings_for(read_inventory(prefix)) if f.rule_id == rule]
            assert len(found) == 1 and words in found[0].evidence, (where, found)
            assert {"state": "conda-meta/state", "script": "user.sh", "shell": "the environment envkit runs in"}[where] in found[0].evidence
        finally:
            state.unlink(missing_ok=True)
            script.unlink(missing_ok=True)
            monkeypatch.delenv(var, raising=False)


def test_advice_rules_know_the_runtime_they_talk_about(layouts: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # KMP_AFFINITY means something to LLVM's libomp (conda-forge's runtime): no finding there
    monkeypatch.setenv("KMP_AFFINITY", "compact")
    assert "EK028" not in ids(layouts["cf-mkl-service"]) and "EK028" in ids(layouts["legacy"])
    # MKL_ENABLE_INSTRUCTIONS acts on Intel CPUs only
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    amd = [f.evidence for f in findings_for(read_inventory(layouts["cf-mkl-service"], cpu_vendor="AuthenticAMD")) if f.rule_id == "EK026"]
    intel = [f.evidence for f in findings_for(read_inventory(layouts["cf-mkl-service"], cpu_vendor="GenuineIntel")) if f.rule_id == "EK026"]
    assert "ignored on this AMD CPU" in amd[0] and "caps MKL at that instruction set" in intel[0]
    # OMP_NUM_THREADS=1 matters only where torch runs; NCCL_*_DISABLE=0 is no advice at all
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("NCCL_P2P_DISABLE", "0")
    assert "EK029" not in ids(layouts["clean-openblas"]) and "EK027" not in ids(layouts["legacy"])
    for rule in ("EK025", "EK026", "EK027", "EK028", "EK029"):
        proc = run_envkit("audit", "--explain", rule)
        assert proc.returncode == 0 and "https://" in proc.stdout, rule


def test_ek032_toolchain_packages_in_the_user_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip install --user numpy shadows the env's numpy in every env of that Python version whose
    python is no venv; PYTHONNOUSERSITE (activation or shell) and a venv that keeps the user site off
    are the ways out."""
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    site = tmp_path / "home" / ".local" / "lib" / "python3.11" / "site-packages"
    (site / "numpy").mkdir(parents=True)
    (site / "numpy-1.26.4.dist-info").mkdir()
    (site / "threadpoolctl.py").write_text("")
    (site / "requests").mkdir()  # not the toolchain's
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PYTHONUSERBASE", raising=False)
    monkeypatch.delenv("PYTHONNOUSERSITE", raising=False)
    found = [f for f in findings_for(read_inventory(prefix)) if f.rule_id == "EK032"]
    assert [f.evidence for f in found] == [
        f"numpy 1.26.4 in {site}: imported ahead of the env's own",
        f"threadpoolctl in {site}: imported ahead of the env's own",
    ]
    assert found[0].severity == "error" and "PYTHONNOUSERSITE" in found[0].fix
    proc = run_envkit("audit", "-p", str(prefix), "--json")
    assert proc.returncode == 1 and "EK032" in proc.stdout
    monkeypatch.setenv("PYTHONNOUSERSITE", "1")  # set in the shell the env's processes start from
    assert "EK032" not in ids(prefix)
    monkeypatch.delenv("PYTHONNOUSERSITE")
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    assert "EK032" not in ids(prefix)
    (prefix / "pyvenv.cfg").unlink()
    monkeypatch.setenv("PYTHONUSERBASE", str(tmp_path / "elsewhere"))
    assert "EK032" not in ids(prefix)
    monkeypatch.delenv("PYTHONUSERBASE")
    # a python 3.12 that left its lib/python3.12 behind when the env moved back to 3.11: the user
    # site read is the env python's own version, not the highest folder name
    (prefix / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python3.11").symlink_to(sys.executable)
    assert "EK032" in ids(prefix)


def test_gpu_builds_for_newer_gpus_than_these(tmp_path: Path) -> None:
    """EK039 on the plan a login node makes without knowing the GPUs; EK038 on that env audited on
    a 9.0 GPU node (rattler's CONDA_OVERRIDE_CUDA and CONDA_OVERRIDE_CUDA_ARCH stand in for the node's
    driver and devices); a recipe that declares the GPUs gets builds that have kernels for them."""
    from tests.support.tiny import cuda_arch_channel, cuda_recipe

    channel = cuda_arch_channel(tmp_path)
    login = {**os.environ, "CONDA_OVERRIDE_CUDA": ""}
    login.pop("CONDA_OVERRIDE_CUDA_ARCH", None)
    node = {**login, "CONDA_OVERRIDE_CUDA": "12.9", "CONDA_OVERRIDE_CUDA_ARCH": "9.0"}

    def findings(proc: subprocess.CompletedProcess[str], key: str) -> dict[str, dict[str, str]]:
        doc = json.loads(proc.stdout)
        found = doc["data"]["findings"] if key == "plan" else doc["data"]["audits"][0]["findings"]
        return {f["rule_id"]: f for f in found}

    undeclared, declared = cuda_recipe(tmp_path / "u", channel), cuda_recipe(tmp_path / "d", channel, "9.0")
    plan = findings(run_envkit("create", str(undeclared), "-p", str(tmp_path / "a"), "--dry-run", "--json", env=login), "plan")
    assert plan["EK039"]["severity"] == "warning" and "cuda-arch 10.0 was solved with no GPU to go by" in plan["EK039"]["evidence"]
    assert "EK038" not in plan
    plan = findings(run_envkit("create", str(declared), "-p", str(tmp_path / "b"), "--dry-run", "--json", env=login), "plan")
    assert "EK039" not in plan and "EK038" not in plan

    made = run_envkit("create", str(undeclared), "-p", str(tmp_path / "a"), "--yes", "--no-probe", env=login)
    assert made.returncode == 0, made.stderr
    on_node = findings(run_envkit("audit", "-p", str(tmp_path / "a"), "--json", env=node), "env")
    assert on_node["EK038"]["severity"] == "error"
    assert on_node["EK038"]["evidence"] == (
        "cuda-arch 10.0: its packages need GPUs of compute capability 10.0 or newer; this machine's GPUs are 9.0 (__cuda_arch)"
    )
    assert "EK038" not in findings(run_envkit("audit", "-p", str(tmp_path / "a"), "--json", env=login), "env")  # no GPU to judge by
    made = run_envkit("create", str(declared), "-p", str(tmp_path / "b"), "--yes", "--no-probe", env=login)
    assert made.returncode == 0, made.stderr
    assert "EK038" not in findings(run_envkit("audit", "-p", str(tmp_path / "b"), "--json", env=node), "env")
