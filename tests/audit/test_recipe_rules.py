"""Each consistency rule fires on the toolchain it guards against and stays quiet on shipped recipes."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.audit.recipe_rules import RULES, check_recipe, require_consistent
from envkit.core.errors import RecipeError
from envkit.recipe.loader import load_recipe
from envkit.recipe.sources import all_sources, list_names
from tests.conftest import write_recipe

CASES = {
    "RC001": "channels: [pytorch, conda-forge]\ntoolchain: {blas: mkl, mkl: '>=2023', pytorch: {source: pytorch-channel, version: '2.5.1'}}",
    "RC002": "channels: [conda-forge]\ntoolchain: {pytorch: {source: pip}}\nthreading: {mkl_threading_layer: intel}",
    "RC003": "channels: [conda-forge]\npackages: [intel-openmp]\ntoolchain: {openmp: llvm}",
    "RC004": "channels: [conda-forge]\nthreading: {env: {KMP_DUPLICATE_LIB_OK: 'TRUE'}}",
    "RC005": "channels: [conda-forge]\nthreading: {env: {MKL_SERVICE_FORCE_INTEL: '1'}}",
    "RC006": "channels: [conda-forge]\ntoolchain: {blas: openblas, mkl: '2025.*'}",
    "RC007": "channels: [pytorch, conda-forge]\npackages: [llvm-openmp >=17]\ntoolchain: {pytorch: {source: pytorch-channel, version: '2.5.1'}}",
    "RC008": "channels: [conda-forge]\nplatforms: [linux-64]\ntoolchain: {blas: accelerate}",
    "RC009": "channels: [conda-forge]\ntoolchain: {openmp: intel}",
    "RC010": "channels: [conda-forge]\ntoolchain: {pytorch: {variant: cuda}}",
    "RC011": "channels: [pytorch]\ntoolchain: {pytorch: {source: pytorch-channel, version: '2.8'}}",
    "RC012": "channels: [conda-forge]\npackages: [numpy]\npip: [numpy]",
    "RC013": "channels: [conda-forge]\nthreading: {env: {MKL_DEBUG_CPU_TYPE: '5'}}",
    "RC014": "channels: [conda-forge]\ntoolchain: {blas: openblas}\nthreading: {mkl_threading_layer: gnu}",
    "RC015": "channels: [conda-forge]\nthreading: {omp_num_threads: physical-cores}\nprobe: {ddp: {nproc: 4}}",
    "RC016": "channels: [conda-forge]\nthreading: {env: {PATH: {prepend: [/opt/bin, $CONDA_PREFIX/tools]}}}",
}


def test_every_rule_has_a_case_and_metadata() -> None:
    assert set(CASES) == {r.id for r in RULES}
    for rule in RULES:
        assert rule.rationale and rule.source.startswith("https://") and rule.title


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fires(tmp_path: Path, rule_id: str) -> None:
    recipe = load_recipe(str(write_recipe(tmp_path, "t", f"envkit: 1\nname: t\n{CASES[rule_id]}\n")))
    fired = [f.rule.id for f in check_recipe(recipe)]
    assert rule_id in fired


def test_errors_stop_and_force_downgrades(tmp_path: Path) -> None:
    body = f"envkit: 1\nname: t\n{CASES['RC004']}\n"
    with pytest.raises(RecipeError) as info:
        require_consistent(load_recipe(str(write_recipe(tmp_path, "t", body))))
    assert "RC004" in info.value.lines()[0] and "add 'RC004' to force:" in info.value.lines()[0]
    forced = load_recipe(str(write_recipe(tmp_path, "t", body + "force: [RC004]\n")))
    assert [(f.rule.id, f.severity) for f in require_consistent(forced)] == [("RC004", "warning")]


def test_unknown_forced_rule(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="unknown rule id 'RC999'"):
        require_consistent(load_recipe(str(write_recipe(tmp_path, "t", "envkit: 1\nname: t\nchannels: [c]\nforce: [RC999]\n"))))


def test_shipped_recipes_are_consistent() -> None:
    builtin = next(s for s in all_sources() if s.kind == "builtin")
    names = list_names(builtin)
    assert {"yolov8", "pytorch-cuda", "pytorch-cpu-openblas", "pytorch-legacy-channel"} <= set(names)
    for name in names:
        assert [f for f in check_recipe(load_recipe(name)) if f.severity == "error"] == [], name


@pytest.mark.parametrize(
    ("env", "found"),
    [
        ("{PATH: {prepend: [/opt/bin, $CONDA_PREFIX/tools]}}", "$CONDA_PREFIX"),
        ("{DATA: '${HOME}/data'}", "${HOME}"),
        ("{DATA: '~/data'}", "~"),
        ("{WHO: '$(whoami)'}", "$("),
        ("{CACHE: '%LOCALAPPDATA%\\cache'}", "%LOCALAPPDATA%"),
    ],
)
def test_a_value_written_for_a_shell_is_named_where_it_is(tmp_path: Path, env: str, found: str) -> None:
    path = write_recipe(tmp_path, "t", f"envkit: 1\nname: t\nchannels: [conda-forge]\nthreading:\n  env: {env}\n")
    [finding] = [f for f in require_consistent(load_recipe(str(path))) if f.rule.id == "RC016"]
    assert finding.severity == "warning" and f"does not expand '{found}'" in finding.message
    assert f"({path}:5:" in finding.message  # the value's own line


@pytest.mark.parametrize("value", ["GNU", "a$", "100%", "costs $5", "/opt/~user/x", "50% of 10%"])
def test_plain_values_are_not_shell_syntax(tmp_path: Path, value: str) -> None:
    path = write_recipe(tmp_path, "t", f"envkit: 1\nname: t\nchannels: [conda-forge]\nthreading:\n  env: {{X: '{value}'}}\n")
    assert [f for f in check_recipe(load_recipe(str(path))) if f.rule.id == "RC016"] == []


def test_gpus_named_for_a_cpu_torch_are_incoherent(tmp_path: Path) -> None:
    body = "envkit: 1\nname: t\nchannels: [conda-forge]\ntoolchain: {pytorch: {variant: cpu, cuda_arch: '9.0'}}\n"
    found = [(f.rule.id, f.message) for f in check_recipe(load_recipe(str(write_recipe(tmp_path, "t", body))))]
    assert ("RC010", "toolchain.pytorch.cuda_arch is set but the variant is 'cpu'") in found
