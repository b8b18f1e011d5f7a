"""What a prefix claims to have installed, read from conda-meta and dist-info as conda and pip write them."""

from __future__ import annotations

import json
from pathlib import Path

from envkit.prefix.installed import PipDist, installed_torch_build, pip_dists, site_packages, wheel_torch_build


def dist_info(folder: Path) -> None:
    folder.mkdir(parents=True)
    name, _, version = folder.name.removesuffix(".dist-info").partition("-")
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_installed_torch_build_from_records_and_wheels(tmp_path: Path) -> None:
    conda_cuda = tmp_path / "a"
    (conda_cuda / "conda-meta").mkdir(parents=True)
    fields = {"build_number": 0, "depends": [], "files": []}  # what every conda record has
    record = {"name": "pytorch", "version": "2.10.0", "build": "cuda129_mkl_py312_h0123456_300", **fields}
    (conda_cuda / "conda-meta" / "pytorch-2.10.0-cuda129_mkl_py312_h0123456_300.json").write_text(json.dumps(record))
    # a look-alike name must not count as pytorch
    lightning = {"name": "pytorch-lightning", "version": "2.6.0", "build": "pyhd8ed1ab_0", **fields}
    (conda_cuda / "conda-meta" / "pytorch-lightning-2.6.0-pyhd8ed1ab_0.json").write_text(json.dumps(lightning))
    assert installed_torch_build(conda_cuda) == "cuda"
    legacy = tmp_path / "b"
    (legacy / "conda-meta").mkdir(parents=True)
    legacy_record = {"name": "pytorch", "version": "2.3.1", "build": "py3.11_cpu_0", **fields}
    (legacy / "conda-meta" / "pytorch-2.3.1-py3.11_cpu_0.json").write_text(json.dumps(legacy_record))
    assert installed_torch_build(legacy) == "cpu"
    wheel = tmp_path / "c"
    dist_info(wheel / "lib" / "python3.12" / "site-packages" / "torch-2.11.0+cu130.dist-info")
    assert installed_torch_build(wheel) == "cuda"
    plain = tmp_path / "d"
    dist_info(plain / "lib" / "python3.12" / "site-packages" / "torch-2.11.0.dist-info")
    # what an uninstall leaves when RECORD missed a file is no distribution (pip lists none either)
    leftover = tmp_path / "e" / "lib" / "python3.12" / "site-packages" / "torch-2.11.0+cu130.dist-info"
    leftover.mkdir(parents=True)
    (leftover / "INSTALLER").write_text("conda\n")
    assert installed_torch_build(tmp_path / "e") is None
    assert installed_torch_build(plain) is None
    # ROCm builds report torch.version.cuda = None: their local version makes no CUDA claim
    assert wheel_torch_build("2.11.0+rocm6.4") is None
    assert wheel_torch_build("2.11.0+cu130") == ("cuda", "13.0") and wheel_torch_build("2.13.0+cpu") == ("cpu", None)


def test_the_site_packages_are_the_env_pythons_own(tmp_path: Path) -> None:
    """A python 3.11 -> 3.12 move leaves lib/python3.11 beside lib/python3.12: what is there is no
    longer the env's (the new python does not read it), so neither pip's wheels nor their drift
    are taken from it; with no bin/python3.X to tell, every one is read as before."""
    for version in ("3.11", "3.12"):
        dist = tmp_path / "lib" / f"python{version}" / "site-packages" / f"mpmath-{version}.0.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: mpmath\nVersion: {version}.0\n")
        (dist / "INSTALLER").write_text("pip\n")
    assert [s.parent.name for s in site_packages(tmp_path)] == ["python3.11", "python3.12"]
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3.12").symlink_to("/usr/bin/python3")
    assert [s.parent.name for s in site_packages(tmp_path)] == ["python3.12"]
    assert pip_dists(tmp_path)["mpmath"].version == "3.12.0"


def test_the_url_that_gets_a_wheel_again_is_of_the_wheel_there_not_the_one_recorded() -> None:
    """What an export, a rollback's journal and `sync --update` name for a wheel: the URL pip
    installed it by (a git wheel at the commit there, which a `pip install` may have moved), else
    envkit's recorded file only where it is of the version there and not a commit the env lacks."""
    sha, other = "4a4a99ba1801e0e40cd85c54c9f58942ddf6508c", "0" * 40

    def dist(version: str, source: str | None = None) -> PipDist:
        return PipDist("proj", version, "pip", "lib/python3.11/site-packages/proj-0.1.dist-info", ("proj",), (), source=source)

    moved = dist("0.1", f"git+https://h.example/r@{other}#subdirectory=pkg")
    assert moved.commit == other
    assert (
        moved.reinstall_url(f"git+https://h.example/r@{sha}#subdirectory=pkg", "0.1") == f"git+https://h.example/r@{other}#subdirectory=pkg"
    )
    from_index = dist("0.1")
    assert from_index.reinstall_url(f"git+https://h.example/r@{sha}", "0.1") == ""  # no commit there: nothing from git to name
    assert from_index.reinstall_url("https://f.example/proj-0.1.whl#sha256=ab", "0.1") == "https://f.example/proj-0.1.whl#sha256=ab"
    assert dist("0.2").reinstall_url("https://f.example/proj-0.1.whl#sha256=ab", "0.1") == ""  # moved since: not the recorded file
