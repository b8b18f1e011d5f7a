"""Validation: one error per problem, each with file:line:col, dotted path, expected vs found."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.errors import RecipeError
from envkit.recipe.loader import load_recipe, read_layer
from tests.conftest import write_recipe

GOOD = """envkit: 1
name: ok
channels: [conda-forge]
python: "3.12"
packages:
  - numpy >=1.23
  - libblas=*=*mkl
pip: ["rich>=13"]
toolchain: {blas: mkl, openmp: llvm, pytorch: {source: conda-forge, variant: cpu, version: "2.10"}}
threading:
  mkl_threading_layer: auto
  omp_num_threads: physical-cores
  env:
    LD_LIBRARY_PATH: {prepend: [/opt/a, /opt/b]}
    FOO: "bar baz"
    GONE: {unset: true}
probe: {imports: [numpy], ddp: {enabled: false}, expect: {blas: mkl}}
"""


def problems(tmp_path: Path, body: str) -> list[str]:
    path = write_recipe(tmp_path, "r", body)
    with pytest.raises(RecipeError) as info:
        read_layer(path)
    return info.value.lines()


def test_good_recipe_loads_and_normalises_specs(tmp_path: Path) -> None:
    recipe = load_recipe(str(write_recipe(tmp_path, "ok", GOOD)))
    assert [p.normalized for p in recipe.packages] == ["numpy >=1.23", "libblas * *mkl"]
    assert recipe.packages[1].origin is not None and recipe.packages[1].origin.line == 7
    assert recipe.pip[0].name == "rich"
    assert recipe.toolchain.pytorch is not None and recipe.toolchain.pytorch.version == "2.10"
    ops = {op.name: op for op in recipe.threading.env}
    assert ops["LD_LIBRARY_PATH"].entries == ("/opt/a", "/opt/b") and ops["GONE"].action == "unset"


def test_unknown_key_has_position_and_did_you_mean(tmp_path: Path) -> None:
    lines = problems(tmp_path, "envkit: 1\nname: r\nchannels: [conda-forge]\ntoolchian: {}\n")
    assert len(lines) == 1
    assert lines[0].endswith("r.yaml:4:1: toolchian: unknown key 'toolchian' (did you mean 'toolchain'?)")


def test_every_problem_is_reported_once(tmp_path: Path) -> None:
    body = """envkit: 1
name: r
channels: [conda-forge]
toolchain:
  blas: mkll
  openmp: 3
threading:
  omp_num_threads: -2
  env:
    1BAD: x
packages: ["numpy >>1"]
"""
    lines = problems(tmp_path, body)
    assert len(lines) == 5, lines
    text = "\n".join(lines)
    assert "r.yaml:5:9: toolchain.blas: expected one of mkl|openblas|blis|accelerate, found 'mkll' (did you mean 'mkl'?)" in text
    assert "r.yaml:6:11: toolchain.openmp: expected one of gnu|llvm|intel, found 3" in text
    assert "r.yaml:8:20: threading.omp_num_threads: expected a positive integer or 'physical-cores', found -2" in text
    assert "threading.env.1BAD: invalid variable name '1BAD'" in text
    assert "r.yaml:11:12: packages[0]: invalid conda spec 'numpy >>1'" in text


def test_schema_version_and_required_fields(tmp_path: Path) -> None:
    lines = problems(tmp_path, "envkit: 2\nchannels: [x]\n")
    assert any("envkit: unsupported schema version 2; this envkit reads version 1" in line for line in lines)
    assert any("missing 'name'" in line for line in lines)
    assert any("missing 'envkit: 1'" in line for line in problems(tmp_path, "name: r\n"))


def test_float_versions_are_refused_not_mangled(tmp_path: Path) -> None:
    lines = problems(tmp_path, "envkit: 1\nname: r\nchannels: [c]\npython: 3.10\n")
    assert lines == [f'{tmp_path}/r.yaml:4:9: python: expected a quoted string, found number 3.1 (write it as "3.1")']


def test_duplicate_keys_and_packages(tmp_path: Path) -> None:
    assert "duplicate key (first defined at line 2)" in problems(tmp_path, "envkit: 1\nname: r\nname: s\n")[0]
    lines = problems(tmp_path, "envkit: 1\nname: r\nchannels: [c]\npackages: [numpy, numpy >=2]\n")
    assert "'numpy' is listed twice" in lines[0]


def test_pip_spec_uses_pep508(tmp_path: Path) -> None:
    lines = problems(tmp_path, "envkit: 1\nname: r\nchannels: [c]\npip: ['torch ==']\n")
    assert "pip[0]: invalid PEP 508 requirement 'torch =='" in lines[0]


def test_env_op_shapes(tmp_path: Path) -> None:
    body = """envkit: 1
name: r
channels: [c]
threading:
  env:
    A: {set: x, unset: true}
    B: {prepend: []}
    C: {prepend: ["a:b"]}
    D: true
    E: {set: x, separator: ";"}
"""
    text = "\n".join(problems(tmp_path, body))
    assert "threading.env.A: expected exactly one of set|unset|prepend|append, found 2" in text
    assert "threading.env.B.prepend: expected at least one entry" in text
    assert "threading.env.C.prepend[0]: path entries must be non-empty and contain neither ':' nor a newline" in text
    assert "threading.env.D: expected a string (quote booleans and empty values), found True" in text
    assert "threading.env.E.separator: separator only applies to prepend/append" in text


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("envkit: 1\nname: r\n  bad: indent\n", "invalid YAML"),
        ("envkit: 1\nname: !!python/object/apply:os.system ['true']\n", "invalid YAML"),
        ("envkit: 1\nname: r\n<<: {channels: [c]}\n", "merge keys"),
        ("[1, 2]\n", "expected a mapping, found list"),
        ("", "empty document"),
    ],
)
def test_malformed_documents_are_one_line_errors(tmp_path: Path, body: str, needle: str) -> None:
    lines = problems(tmp_path, body)
    assert len(lines) == 1 and needle in lines[0] and "\n" not in lines[0]


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    rows = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    rows += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 8)]
    body = "envkit: 1\nname: r\n" + "\n".join(rows) + "\n"
    lines = problems(tmp_path, body)
    assert "expands to more than" in lines[0]
