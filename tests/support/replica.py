"""A metadata-only replica of the parts of conda-forge and the legacy pytorch channel that decide
BLAS, OpenMP and pytorch flavours. Names, builds, depends, constrains and track_features follow the
feedstocks (see shared research conda-forge-facts.md); the archives carry no payload.

linux-64 is the fullest; linux-aarch64, osx-arm64 and win-64 follow the same feedstocks as they
build there (envkit.recipe.platforms): on linux-aarch64 no MKL, pytorch the generic (OpenBLAS)
build, CPU or CUDA for SBSA servers (Grace Hopper); no _openmp_mutex, libgomp or MKL on
osx-arm64, where pytorch is the generic CPU build and libblas also comes as accelerate; MKL-only
pytorch on win-64, with llvm-openmp as the runtime and conda-forge's intel-openmp excluding it."""

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
        PkgMeta("llvm-openmp", "15.0.7", "h0cdce71_0", depends=["__glibc >=2.17"], constrains=["openmp 15.0.7|15.0.7.*"]),
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
        PkgMeta(
            "cuda-version",
            "12.8",
            "h5d125a7_3",
            3,
            constrains=["__cuda >=12", "cudatoolkit 12.8|12.8.*"],
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
    r += _blas_family(
        "linux-64",
        {
            "openblas": ["libopenblas >=0.3.30,<0.3.31.0a0"],
            "mkl": ["mkl >=2025.3,<2026.0a0"],
            "blis": ["blis >=0.9.0,<0.9.1.0a0"],
        },
        mkl_cap="mkl <2026",
        faces_track_mkl=True,
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
        r += _linux_torch("linux-64", kind, number, extra, sel)
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


def _blas_family(subdir: str, flavours: dict[str, list[str]], mkl_cap: str | None, faces_track_mkl: bool = False) -> list[PkgMeta]:
    """libblas, libcblas and liblapack of each flavour (blas-feedstock: build 5, `5_h<hash>_FLAVOUR`);
    `mkl_cap` is the constraint the non-MKL flavours put on mkl."""
    out = []
    for flavour, depends in flavours.items():
        tf = {"mkl": "blas_mkl blas_mkl_2", "blis": "blas_blis", "accelerate": "blas_accelerate blas_accelerate_2"}.get(flavour)
        blas_build = f"5_h4a7cf45_{flavour}"
        constrains = [f"libcblas 3.11.0 5*_{flavour}", f"liblapack 3.11.0 5*_{flavour}", f"blas 2.305 {flavour}"]
        if mkl_cap and flavour != "mkl":
            constrains.append(mkl_cap)
        out.append(PkgMeta("libblas", "3.11.0", blas_build, 5, depends=depends, constrains=constrains, track_features=tf, subdir=subdir))
        # the CBLAS and LAPACK faces of the same flavour: each pins libblas and constrains the other
        for name, build_hash, sibling in (("libcblas", "h0358290", "liblapack"), ("liblapack", "h47877c9", "libcblas")):
            out.append(
                PkgMeta(
                    name,
                    "3.11.0",
                    f"5_{build_hash}_{flavour}",
                    5,
                    depends=[f"libblas 3.11.0 {blas_build}"],
                    constrains=[f"{sibling} 3.11.0 5*_{flavour}"],
                    track_features="blas_mkl" if faces_track_mkl and flavour == "mkl" else None,
                    subdir=subdir,
                )
            )
    return out


def _linux_torch(subdir: str, kind: str, number: int, extra: list[str], sel: tuple[str, ...]) -> list[PkgMeta]:
    """libtorch and pytorch of one conda-forge Linux build (`kind`: cpu_mkl, cuda129_generic, ...):
    llvm-openmp through _openmp_mutex; a generic build constrains OpenBLAS to its OpenMP flavour."""
    generic_constraints = ["libopenblas * openmp_*", "openblas * openmp_*"] if "generic" in kind else []
    lt_build = f"{kind}_h0a1b2c3_{number}"
    libtorch = PkgMeta(
        "libtorch",
        "2.10.0",
        lt_build,
        number,
        depends=[*OMP_LLVM, *extra],
        constrains=[*sel, f"pytorch 2.10.0 {kind}_*_{number}", *generic_constraints],
        subdir=subdir,
    )
    pytorch = PkgMeta(
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
        subdir=subdir,
    )
    return [libtorch, pytorch]


def linux_aarch64_records() -> list[PkgMeta]:
    """conda-forge on ARM Linux servers: _openmp_mutex and libgomp as on linux-64, no MKL
    (pytorch-cpu-feedstock's linux_aarch64 variants have no blas_impl mkl), pytorch
    `cpu_generic_*` and `cuda129_generic_*`, the CUDA build for SBSA (`arm-variant * sbsa`)."""
    sub, glibc = "linux-aarch64", "__glibc >=2.17"
    r = [
        PkgMeta(
            "python", "3.12.11", "h1683364_0_cpython", depends=[glibc, "libgcc >=14"], constrains=["python_abi 3.12.* *_cp312"], subdir=sub
        ),
        PkgMeta("libgomp", "15.2.0", "he277a41_18", 18, depends=[glibc], subdir=sub),
        PkgMeta(
            "libgcc", "15.2.0", "he277a41_18", 18, depends=["_openmp_mutex >=4.5"], constrains=["libgomp 15.2.0 he277a41_18"], subdir=sub
        ),
        PkgMeta("_openmp_mutex", "4.5", "20_gnu", 20, depends=["libgomp >=7.5.0"], constrains=["openmp_impl <0.0a0"], subdir=sub),
        PkgMeta("_openmp_mutex", "4.5", "7_kmp_llvm", 7, depends=["llvm-openmp >=9.0.1"], subdir=sub),
        PkgMeta(
            "llvm-openmp", "22.1.1", "h013ceaa_0", depends=[glibc], constrains=["openmp 22.1.1|22.1.1.*", "intel-openmp <0.0a0"], subdir=sub
        ),
        PkgMeta("libopenblas", "0.3.30", "pthreads_h9d3fd7e_4", 4, depends=["libgcc >=14"], subdir=sub),
        PkgMeta(
            "libopenblas",
            "0.3.30",
            "openmp_h5c1e0a8_4",
            4,
            depends=[*OMP_LLVM, "libgcc >=14"],
            track_features="openblas_threading_openmp",
            subdir=sub,
        ),
        PkgMeta(
            "numpy",
            "2.2.6",
            "py312h0_0",
            depends=["libblas >=3.9.0,<4.0a0", "libcblas >=3.9.0,<4.0a0", "liblapack >=3.9.0,<4.0a0", "libgcc >=14", *PY],
            subdir=sub,
        ),
        PkgMeta("arm-variant", "1.0.0", "sbsa", subdir=sub),
    ]
    for kind, number, extra, sel in (
        ("cpu_generic", 3, [], ("pytorch-cpu 2.10.0", "pytorch-gpu <0.0a0")),
        ("cuda129_generic", 203, ["cuda-version >=12.9,<13", "arm-variant * sbsa", "__cuda"], ("pytorch-gpu 2.10.0", "pytorch-cpu <0.0a0")),
    ):
        blas = ["libblas >=3.9.0,<4.0a0", "libcblas >=3.9.0,<4.0a0", "liblapack >=3.9.0,<4.0a0", "nomkl"]
        r += _linux_torch(sub, kind, number, [*blas, *extra], sel)
    r.append(PkgMeta("pytorch-cpu", "2.10.0", "cpu_generic_h0a1b2c3_3", 3, depends=["pytorch 2.10.0 cpu_generic*3"], subdir=sub))
    r.append(
        PkgMeta("pytorch-gpu", "2.10.0", "cuda129_generic_h0a1b2c3_203", 203, depends=["pytorch 2.10.0 cuda*_generic*203"], subdir=sub)
    )
    r.append(
        PkgMeta("torchvision", "0.25.0", "cpu_py312_h0a1b2c3_0", depends=["pytorch * cpu*", "pytorch >=2.10.0,<2.11.0a0", *PY], subdir=sub)
    )
    r.append(
        PkgMeta(
            "torchvision",
            "0.25.0",
            "cuda129_py312_h0a1b2c3_0",
            depends=["pytorch * cuda*", "pytorch >=2.10.0,<2.11.0a0", "cuda-version >=12.9,<13", *PY],
            subdir=sub,
        )
    )
    r += _blas_family(sub, {"openblas": ["libopenblas >=0.3.30,<0.3.31.0a0"]}, mkl_cap=None)
    return r


def osx_arm64_records() -> list[PkgMeta]:
    """conda-forge on Apple silicon: MACOSX_DEPLOYMENT_TARGET 11.0 (__osx >=11.0), llvm-openmp as the
    only OpenMP runtime (no _openmp_mutex), pytorch `cpu_generic_*` only (blas_impl generic)."""
    sub, osx = "osx-arm64", "__osx >=11.0"
    r = [
        PkgMeta("python", "3.12.11", "h0_0_cpython", depends=[osx, "libcxx >=19"], constrains=["python_abi 3.12.* *_cp312"], subdir=sub),
        PkgMeta("libcxx", "21.1.0", "hf598326_1", 1, depends=[osx], subdir=sub),
        PkgMeta(
            "llvm-openmp", "22.1.1", "h4a9ee5d_0", depends=[osx], constrains=["openmp 22.1.1|22.1.1.*", "intel-openmp <0.0a0"], subdir=sub
        ),
        PkgMeta("libopenblas", "0.3.30", "openmp_h60d53f8_4", 4, depends=[osx, "llvm-openmp >=19", "libgfortran5 >=14"], subdir=sub),
        PkgMeta("libgfortran5", "15.2.0", "h742603c_1", 1, depends=[osx, "llvm-openmp >=8.0.0"], subdir=sub),
        PkgMeta(
            "numpy",
            "2.2.6",
            "py312h0_0",
            depends=["libblas >=3.9.0,<4.0a0", "libcblas >=3.9.0,<4.0a0", "liblapack >=3.9.0,<4.0a0", "libcxx >=19", *PY, osx],
            subdir=sub,
        ),
        PkgMeta(
            "libtorch",
            "2.10.0",
            "cpu_generic_h0a1b2c3_3",
            3,
            depends=["llvm-openmp >=19", "libblas >=3.9.0,<4.0a0", "libcblas >=3.9.0,<4.0a0", "liblapack >=3.9.0,<4.0a0", "nomkl", osx],
            constrains=["pytorch-cpu 2.10.0", "pytorch-gpu <0.0a0", "pytorch 2.10.0 cpu_generic_*_3", "libopenblas * openmp_*"],
            subdir=sub,
        ),
        PkgMeta(
            "pytorch",
            "2.10.0",
            "cpu_generic_py312_h0a1b2c3_3",
            3,
            depends=["libtorch 2.10.0 cpu_generic_h0a1b2c3_3", "llvm-openmp >=19", "numpy >=1.23,<3", "nomkl", *PY, osx],
            constrains=["pytorch-cpu 2.10.0", "pytorch-gpu <0.0a0"],
            subdir=sub,
        ),
        PkgMeta("pytorch-cpu", "2.10.0", "cpu_generic_h0a1b2c3_3", 3, depends=["pytorch 2.10.0 cpu_generic*3"], subdir=sub),
        PkgMeta("torchvision", "0.25.0", "cpu_py312_h0a1b2c3_0", depends=["pytorch * cpu*", "pytorch >=2.10.0,<2.11.0a0", *PY], subdir=sub),
    ]
    r += _blas_family(
        sub,
        {
            "openblas": ["libopenblas >=0.3.30,<0.3.31.0a0"],
            "accelerate": [osx],
            "newaccelerate": ["__osx >=15.5"],
        },
        mkl_cap=None,
    )
    return r


def win_64_records() -> list[PkgMeta]:
    """conda-forge on Windows: pytorch `cpu_mkl_*` / `cuda128_mkl_*` only (blas_impl mkl), MKL and
    pytorch with llvm-openmp (whose run_exports add no _openmp_mutex there); conda-forge's
    intel-openmp exists only here and excludes llvm-openmp."""
    sub, rt = "win-64", ["ucrt >=10.0.20348.0", "vc >=14.3", "vc14_runtime >=14.44.35208"]
    r = [
        PkgMeta("python", "3.12.11", "h0_0_cpython", depends=rt, constrains=["python_abi 3.12.* *_cp312"], subdir=sub),
        PkgMeta("ucrt", "10.0.22621.0", "h57928b3_1", 1, depends=["__win"], subdir=sub),
        PkgMeta("vc", "14.3", "h2b53caa_32", 32, depends=["vc14_runtime >=14.42.34433"], subdir=sub),
        PkgMeta("vc14_runtime", "14.44.35208", "h818238b_32", 32, depends=["ucrt >=10.0.20348.0"], subdir=sub),
        PkgMeta(
            "llvm-openmp", "22.1.1", "h4fa8253_0", depends=rt, constrains=["openmp 22.1.1|22.1.1.*", "intel-openmp <0.0a0"], subdir=sub
        ),
        PkgMeta("intel-openmp", "2026.0.0", "h57928b3_951", 951, constrains=["llvm-openmp <0a0"], subdir=sub),
        PkgMeta("tbb", "2023.0.0", "h18a62a1_0", depends=rt, subdir=sub),
        PkgMeta("onemkl-license", "2026.0.0", "h57928b3_908", 908, subdir=sub),
        PkgMeta(
            "mkl",
            "2026.0.0",
            "h57928b3_908",
            908,
            depends=["llvm-openmp >=22.1.1", "tbb >=2023.0.0", "onemkl-license 2026.0.0 h57928b3_908", *rt],
            subdir=sub,
        ),
        PkgMeta("mkl-service", "2.8.0", "py312h0_0", depends=[*PY, "mkl >=2026.0,<2027.0a0", *rt], subdir=sub),
        PkgMeta("libopenblas", "0.3.30", "pthreads_h877e47f_4", 4, depends=rt, subdir=sub),
        PkgMeta("libuv", "1.51.0", "hfd05255_1", 1, depends=rt, subdir=sub),
        PkgMeta(
            "numpy",
            "2.2.6",
            "py312h0_0",
            depends=["libblas >=3.9.0,<4.0a0", "libcblas >=3.9.0,<4.0a0", "liblapack >=3.9.0,<4.0a0", *PY, *rt],
            subdir=sub,
        ),
    ]
    for kind, number, extra, sel in (
        ("cpu_mkl", 103, [], ("pytorch-cpu 2.10.0", "pytorch-gpu <0.0a0")),
        ("cuda128_mkl", 303, ["cuda-version >=12.8,<13", "__cuda"], ("pytorch-gpu 2.10.0", "pytorch-cpu <0.0a0")),
    ):
        lt_build = f"{kind}_h0a1b2c3_{number}"
        mkl = ["llvm-openmp >=22", "libblas * *mkl", "libcblas >=3.9.0,<4.0a0", "mkl >=2026.0,<2027.0a0", "libuv >=1.51.0,<2.0a0"]
        r.append(
            PkgMeta(
                "libtorch",
                "2.10.0",
                lt_build,
                number,
                depends=[*mkl, *extra, *rt],
                constrains=[*sel, f"pytorch 2.10.0 {kind}_*_{number}"],
                subdir=sub,
            )
        )
        r.append(
            PkgMeta(
                "pytorch",
                "2.10.0",
                f"{kind}_py312_h0a1b2c3_{number}",
                number,
                depends=[f"libtorch 2.10.0 {lt_build}", "llvm-openmp >=22", "libblas * *mkl", "numpy >=1.23,<3", *PY, *rt, *extra[1:]],
                constrains=list(sel),
                subdir=sub,
            )
        )
    r.append(PkgMeta("pytorch-cpu", "2.10.0", "cpu_mkl_h0a1b2c3_103", 103, depends=["pytorch 2.10.0 cpu_mkl*103"], subdir=sub))
    r.append(
        PkgMeta(
            "torchvision", "0.25.0", "cpu_py312_h0a1b2c3_0", depends=["pytorch * cpu*", "pytorch >=2.10.0,<2.11.0a0", *PY, *rt], subdir=sub
        )
    )
    r.append(
        PkgMeta(
            "torchvision",
            "0.25.0",
            "cuda128_py312_h0a1b2c3_0",
            depends=["pytorch * cuda*", "pytorch >=2.10.0,<2.11.0a0", "cuda-version >=12.8,<13", *PY, *rt],
            subdir=sub,
        )
    )
    r += _blas_family(sub, {"mkl": ["mkl >=2026.0,<2027.0a0"], "openblas": ["libopenblas >=0.3.30,<0.3.31.0a0"]}, mkl_cap="mkl <2027")
    return r


def pytorch_channel_records() -> list[PkgMeta]:
    """The legacy pytorch channel (pytorch/builder): only pytorch and its selector packages; the
    rest came from Anaconda's defaults (PyTorch's own install lines: `-c pytorch` on top of defaults)."""
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
    ]


def defaults_records() -> list[PkgMeta]:
    """The part of Anaconda's defaults (pkgs/main) that pytorch-channel envs resolved against:
    MKL with Intel OpenMP, the blas mutex, an llvm-openmp older than 16, MKL numpy."""
    return [
        PkgMeta("python", "3.12.4", "h5148396_1", 1, depends=["__glibc >=2.17"]),
        PkgMeta("blas", "1.0", "mkl"),
        PkgMeta("mkl", "2023.1.0", "h213fc3f_46344", depends=["intel-openmp 2023.*", "tbb 2021.*"]),
        PkgMeta("mkl", "2024.1.0", "h8b9c8d0_0", depends=["intel-openmp 2024.*", "tbb 2021.*"]),
        PkgMeta("intel-openmp", "2023.1.0", "hdb19cb5_46306"),
        PkgMeta("intel-openmp", "2024.1.0", "h06a4308_0"),
        PkgMeta("tbb", "2021.8.0", "hdb19cb5_0"),
        PkgMeta("llvm-openmp", "14.0.6", "h9e868ea_0"),
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
    """Write and index the channels under root; returns {channel name: path}."""
    out = {}
    cf = [*conda_forge_records(), *linux_aarch64_records(), *osx_arm64_records(), *win_64_records()]
    for name, records in (("conda-forge", cf), ("pytorch", pytorch_channel_records()), ("defaults", defaults_records())):
        channel = root / name
        for meta in records:
            write_tar_bz2(channel, meta)
        index_channel(channel)
        out[name] = channel
    return out
