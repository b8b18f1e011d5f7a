"""extends: each field's merge rule, depth-first order, and cycles printed as a chain."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.core.errors import RecipeError, SourceError
from envkit.recipe.loader import load_recipe
from tests.conftest import write_recipe

BASE = """envkit: 1
name: base
description: base recipe
channels: [conda-forge, bioconda]
platforms: [linux-64, osx-arm64]
python: "3.11"
packages: [numpy >=1.23, scipy]
pip: [rich]
toolchain: {blas: mkl, pytorch: {source: conda-forge, variant: cuda, cuda: "12.4"}}
threading:
  omp_num_threads: 4
  env: {A: base-a, B: base-b}
probe: {imports: [numpy], import_orders: [[numpy, scipy]], expect: {blas: mkl, openmp_runtimes: 1}, ddp: {nproc: 4}}
force: [RC013]
require_proof: [linux-64]
"""

CHILD = """envkit: 1
name: child
extends: [base]
channels: [my-mirror, conda-forge]
platforms: [linux-64]
python: "3.12"
packages: [numpy >=2, torch-extra]
pip: [rich>=13, httpx]
toolchain: {pytorch: {variant: cpu, cuda: null}}
threading:
  env: {B: child-b, C: child-c}
probe: {imports: [torch], expect: {openmp_runtimes: 2}}
require_proof: [linux-64+cuda, linux-64]
"""


@pytest.fixture
def recipes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "r"
    write_recipe(folder, "base", BASE)
    write_recipe(folder, "child", CHILD)
    monkeypatch.setenv("ENVKIT_RECIPE_PATH", str(folder))
    return folder


def test_scalars_child_wins_and_description_inherited(recipes: Path) -> None:
    r = load_recipe("child")
    assert r.name == "child" and r.python == "3.12" and r.description == "base recipe"
    assert r.extends == ("base",) and [Path(p).name for p in r.chain] == ["child.yaml", "base.yaml"]


def test_channels_child_order_first_then_parent_deduplicated(recipes: Path) -> None:
    assert load_recipe("child").channels == ("my-mirror", "conda-forge", "bioconda")


def test_platforms_child_replaces(recipes: Path) -> None:
    assert load_recipe("child").platforms == ("linux-64",)


def test_packages_keyed_by_name_child_replaces_in_place(recipes: Path) -> None:
    r = load_recipe("child")
    assert [p.normalized for p in r.packages] == ["numpy >=2", "scipy", "torch-extra"]
    assert r.packages[0].origin is not None and r.packages[0].origin.file.endswith("child.yaml")
    assert [p.normalized for p in r.pip] == ["rich>=13", "httpx"]


def test_mappings_deep_merge_and_null_clears(recipes: Path) -> None:
    r = load_recipe("child")
    assert r.toolchain.blas == "mkl"
    assert r.toolchain.pytorch is not None
    assert (r.toolchain.pytorch.source, r.toolchain.pytorch.variant, r.toolchain.pytorch.cuda) == ("conda-forge", "cpu", None)
    assert r.threading.omp_num_threads == 4
    assert {op.name: op.value for op in r.threading.env} == {"A": "base-a", "B": "child-b", "C": "child-c"}


def test_probe_lists_union_and_expect_merges(recipes: Path) -> None:
    r = load_recipe("child")
    assert r.probe.imports == ("numpy", "torch")
    assert r.probe.import_orders == (("numpy", "scipy"),)
    assert dict(r.probe.expect) == {"blas": "mkl", "openmp_runtimes": 2}
    assert r.probe.nproc == 4 and r.force == ("RC013",)
    assert r.require_proof == ("linux-64", "linux-64+cuda")  # the parent's, then the child's not yet named


def test_multiple_parents_later_parent_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "r"
    write_recipe(folder, "p1", "envkit: 1\nname: p1\nchannels: [a]\npython: '3.10'\n")
    write_recipe(folder, "p2", "envkit: 1\nname: p2\nchannels: [b]\npython: '3.11'\n")
    write_recipe(folder, "kid", "envkit: 1\nname: kid\nextends: [p1, p2]\n")
    monkeypatch.setenv("ENVKIT_RECIPE_PATH", str(folder))
    r = load_recipe("kid")
    assert r.python == "3.11" and r.channels == ("b", "a")


def test_cycle_prints_the_chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "r"
    write_recipe(folder, "a", "envkit: 1\nname: a\nextends: [b]\nchannels: [c]\n")
    write_recipe(folder, "b", "envkit: 1\nname: b\nextends: [c]\n")
    write_recipe(folder, "c", "envkit: 1\nname: c\nextends: [a]\n")
    monkeypatch.setenv("ENVKIT_RECIPE_PATH", str(folder))
    with pytest.raises(RecipeError) as info:
        load_recipe("a")
    assert info.value.lines()[0].endswith("extends: extends cycle: a -> b -> c -> a")


def test_missing_parent_names_the_child_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "r"
    write_recipe(folder, "a", "envkit: 1\nname: a\nextends: [nosuch]\nchannels: [c]\n")
    monkeypatch.setenv("ENVKIT_RECIPE_PATH", str(folder))
    with pytest.raises(SourceError, match=r"a\.yaml: extends 'nosuch': no recipe named 'nosuch'"):
        load_recipe("a")
