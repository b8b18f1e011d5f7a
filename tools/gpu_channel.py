"""A local channel and CUDA recipes for tools/gpu-check.sh, so that a GPU node checks `envkit create`
of a CUDA recipe end to end: rattler detecting the real driver's __cuda, the plan, the create, the
probe on the GPU and the record saying the GPU part was proven.

No conda channel can be reached from the nodes we are lent, and their CUDA torch (gigabytes of
wheels) cannot travel with the tree, so the payload is the node's own: the channel's `pytorch`
package links each entry of the site-packages of PYTHON (the interpreter whose torch is a CUDA
build: torch, the nvidia-* libraries, numpy...) into the env's site-packages, so the env imports
them from itself. (A .pth file pointing there would not do: the probe's `origin` check rightly
fails modules found outside the env.) Its metadata is shaped after conda-forge's CUDA builds (build string
`cudaXYZ_mkl_pyXY_*`, depends on `__cuda` and `cuda-version`), and `cuda-version` constrains `__cuda`
as conda-forge's does, so the solve meets the driver as a real CUDA env's would. The pytorch
builds for the node's CUDA come in three GPU variants as conda-forge ranks them (CEP 46: each needs
`cuda-arch >=` 8.0, 9.0 or 10.0, the newest GPUs' with the highest build number, and `cuda-arch`
constrains `__cuda_arch`); their files are the same (the node's torch), so the solve, the plan
audit and the env audit are what they check, not the kernels.

    python tools/gpu_channel.py OUT_DIR     # run by PYTHON; writes OUT_DIR/channel, OUT_DIR/recipes
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_conda  # noqa: E402
from tests.support.wheelchannel import python_shim  # noqa: E402


def _torch() -> tuple[str, str, Path]:
    """(version without the local part, CUDA major.minor, the site-packages holding torch), read
    from torch's own version.py without importing torch (seconds, and a CUDA context)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise SystemExit(f"{sys.executable} has no torch")
    package = Path(spec.origin).parent
    text = (package / "version.py").read_text(encoding="utf-8")

    def value(name: str) -> str | None:  # `name: Optional[str] = '13.0'`, as torch writes it
        found = re.search(rf"^{name}\s*(?::[^=\n]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
        return found.group(1) if found else None

    version = value("__version__") or "0"
    # ENVKIT_GPU_CHANNEL_CUDA stands in for a CPU torch's missing CUDA, to rehearse on a CPU machine
    cuda = value("cuda") or os.environ.get("ENVKIT_GPU_CHANNEL_CUDA")
    if cuda is None:
        raise SystemExit(f"torch {version} at {package} is not a CUDA build")
    return version.split("+", 1)[0], ".".join(cuda.split(".")[:2]), package.parent


def _interpreter() -> tuple[Path, str]:
    """The real binary behind this python (a venv's is a link) and its full version."""
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    real = base.resolve() if base.exists() else Path(os.path.realpath(sys.executable))
    return real, ".".join(map(str, sys.version_info[:3]))


SKIP = {"__pycache__", "pip", "setuptools", "pkg_resources", "_distutils_hack", "envkit"}


def _links(site: Path, into: str) -> list[PkgFile]:
    """A link for each top-level entry of `site`, but the installers' own and .pth files (code
    run at every start). Metadata folders are copied instead, saying INSTALLER conda as a conda
    package's do, so conda, pip and envkit's audit see conda's packages, not pip's."""
    out: list[PkgFile] = []
    for entry in sorted(site.iterdir()):
        if entry.name.split("-", 1)[0] in SKIP or entry.name.endswith(".pth"):
            continue
        if entry.name.endswith(".dist-info"):
            kept = ("METADATA", "top_level.txt", "entry_points.txt")
            out += [PkgFile(f"{into}/{entry.name}/{n}", (entry / n).read_bytes()) for n in kept if (entry / n).is_file()]
            out.append(PkgFile(f"{into}/{entry.name}/INSTALLER", b"conda\n"))
        else:
            out.append(PkgFile(f"{into}/{entry.name}", link_target=str(entry)))
    return out


def _same_major(cuda: str) -> str:
    return f"cuda-version >={cuda},<{int(cuda.partition('.')[0]) + 1}"


ARCHS = (("8.0", 0), ("9.0", 100), ("10.0", 200))  # compute capability, build number


def recipe(channel: Path, name: str, cuda: str, arch: str | None = None) -> str:
    declared = f'\n    cuda_arch: "{arch}"' if arch else ""
    return f"""envkit: 1
name: {name}
description: The node's CUDA torch in an env envkit makes (tools/gpu-check.sh).
channels: [{channel.as_uri()}]
platforms: [linux-64]
python: "{sys.version_info[0]}.{sys.version_info[1]}"
toolchain:
  pytorch:
    variant: cuda
    cuda: "{cuda}"{declared}
probe:
  imports: [torch]
  ddp: {{enabled: true, nproc: 2}}
  timeout: 240
"""


def build(out: Path) -> None:
    version, cuda, site = _torch()
    real, full = _interpreter()
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    channel = out / "channel"
    python_shim(channel, (real, full))
    digits = cuda.replace(".", "")
    newer = f"{int(cuda.split('.')[0]) + 1}.0"  # a CUDA this node's driver is older than
    for cv in (cuda, newer):
        meta = PkgMeta(
            "cuda-version", cv, "h0_0", constrains=[f"__cuda >={cv}", f"cudatoolkit {cv}|{cv}.*"], subdir="noarch", noarch="generic"
        )
        write_conda(channel, meta, [])
    for arch, _ in ARCHS:
        write_conda(channel, PkgMeta("cuda-arch", arch, "0", constrains=[f"__cuda_arch {arch}"], subdir="noarch", noarch="generic"), [])
    payload = _links(site, f"lib/python{py}/site-packages")
    tag = py.replace(".", "")
    for arch, number in ARCHS:
        depends = [f"python {py}.*", "__cuda", _same_major(cuda), f"cuda-arch >={arch}"]
        build = f"cuda{digits}_mkl_py{tag}_sm{arch.replace('.', '')}_{number}"
        write_conda(channel, PkgMeta("pytorch", version, build, build_number=number, depends=depends), payload)
    depends = [f"python {py}.*", "__cuda", _same_major(newer)]
    write_conda(channel, PkgMeta("pytorch", version, f"cuda{newer.replace('.', '')}_mkl_py{tag}_node_0", depends=depends), payload)
    index_channel(channel)
    recipes = out / "recipes"
    recipes.mkdir(parents=True, exist_ok=True)
    (recipes / "gpu-node.yaml").write_text(recipe(channel, "gpu-node", cuda), encoding="utf-8")
    (recipes / "gpu-node-newer.yaml").write_text(recipe(channel, "gpu-node-newer", newer), encoding="utf-8")
    (recipes / "gpu-node-h200.yaml").write_text(recipe(channel, "gpu-node-h200", cuda, "9.0"), encoding="utf-8")
    print(f"torch {version} (CUDA {cuda}) from {site}; python {full} at {real}; newer CUDA {newer}")


if __name__ == "__main__":
    build(Path(sys.argv[1]))
