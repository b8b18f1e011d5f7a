"""Thousands of malformed and hostile documents: every one ends in a clean envkit error or a recipe."""

from __future__ import annotations

import string
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envkit.activation.shells import GENERATORS, ScriptContext
from envkit.audit.recipe_rules import check_recipe
from envkit.core.errors import EnvkitError
from envkit.recipe.compile import compile_recipe
from envkit.recipe.loader import build_recipe
from envkit.recipe.model import RecipeOrigin
from envkit.recipe.reserved import RESERVED_EXACT, RESERVED_FOLDED, why_reserved
from envkit.recipe.schema import TOP_KEYS, validate_layer
from envkit.recipe.settings import resolve
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


# ------------------------------------------------------------------ activation variables


SPECIAL_NAMES = sorted({*RESERVED_EXACT, *RESERVED_FOLDED, *(n.lower() for n in RESERVED_FOLDED), "_ENVKIT_x", "_envkit_acc"})
names = st.one_of(
    st.sampled_from(SPECIAL_NAMES), st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,8}\Z"), st.sampled_from(["yes", "1", "null", "on"])
)
values = st.one_of(
    st.text(max_size=10),
    st.sampled_from(["a\x00b", "\x00", "$(id)", "'\"", "1.10", "a:b"]),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)
ops = st.one_of(
    values,
    st.fixed_dictionaries({"set": values}),
    st.fixed_dictionaries({"prepend": st.one_of(values, st.lists(values, max_size=3))}),
    st.fixed_dictionaries({"append": st.lists(values, max_size=3), "separator": st.sampled_from([":", ";", "ab", "\x00"])}),
    st.fixed_dictionaries({"unset": st.one_of(st.just(True), values)}),
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(names, ops, min_size=1, max_size=4))
def test_hostile_activation_variables(env: dict[str, object]) -> None:
    """Every document is refused in one line per problem, or every shell gets a script for it; a
    name some shell treats specially never gets through."""
    text = yaml.safe_dump({"envkit": 1, "name": "fuzz", "channels": ["c"], "threading": {"env": env}}, allow_unicode=True)
    try:
        layer, problems = validate_layer(load_yaml(text, "fuzz.yaml"))
    except EnvkitError as exc:
        assert exc.lines() and all("\n" not in line for line in exc.lines())
        return
    for problem in problems:
        assert "\n" not in str(problem)
    for name, op in layer.get("threading", {}).get("env", {}).items():
        assert why_reserved(name) is None, name
        for text_value in (op.value, *op.entries):
            assert "\x00" not in text_value
    if not problems:
        recipe = build_recipe(layer, RecipeOrigin("fuzz", "fuzz.yaml"), ("fuzz.yaml",))
        ops_ = compile_recipe(recipe).activation
        for generator in GENERATORS.values():
            pair = generator(ScriptContext("0123abcd", ("fuzz",)), resolve(ops_))
            assert pair.activate.endswith(("\n", "\r\n"))
