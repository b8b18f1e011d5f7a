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
