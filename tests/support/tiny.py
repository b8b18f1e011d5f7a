"""A channel of two small real packages, for tests of the transaction, the record and the CLI that
must be quick: no solve against the replica, no payload to speak of."""

from __future__ import annotations

from pathlib import Path

from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_tar_bz2


def tiny_channel(root: Path, payload: bytes = b"v1\n", extra: tuple[PkgMeta, ...] = ()) -> Path:
    ch = root / "tiny"
    write_tar_bz2(ch, PkgMeta("tool", "1.0", "0", depends=["helper"]), [PkgFile("share/tool/version.txt", payload)])
    write_tar_bz2(ch, PkgMeta("helper", "1.0", "0"), [PkgFile("share/helper/data.txt", b"helper\n")])
    for meta in extra:
        write_tar_bz2(ch, meta, [PkgFile(f"share/{meta.name}/data.txt", f"{meta.name}\n".encode())])
    index_channel(ch)
    return ch


def tiny_recipe(root: Path, channel: Path, name: str = "tiny", threading: str = "{omp_num_threads: 2}") -> Path:
    folder = root / "recipes"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(
        f"envkit: 1\nname: {name}\nchannels: [{channel.as_uri()}]\npackages: [tool]\nthreading: {threading}\n", encoding="utf-8"
    )
    return path


def python_builds_channel(root: Path, newer_needs: str | None = None) -> Path:
    """Two pythons (3.11, 3.12; metadata and a file, no interpreter) and `numpyish` 1.0 and 1.1
    built for each, as conda-forge builds a compiled package per python: moving python changes
    every such package's build. `newer_needs`: a `helper` 1.0 and 1.1 too, whose 1.1 needs
    numpyish >=1.1 (a package the recipe moves that needs a newer one)."""
    ch = root / "pybuilds"
    for python in ("3.11", "3.12"):
        tag = "py" + python.replace(".", "")
        write_tar_bz2(ch, PkgMeta("python", f"{python}.0", "0"), [PkgFile("share/python.txt", python.encode())])
        for version in ("1.0", "1.1"):
            meta = PkgMeta("numpyish", version, f"{tag}_0", depends=[f"python >={python},<{python}.999"])
            write_tar_bz2(ch, meta, [PkgFile("share/numpyish.txt", f"{version} {tag}".encode())])
    if newer_needs:
        for version, needs in (("1.0", "numpyish"), ("1.1", newer_needs)):
            write_tar_bz2(ch, PkgMeta("helper", version, "0", depends=[needs]), [PkgFile("share/helper.txt", version.encode())])
    index_channel(ch)
    return ch


def cuda_arch_channel(root: Path) -> Path:
    """CUDA builds per GPU architecture, shaped as conda-forge ships them (CEP 46): one `cuda-arch`
    per compute capability, each constraining `__cuda_arch` to itself, and a pytorch variant for
    each of 8.0, 9.0 and 10.0 that needs `cuda-arch >=` it, the newest GPUs' with the highest build
    number; `cuda-version` constrains `__cuda`. Metadata and a file each, no payload."""
    ch = root / "cuda-arch"
    write_tar_bz2(ch, PkgMeta("cuda-version", "12.9", "0", constrains=["__cuda >=12.9"], subdir="noarch", noarch="generic"))
    for arch in ("7.0", "8.0", "9.0", "10.0"):
        write_tar_bz2(ch, PkgMeta("cuda-arch", arch, "0", constrains=[f"__cuda_arch {arch}"], subdir="noarch", noarch="generic"))
    for arch, number in (("8.0", 0), ("9.0", 100), ("10.0", 200)):
        meta = PkgMeta(
            "pytorch",
            "2.9.0",
            f"cuda129_mkl_sm{arch.replace('.', '')}_{number}",
            build_number=number,
            depends=["__cuda", "cuda-version >=12.9,<13", f"cuda-arch >={arch}"],
        )
        write_tar_bz2(ch, meta, [PkgFile("share/pytorch/arch.txt", arch.encode())])
    index_channel(ch)
    return ch


def cuda_recipe(root: Path, channel: Path, arch: str | None = None, name: str = "gpu") -> Path:
    folder = root / "recipes"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    declared = f", cuda_arch: '{arch}'" if arch else ""
    path.write_text(
        f"envkit: 1\nname: {name}\nchannels: [{channel.as_uri()}]\nplatforms: [linux-64]\n"
        f"toolchain: {{pytorch: {{variant: cuda, cuda: '12.9'{declared}}}}}\n",
        encoding="utf-8",
    )
    return path
