"""A metadata-only replica of the parts of conda-forge and the legacy pytorch channel that decide
BLAS, OpenMP and pytorch flavours. Names, builds, depends, constrains and track_features follow the
feedstocks (see shared research conda-forge-facts.md); the archives carry no payload."""

from __future__ import annotations

from pathlib import Path

from tests.support.condapkg import PkgMeta, index_channel, write_tar_bz2

PY = ["python >=3.12,<3.13.0a0", "python_abi 3.12.* *_cp312"]
OMP_LLVM = ["_openmp_mutex * *_llvm", "_openmp_mutex >=4.5", "llvm-openmp >=21"]


def conda_forge_records() -> list[PkgMeta]:
    r = [
        PkgMeta(
            "python", "3.12.11", "h9e4cc4f_0_cpython", depends=["__glibc >=2.17", "libgcc >=14"], constrains=["python_abi 3.12.* *_cp312"]
        ),
        PkgMeta("python_abi", "3.12", "8_cp312", 8, constrains=["python 3.12.* *_cpython"], subdir="noarch", noarch="generic"),
        PkgMeta("libgomp", "15.2.0", "he0feb66_18", 18, depends=["__glibc >=2.17"]),
        PkgMeta("libgcc", "15.2.0", "he0feb66_18", 18, depends=["_openmp_mutex >=4.5"], constrains=["libgomp 15.2.0 he0feb66_18"]),
        PkgMeta("_openmp_mutex", "4.5", "20_gnu", 20, depends=["libgomp >=7.5.0"], constrains=["openmp_impl <0.0a0"]),
        PkgMeta("_openmp_mutex", "4.5", "7_kmp_llvm", 7, depends=["llvm-openmp >=9.0.1"]),
        PkgMeta(
            "llvm-openmp", "22.1.1", "h4922eb0_0", depends=["__glibc >=2.17"], constrains=["openmp 22.1.1|22.1.1.*", "intel-openmp <0.0a0"]
        ),
        PkgMeta("tbb", "2022.3.0", "h8d10470_1", 1, depends=["libgcc >=14"]),
        PkgMeta("mkl", "2025.3.0", "h0b6a9bd_11", 11, depends=[*OMP_LLVM, "libgcc >=14", "tbb >=2022"]),
        PkgMeta("mkl-service", "2.8.0", "py312h0_0", depends=[*PY, "mkl >=2025.3,<2026.0a0", "libgcc >=14"]),
        PkgMeta("libopenblas", "0.3.30", "pthreads_h94d23a6_4", 4, depends=["libgcc >=14"], constrains=["openblas >=0.3.30,<0.3.31.0a0"]),
        PkgMeta(
            "libopenblas", "0.3.30", "openmp_hd680484_4", 4, depends=[*OMP_LLVM, "libgcc >=14"], track_features="openblas_threading_openmp"
        ),
        PkgMeta("blis", "0.9.0", "h4ab18f5_2", 2, depends=["libgcc >=14"]),
        PkgMeta("nomkl", "1.0", "h5ca1d4c_0", constrains=["mkl <0.a0"], subdir="noarch", noarch="generic"),
        PkgMeta(
            "numpy",
            "2.2.6",
            "py312h72c5963_0",
            depends=["libblas >=3.9.0,<4.0a0", "libcblas >=3.9.0,<4.0a0", "liblapack >=3.9.0,<4.0a0", "libgcc >=14", *PY],
            constrains=["numpy-base <0a0"],
        ),
        PkgMeta(
            "cuda-version",
            "12.9",
            "h4f385c5_3",
            3,
            constrains=["__cuda >=12", "cudatoolkit 12.9|12.9.*"],
            subdir="noarch",
            noarch="generic",
        ),
        PkgMeta("ultralytics-thop", "2.2.0", "pyh0_0", depends=["python >=3.10", "numpy", "pytorch"], subdir="noarch", noarch="python"),
        PkgMeta(
            "ultralytics",
            "8.4.126",
            "pyh0_0",
            depends=["python >=3.10", "numpy >=1.22.2", "ultralytics-thop >=2.1.6"],
            subdir="noarch",
            noarch="python",
        ),
    ]
    for flavour, dep in (
        ("openblas", "libopenblas >=0.3.30,<0.3.31.0a0"),
        ("mkl", "mkl >=2025.3,<2026.0a0"),
        ("blis", "blis >=0.9.0,<0.9.1.0a0"),
    ):
        tf = "blas_mkl blas_mkl_2" if flavour == "mkl" else ("blas_blis" if flavour == "blis" else None)
        blas_build = f"5_h4a7cf45_{flavour}"
        r.append(
            PkgMeta(
                "libblas",
                "3.11.0",
                blas_build,
                5,
                depends=[dep],
                constrains=[
                    f"libcblas 3.11.0 5*_{flavour}",
                    f"liblapack 3.11.0 5*_{flavour}",
                    f"blas 2.305 {flavour}",
                    *([] if flavour == "mkl" else ["mkl <2026"]),
                ],
                track_features=tf,
            )
        )
        # the CBLAS and LAPACK faces of the same flavour: each pins libblas and constrains the other
        for name, build_hash, sibling in (("libcblas", "h0358290", "liblapack"), ("liblapack", "h47877c9", "libcblas")):
            r.append(
                PkgMeta(
                    name,
                    "3.11.0",
                    f"5_{build_hash}_{flavour}",
                    5,
                    depends=[f"libblas 3.11.0 {blas_build}"],
                    constrains=[f"{sibling} 3.11.0 5*_{flavour}"],
                    track_features="blas_mkl" if flavour == "mkl" else None,
                )
            )
    for kind, number, extra, sel in (
        (
            "cpu_mkl",
            103,
            ["libblas * *mkl", "libcblas >=3.9.0,<4.0a0", "mkl >=2025,<2026.0a0"],
            ("pytorch-cpu 2.10.0", "pytorch-gpu <0.0a0"),
        ),
        (
            "cpu_generic",
            3,
            ["libblas >=3.9.0,<4.0a0", "libcblas >=3.9.0,<4.0a0", "liblapack >=3.9.0,<4.0a0", "nomkl"],
            ("pytorch-cpu 2.10.0", "pytorch-gpu <0.0a0"),
        ),
        (
            "cuda129_mkl",
            303,
            ["libblas * *mkl", "libcblas >=3.9.0,<4.0a0", "mkl >=2025,<2026.0a0", "cuda-version >=12.9,<13", "__cuda"],
            ("pytorch-gpu 2.10.0", "pytorch-cpu <0.0a0"),
        ),
    ):
        generic_constraints = ["libopenblas * openmp_*", "openblas * openmp_*"] if "generic" in kind else []
        lt_build = f"{kind}_h0a1b2c3_{number}"
        r.append(
            PkgMeta(
                "libtorch",
                "2.10.0",
                lt_build,
                number,
                depends=[*OMP_LLVM, *extra],
                constrains=[*sel, f"pytorch 2.10.0 {kind}_*_{number}", *generic_constraints],
            )
        )
        r.append(
            PkgMeta(
                "pytorch",
                "2.10.0",
                f"{kind}_py312_h0a1b2c3_{number}",
                number,
                depends=[
                    f"libtorch 2.10.0 {lt_build}",
                    "llvm-openmp >=21",
                    "_openmp_mutex * *_llvm",
                    "numpy >=1.23,<3",
                    *PY,
                    *[e for e in extra if e.startswith(("libblas *", "nomkl", "__cuda"))],
                ],
                constrains=list(sel),
            )
        )
    r.append(PkgMeta("pytorch-gpu", "2.10.0", "cuda129_mkl_h0a1b2c3_303", 303, depends=["pytorch 2.10.0 cuda*_mkl*303"]))
    r.append(PkgMeta("pytorch-cpu", "2.10.0", "cpu_mkl_h0a1b2c3_103", 103, depends=["pytorch 2.10.0 cpu_mkl*103"]))
    r.append(
        PkgMeta(
            "torchvision",
            "0.25.0",
            "cpu_py312_h0a1b2c3_0",
            depends=["pytorch * cpu*", "pytorch >=2.10.0,<2.11.0a0", "libtorch >=2.10.0,<2.11.0a0", *PY],
        )
    )
    r.append(
        PkgMeta(
            "torchvision",
            "0.25.0",
            "cuda129_py312_h0a1b2c3_0",
            depends=["pytorch * cuda*", "pytorch >=2.10.0,<2.11.0a0", "libtorch >=2.10.0,<2.11.0a0", "cuda-version >=12.9,<13", *PY],
        )
    )
    return r


def pytorch_channel_records() -> list[PkgMeta]:
    """The legacy pytorch channel plus the defaults-style packages it resolved against."""
    legacy = ["blas * mkl", "mkl >=2018", "llvm-openmp <16", "python >=3.12,<3.13.0a0", "numpy >=1.21"]
    return [
        PkgMeta("pytorch", "2.5.1", "py3.12_cpu_0", depends=[*legacy, "pytorch-mutex 1.0 cpu"], constrains=["cpuonly"]),
        PkgMeta(
            "pytorch",
            "2.5.1",
            "py3.12_cuda12.4_cudnn9.1.0_0",
            depends=[*legacy, "pytorch-mutex 1.0 cuda", "pytorch-cuda >=12.4,<12.5"],
            constrains=["cpuonly <0"],
        ),
        PkgMeta("pytorch-mutex", "1.0", "cpu", track_features="pytorch-mutex", subdir="noarch", noarch="generic"),
        PkgMeta("pytorch-mutex", "1.0", "cuda", 100, subdir="noarch", noarch="generic"),
        PkgMeta("cpuonly", "2.0", "0", depends=["pytorch-mutex 1.0 cpu"], track_features="cpuonly", subdir="noarch", noarch="generic"),
        PkgMeta("pytorch-cuda", "12.4", "hc786d27_7", 7, depends=["__cuda"]),
        PkgMeta("blas", "1.0", "mkl"),
        PkgMeta("mkl", "2023.1.0", "h213fc3f_46344", depends=["intel-openmp 2023.*", "tbb 2021.*"]),
        PkgMeta("mkl", "2024.1.0", "h8b9c8d0_0", depends=["intel-openmp 2024.*", "tbb 2021.*"]),
        PkgMeta("intel-openmp", "2023.1.0", "hdb19cb5_46306"),
        PkgMeta("intel-openmp", "2024.1.0", "h06a4308_0"),
        PkgMeta("tbb", "2021.8.0", "hdb19cb5_0"),
        PkgMeta("llvm-openmp", "15.0.7", "h0cdce71_0", constrains=["openmp 15.0.7|15.0.7.*"]),
        # defaults' MKL numpy imports mkl-service at import time (AnacondaRecipes 0003-intel_init_mkl.patch)
        PkgMeta(
            "numpy",
            "1.26.4",
            "py312hc5e2394_0",
            depends=["blas 1.0 mkl", "mkl >=2023.1.0,<2025.0a0", "mkl-service >=2.3.0,<3.0a0", "python >=3.12,<3.13.0a0"],
        ),
        PkgMeta("mkl-service", "2.4.0", "py312h5eee18b_1", 1, depends=["mkl >=2023.1.0,<2025.0a0", "python >=3.12,<3.13.0a0"]),
    ]


def build_replica(root: Path) -> dict[str, Path]:
    """Write and index both channels under root; returns {channel name: path}."""
    out = {}
    for name, records in (("conda-forge", conda_forge_records()), ("pytorch", pytorch_channel_records())):
        channel = root / name
        for meta in records:
            write_tar_bz2(channel, meta)
        index_channel(channel)
        out[name] = channel
    return out
