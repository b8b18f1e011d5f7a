"""Write conda packages for the test channels: metadata-only .tar.bz2 and payload .conda archives."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import tarfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import zstandard
from rattler.index import index_fs


@dataclass
class PkgFile:
    path: str  # relative to the prefix
    data: bytes = b""
    mode: int = 0o644
    link_target: str | None = None  # a symlink when set


@dataclass
class PkgMeta:
    name: str
    version: str
    build: str
    build_number: int = 0
    depends: list[str] = field(default_factory=list)
    constrains: list[str] = field(default_factory=list)
    track_features: str | None = None
    subdir: str = "linux-64"
    noarch: str | None = None

    @property
    def filename_stem(self) -> str:
        return f"{self.name}-{self.version}-{self.build}"

    def index_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "name": self.name,
            "version": self.version,
            "build": self.build,
            "build_number": self.build_number,
            "depends": self.depends,
            "constrains": self.constrains,
            "subdir": self.subdir,
            "timestamp": 1_767_225_600_000,
            "license": "test-only",
        }
        if self.subdir != "noarch":
            arch = {"64": "x86_64", "arm64": "arm64", "aarch64": "aarch64", "ppc64le": "ppc64le"}[self.subdir.split("-", 1)[1]]
            out["platform"], out["arch"] = {"osx": "osx", "win": "win", "linux": "linux"}[self.subdir.split("-", 1)[0]], arch
        if self.track_features:
            out["track_features"] = self.track_features
        if self.noarch:
            out["noarch"] = self.noarch
        return out


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 1_700_000_000
    tar.addfile(info, io.BytesIO(data))


def _info_members(meta: PkgMeta, files: list[PkgFile]) -> list[tuple[str, bytes]]:
    paths: list[dict[str, object]] = []
    for f in files:
        if f.link_target is not None:
            paths.append({"_path": f.path, "path_type": "softlink"})
        else:
            paths.append(
                {"_path": f.path, "path_type": "hardlink", "sha256": hashlib.sha256(f.data).hexdigest(), "size_in_bytes": len(f.data)}
            )
    return [
        ("info/index.json", json.dumps(meta.index_json(), indent=1).encode()),
        ("info/paths.json", json.dumps({"paths": paths, "paths_version": 1}, indent=1).encode()),
        ("info/files", "".join(f"{f.path}\n" for f in files).encode()),
    ]


def _payload(tar: tarfile.TarFile, files: list[PkgFile]) -> None:
    for f in files:
        if f.link_target is not None:
            info = tarfile.TarInfo(f.path)
            info.type, info.linkname, info.mtime = tarfile.SYMTYPE, f.link_target, 1_700_000_000
            tar.addfile(info)
        else:
            _add(tar, f.path, f.data, f.mode)


def write_tar_bz2(channel: Path, meta: PkgMeta, files: Iterable[PkgFile] = ()) -> Path:
    files = list(files)
    out = channel / meta.subdir / f"{meta.filename_stem}.tar.bz2"
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:bz2", compresslevel=1) as tar:
        for name, data in _info_members(meta, files):
            _add(tar, name, data)
        _payload(tar, files)
    return out


def write_conda(channel: Path, meta: PkgMeta, files: Iterable[PkgFile]) -> Path:
    """The .conda v2 format: a stored zip of metadata.json, pkg-*.tar.zst and info-*.tar.zst."""
    files = list(files)
    out = channel / meta.subdir / f"{meta.filename_stem}.conda"
    out.parent.mkdir(parents=True, exist_ok=True)
    compressor = zstandard.ZstdCompressor(level=3, threads=-1)

    def zst_tar(fill: Callable[[tarfile.TarFile], None]) -> bytes:
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w") as tar:
            fill(tar)
        return compressor.compress(raw.getvalue())

    def info(tar: tarfile.TarFile) -> None:
        for name, data in _info_members(meta, files):
            _add(tar, name, data)

    info_blob = zst_tar(info)
    pkg_blob = zst_tar(lambda tar: _payload(tar, files))
    tmp = out.with_suffix(".partial")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("metadata.json", json.dumps({"conda_pkg_format_version": 2}))
        zf.writestr(f"pkg-{meta.filename_stem}.tar.zst", pkg_blob)
        zf.writestr(f"info-{meta.filename_stem}.tar.zst", info_blob)
    tmp.replace(out)
    return out


def index_channel(channel: Path) -> None:
    for sub in ("noarch", "linux-64"):
        (channel / sub).mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
