"""Thousands of malformed and hostile documents: every one ends in a clean envkit error or a recipe."""

from __future__ import annotations

import string
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envkit.errors import EnvkitError
from envkit.recipe.compile import compile_recipe
from envkit.recipe.consistency import check_recipe
from envkit.recipe.loader import build_recipe
from envkit.recipe.model import RecipeOrigin
from envkit.recipe.schema import TOP_KEYS, validate_layer
from envkit.recipe.yamlsource import load_yaml

KEYS = [
    *TOP_KEYS,
    "blas",
    "mkl",
    "openmp",
    "pytorch",
    "env",
    "set",
    "prepend",
    "imports",
    "expect",
    "ddp",
    "nproc",
    "source",
    "variant",
    "cuda",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True),
    st.sampled_from(
        ["mkl", "llvm", "cuda", "pip", "physical-cores", "numpy >=1", "libblas=*=*mkl", "$(rm -rf /)", "`id`", "a:b", "\x00", "3.12"]
    ),
    st.text(max_size=12),
)
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), children, max_size=5)
    ),
    max_leaves=25,
)


def _check(text: str) -> None:
    try:
        layer, problems = validate_layer(load_yaml(text, "fuzz.yaml"))
        if not problems and "name" in layer:
            recipe = build_recipe(layer, RecipeOrigin("fuzz", "fuzz.yaml"), ("fuzz.yaml",))
            compile_recipe(recipe)
            check_recipe(recipe)
        for problem in problems:
            assert "\n" not in str(problem)
    except EnvkitError as exc:
        assert exc.lines() and all(isinstance(line, str) for line in exc.lines())


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_structured_documents(doc: object) -> None:
    text = yaml.safe_dump(
        {"envkit": 1, "name": "fuzz", "channels": ["c"], "x": doc} if isinstance(doc, dict) and len(doc) % 2 else doc, allow_unicode=True
    )
    _check(text)


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet=string.printable + "ü€\u2028&*!|>%@`{}[]:-#", max_size=200))
def test_raw_text(text: str) -> None:
    _check(text)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(KEYS), documents)
def test_each_field_with_junk(key: str, value: object) -> None:
    doc = {"envkit": 1, "name": "fuzz", "channels": ["conda-forge"], key: value}
    _check(yaml.safe_dump(doc, allow_unicode=True))


def test_constructor_tags_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = f"envkit: 1\nname: !!python/object/apply:os.system ['touch {marker}']\n"
    _check(text)
    assert not marker.exists()
