"""Every audit rule fires on a real layout built here (real solves, real installs, real pip wheels
layered on top) and stays quiet on clean envs."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from envkit import backend
from envkit.audit.engine import findings_for
from envkit.audit.inventory import read_inventory
from envkit.audit.rules import RULES
from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_tar_bz2
from tests.support.wheelchannel import cache_root, download_wheels

LINUX = "linux-64"


def make_env(prefix: Path, channels: list[Path], specs: list[str], pkgs: Path, swap: dict[str, tuple[Path, str]] | None = None) -> Path:
    """Solve and install with rattler; `swap` replaces a solved record by another channel's (a forced install)."""
    records = backend.solve([c.as_uri() for c in channels], specs, LINUX, backend.virtual_packages(LINUX))
    for name, (channel, spec) in (swap or {}).items():
        other = backend.solve([channel.as_uri()], [spec], LINUX, backend.virtual_packages(LINUX))
        records = [r for r in records if r.name.normalized != name] + [r for r in other if r.name.normalized == name]
    backend.install(records, prefix, pkgs, specs, None)
    return prefix


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


def ids(prefix: Path, **kw: str) -> set[str]:
    return {f.rule_id for f in findings_for(read_inventory(prefix, **kw))}


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory, replica: dict[str, Path]) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("layouts")
    pkgs = root / "pkgs"
    cf, pt = replica["conda-forge"], replica["pytorch"]
    envs: dict[str, Path] = {}
    envs["legacy"] = make_env(root / "legacy", [pt, cf], ["python 3.12.*", "pytorch ==2.5.1 *cpu*", "mkl <2024.1", "cpuonly"], pkgs)
    envs["legacy-mkl2024"] = make_env(
        root / "legacy-mkl2024", [pt, cf], ["python 3.12.*", "pytorch ==2.5.1 *cpu*", "mkl >=2024.1", "cpuonly"], pkgs
    )
    envs["legacy-llvm22"] = make_env(
        root / "legacy-llvm22",
        [pt, cf],
        ["python 3.12.*", "pytorch ==2.5.1 *cpu*", "cpuonly"],
        pkgs,
        swap={"llvm-openmp": (cf, "llvm-openmp 22.*")},
    )
    envs["mkl-openblas"] = make_env(root / "mkl-openblas", [cf], ["python 3.12.*", "numpy", "mkl"], pkgs)
    envs["torch-pip-numpy"] = make_env(root / "torch-pip-numpy", [cf], ["python 3.12.*", "pytorch * cpu_mkl*", "libblas * *mkl"], pkgs)
    pip_layer(envs["torch-pip-numpy"], "numpy-")
    envs["clean-openblas"] = make_env(root / "clean-openblas", [cf], ["python 3.12.*", "numpy", "nomkl"], pkgs)

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
    envs["two-iomp"] = make_env(root / "two-iomp", [vendor], ["vendored-omp", "intel-openmp"], pkgs)
    envs["two-mkl"] = make_env(root / "two-mkl", [vendor], ["vendored-mkl", "mkl"], pkgs)
    envs["mkl-numpy"] = make_env(root / "mkl-numpy", [vendor], ["numpy"], pkgs)
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
    assert {"EK004", "EK010", "EK011"} <= legacy  # intel-openmp + llvm-openmp; conda-forge _openmp_mutex; deprecated channel
    assert "EK002" not in legacy and "EK012" not in legacy
    assert "EK002" in ids(layouts["legacy-mkl2024"])
    assert "EK012" in ids(layouts["legacy-llvm22"])


def test_duplicate_runtimes_on_disk(layouts: dict[str, Path]) -> None:
    assert "EK003" in ids(layouts["two-iomp"])
    assert "EK018" in ids(layouts["two-mkl"])


def test_pip_numpy_over_conda_with_torch(layouts: dict[str, Path]) -> None:
    found = ids(layouts["torch-pip-numpy"])
    assert {"EK006", "EK007"} <= found
    inv = read_inventory(layouts["torch-pip-numpy"])
    assert inv.pip["numpy"].installer == "pip"
    assert any(lib.owner == "pip:numpy" and "scipy_openblas" in lib.path for lib in inv.libs)


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


def test_cuda_build_vs_driver(replica: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "12.9")
    prefix = make_env(
        tmp_path / "cuda", [replica["conda-forge"]], ["python 3.12.*", "pytorch * cuda*", "cuda-version 12.9.*"], tmp_path / "pkgs"
    )
    assert "EK013" in ids(prefix, cuda_driver="12.4")
    assert "EK013" not in ids(prefix, cuda_driver="12.9")
    assert "EK013" in ids(prefix)  # no driver at all: flagged


def test_clean_envs_have_no_errors_or_warnings(layouts: dict[str, Path], seed_env: Path) -> None:
    for prefix in (layouts["clean-openblas"], seed_env):
        serious = [f for f in findings_for(read_inventory(prefix, cpu_vendor="GenuineIntel")) if f.severity != "info"]
        assert serious == [], (prefix, serious)
