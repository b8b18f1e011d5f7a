"""A real image builder for the Dockerfile export: buildah, the engine under podman, from Debian
(tools/test.sh installs it). It runs here without a daemon or privileges beyond the test's own:
vfs storage in the test's tmp dir and chroot isolation. No registry is reachable, so the base
image is made here: an empty root whose RUN steps see this machine's /usr, its Python and the
test conda through read-only mounts, the way an image would carry them. The Dockerfile under
test is built exactly as exported (but for its FROM, given with `envkit export --base`)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

SKELETON_LINKS = {"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64"}  # Debian's merged /usr
SKELETON_DIRS = ("etc", "opt", "root", "tmp", "usr")


def buildah_exe() -> Path:
    """Missing, the test fails (it never skips: a skip would pass without the builder)."""
    found = shutil.which("buildah")
    if found is None:
        pytest.fail("no buildah to build the exported Dockerfile with: run bash tools/test.sh (it installs it from Debian)")
    return Path(found)


def _skeleton() -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for name in SKELETON_DIRS:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
            tar.addfile(info)
        for name, target in SKELETON_LINKS.items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return data.getvalue()


@dataclass(frozen=True)
class Builder:
    """buildah with its images and containers under `root` (a test's tmp dir); outside it buildah
    keeps only its cache of blob metadata (/var/lib/containers/cache) and network config."""

    root: Path
    mounts: tuple[Path, ...]  # host folders RUN steps see read-only at the same paths

    def _base_args(self) -> list[str]:
        return [str(buildah_exe()), "--root", str(self.root / "storage"), "--runroot", str(self.root / "run"), "--storage-driver", "vfs"]

    def run(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self._base_args(), *args], capture_output=True, text=True, timeout=timeout, check=False)

    def ok(self, *args: str, timeout: float = 900) -> str:
        proc = self.run(*args, timeout=timeout)
        assert proc.returncode == 0, f"buildah {' '.join(args[:3])} -> {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc.stdout

    def conda_image(self, conda: Path, name: str, env: dict[str, str], arch: str | None = None) -> str:
        """An image with `conda` on its PATH and `env` in its config, as a team's base image would
        be; `arch`: the machine it says it is for (another than this one's: as a builder on an Apple
        Silicon laptop has its own)."""
        self.root.mkdir(parents=True, exist_ok=True)
        skeleton = self.root / "skeleton.tar"
        skeleton.write_bytes(_skeleton())
        container = self.ok("from", "scratch").strip()
        self.ok("add", container, str(skeleton), "/")
        path = f"{conda.parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        config = [arg for key, value in {"PATH": path, "HOME": "/root", **env}.items() for arg in ("--env", f"{key}={value}")]
        self.ok("config", *config, *(["--arch", arch] if arch else []), container)
        self.ok("commit", "--quiet", container, name)
        self.ok("rm", container)
        return f"localhost/{name}"

    def build(self, dockerfile: Path, tag: str) -> subprocess.CompletedProcess[str]:
        volumes = [arg for path in self.mounts for arg in ("--volume", f"{path}:{path}:ro")]
        context = dockerfile.parent
        # no registry here: an image is local or not there (a pull would wait on a connection first)
        return self.run(
            "bud", "--pull-never", "--isolation", "chroot", "--layers=false", *volumes, "-f", str(dockerfile), "-t", tag, str(context)
        )

    def config_env(self, image: str) -> dict[str, str]:
        """The image's environment, as `docker run` would start a process with it."""
        config = json.loads(self.ok("inspect", "--type", "image", image))["OCIv1"]["config"]
        return dict(entry.split("=", 1) for entry in config.get("Env") or ())

    def files(self, image: str, path: str) -> list[str]:
        """The names in `path` inside the image's root."""
        container = self.ok("from", image).strip()
        try:
            root = Path(self.ok("mount", container).strip())
            return sorted(p.name for p in (root / path.lstrip("/")).iterdir())
        finally:
            self.run("umount", container)
            self.run("rm", container)


def host_mounts(*extra: Path) -> tuple[Path, ...]:
    """What a RUN step needs from this machine: /usr (the shell, libc), the Python the test conda
    and the test envs' pythons link to, and `extra` (conda, the channels)."""
    python_root = Path(sys.base_prefix).resolve()
    return (Path("/usr"), python_root, *extra)
