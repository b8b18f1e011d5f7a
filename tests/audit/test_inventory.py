"""The audit's inventory of an env's native libraries (envkit/audit/inventory.py): each BLAS and
OpenMP library is taken for what it is, whatever its file is named."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from envkit.audit.inventory import read_inventory
from tests.support.natives import system_library


def _env(root: Path) -> Path:
    prefix = root / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "history").write_text("")
    (prefix / "lib").mkdir()
    return prefix


def test_llvm_s_runtime_under_gnu_s_name_is_taken_for_llvm_s(tmp_path: Path) -> None:
    """conda-forge's _openmp_mutex *_llvm makes lib/libgomp.so.1 a link to libomp.so; a copy made
    under that name (a vendored wheel, a hand fix) is told by the version string LLVM's runtime
    carries. GNU's own libgomp stays GNU's."""
    linked, copied, gnu = _env(tmp_path / "a"), _env(tmp_path / "b"), _env(tmp_path / "c")
    shutil.copy(system_library("libomp.so.5"), linked / "lib" / "libomp.so")
    os.symlink("libomp.so", linked / "lib" / "libgomp.so.1")
    shutil.copy(system_library("libomp.so.5"), copied / "lib" / "libgomp.so.1")
    shutil.copy(system_library("libgomp.so.1"), gnu / "lib" / "libgomp.so.1")
    seen = {
        name: {lib.path: (lib.api, lib.named) for lib in read_inventory(p).libs} for name, p in (("a", linked), ("b", copied), ("c", gnu))
    }
    assert seen["a"] == {"lib/libgomp.so.1": ("libomp", "libgomp"), "lib/libomp.so": ("libomp", "")}
    assert seen["b"] == {"lib/libgomp.so.1": ("libomp", "libgomp")}
    assert seen["c"] == {"lib/libgomp.so.1": ("libgomp", "")}
