"""The recipe's field table (envkit.recipe.fields): what the validators accept, how extends merges
and the defaults a recipe gets all come from it."""

from __future__ import annotations

from pathlib import Path

from envkit.recipe import fields
from envkit.recipe.loader import load_recipe
from tests.conftest import write_recipe


def test_a_recipe_that_sets_nothing_has_the_tables_defaults(tmp_path: Path) -> None:
    recipe = load_recipe(
        str(write_recipe(tmp_path, "bare", "envkit: 1\nname: bare\nchannels: [conda-forge]\nthreading:\n  env: {A: {prepend: [x]}}\n"))
    )
    assert recipe.description == fields.default("description")
    assert recipe.platforms == fields.default("platforms")
    assert recipe.probe.ddp is fields.default("probe.ddp")
    assert recipe.probe.nproc == fields.default("probe.ddp.nproc") == 2
    assert recipe.probe.timeout == fields.default("probe.timeout")
    assert recipe.threading.env[0].separator == fields.default("threading.env.*.separator")


def test_every_key_a_mapping_takes_is_a_field_of_the_table() -> None:
    for mapping, keys in fields.FIELDS.items():
        prefix = "" if mapping in ("", "per_platform.*") else f"{mapping}."
        assert all(f"{prefix}{key}" in fields.BY_PATH for key in keys), mapping


def test_the_fields_a_platform_may_change_merge_as_they_do_at_the_top(tmp_path: Path) -> None:
    """A per_platform entry is merged over the recipe by the same rules: packages by name."""
    body = (
        "envkit: 1\nname: split\nchannels: [conda-forge]\nplatforms: [linux-64, osx-arm64]\npackages: [numpy >=1, scipy]\n"
        "per_platform:\n  osx-arm64:\n    packages: [numpy >=2, libcxx]\n"
    )
    recipe = load_recipe(str(write_recipe(tmp_path, "split", body)))
    on_mac = recipe.for_platform("osx-arm64")
    assert fields.BY_PATH["packages"].merge == "by name"
    assert [s.text for s in on_mac.packages] == ["numpy >=2", "scipy", "libcxx"]
    assert [s.text for s in recipe.for_platform("linux-64").packages] == ["numpy >=1", "scipy"]
