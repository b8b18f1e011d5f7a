"""Validation: one error per problem, each with file:line:col, dotted path, expected vs found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from envkit.core.errors import RecipeError
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
    assert lines == [
        f'{tmp_path}/r.yaml:4:9: python: expected a quoted string, found number 3.10, which YAML reads as 3.1 (write it as "3.10")'
    ]


def test_the_gpus_compute_capability_is_a_quoted_major_minor(tmp_path: Path) -> None:
    head = "envkit: 1\nname: r\nchannels: [c]\ntoolchain:\n  pytorch:\n    variant: cuda\n    cuda: '12.9'\n"
    assert problems(tmp_path, head + "    cuda_arch: 9.0\n") == [
        f'{tmp_path}/r.yaml:8:16: toolchain.pytorch.cuda_arch: expected a quoted string, found number 9.0 (write it as "9.0")'
    ]
    assert problems(tmp_path, head + "    cuda_arch: sm_90\n") == [
        f"{tmp_path}/r.yaml:8:16: toolchain.pytorch.cuda_arch: expected a compute capability major.minor such as "
        "\"9.0\" (H100, H200), found 'sm_90'"
    ]
    torch = load_recipe(str(write_recipe(tmp_path, "ok", head.replace("name: r", "name: ok") + "    cuda_arch: '9.0'\n"))).toolchain.pytorch
    assert torch is not None and torch.cuda_arch == "9.0"


def test_numbers_in_package_lists_are_refused_not_taken_as_names(tmp_path: Path) -> None:
    """`- 1.26` under numpy, or `- 3.10` read by YAML as 3.1: each became a package named "1.26" or
    "3.1" that the solve then could not find, or worse, found."""
    lines = problems(tmp_path, "envkit: 1\nname: r\nchannels: [c]\npackages:\n  - numpy\n  - 1.26\npip: [3.10]\n")
    assert lines == [
        f'{tmp_path}/r.yaml:6:5: packages[1]: expected a requirement string, found number 1.26 (a version belongs in its package\'s spec: "numpy 1.26")',
        f'{tmp_path}/r.yaml:7:7: pip[0]: expected a requirement string, found number 3.1 (a version belongs in its package\'s spec: "numpy 1.26")',
    ]


def test_duplicate_keys_and_packages(tmp_path: Path) -> None:
    assert "duplicate key (first defined at line 2)" in problems(tmp_path, "envkit: 1\nname: r\nname: s\n")[0]
    lines = problems(tmp_path, "envkit: 1\nname: r\nchannels: [c]\npackages: [numpy, numpy >=2]\n")
    assert "'numpy' is listed twice" in lines[0]


def test_platforms_listed_twice_or_empty_are_refused_where_they_are(tmp_path: Path) -> None:
    """A platform listed twice was solved and written into the lock twice; an empty list, which
    reads as "no platform", was taken as the machine envkit runs on."""
    head = "envkit: 1\nname: r\nchannels: [c]\n"
    assert problems(tmp_path, head + "platforms: [linux-64, osx-arm64, linux-64]\n") == [
        f"{tmp_path}/r.yaml:4:34: platforms[2]: 'linux-64' is listed twice (also item 0); list each platform once"
    ]
    assert problems(tmp_path, head + "platforms: []\n") == [
        f"{tmp_path}/r.yaml:4:1: platforms: an empty list; name the platforms the recipe is for, or leave 'platforms' out for the machine it runs on"
    ]
    assert read_layer(write_recipe(tmp_path, "r", head + "platforms: [linux-64, osx-arm64]\n"))["platforms"] == ["linux-64", "osx-arm64"]


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
    assert "threading.env.D: expected a string; quote numbers, booleans and empty values, found True" in text
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


HEAD = "envkit: 1\nname: r\nchannels: [c]\n"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ('threading: {env: {X: "a\\0b"}}', "threading.env.X: contains a NUL byte"),
        ('threading: {env: {P: {prepend: ["/a\\0"]}}}', "contains a NUL byte"),
        # YAML's \u escape makes a lone surrogate, which no UTF-8 script or record can hold: create failed at its first write
        (
            'threading: {env: {X: "a\\ud800b"}}',
            "threading.env.X: contains the lone surrogate \\ud800, which no file or environment can hold",
        ),
        ('threading: {env: {P: {prepend: ["/\\udfff"]}}}', "contains the lone surrogate \\udfff"),
        ("threading: {env: {yes: v}}", "the key 'yes' is read as a bool, not a name: quote it"),
        ("threading: {env: {1: v}}", "the key '1' is read as a int, not a name"),
        ("threading: {env: {P: {prepend: /opt/x}}}", "threading.env.P.prepend: expected a list of path entries"),
        ("threading: {env: {P: {append: [1, 2]}}}", "threading.env.P.append[0]: expected a string (a path entry)"),
        ("threading: {env: {X: 1.10}}", "threading.env.X: expected a string; quote numbers, booleans and empty values, found 1.1"),
        ("threading: {env: {X: true}}", "found True"),
    ],
)
def test_values_that_would_mean_something_else(tmp_path: Path, body: str, needle: str) -> None:
    lines = problems(tmp_path, HEAD + body + "\n")
    assert any(needle in line for line in lines), lines
    assert all(line.startswith(f"{tmp_path / 'r.yaml'}:4:") for line in lines), lines


def test_an_integer_is_a_value_for_set(tmp_path: Path) -> None:
    layer = read_layer(write_recipe(tmp_path, "r", HEAD + "threading: {env: {OMP_NUM_THREADS: 4}}\n"))
    assert layer["threading"]["env"]["OMP_NUM_THREADS"].value == "4"


@pytest.mark.parametrize("version", ["1.0", "true", '"1"', "2"])
def test_schema_version_is_exactly_the_integer_1(tmp_path: Path, version: str) -> None:
    lines = problems(tmp_path, f"envkit: {version}\nname: r\nchannels: [c]\n")
    assert any("envkit: unsupported schema version" in line for line in lines), lines


@pytest.mark.parametrize(
    ("name", "shell"),
    [
        ("status", "zsh"),
        ("argv", "zsh"),
        ("path", "zsh"),
        ("SHLVL", "sh/bash"),
        ("IFS", "sh/bash"),
        ("_", "sh/bash"),
        ("PWD", "sh/bash"),
        ("history", "zsh"),
        ("umask", "fish"),
        ("user", "tcsh"),
        ("shell", "tcsh"),
        ("cwd", "tcsh"),
        ("ERRORLEVEL", "cmd.exe"),
        ("errorlevel", "cmd.exe"),  # cmd.exe ignores case
        ("_ENVKIT_0123abcd_ACTIVE", "reserved"),
        # prompts and hooks an interactive shell expands or runs, history that is truncated when set
        ("PS0", "sh/bash"),
        ("PROMPT_COMMAND", "sh/bash"),
        ("HISTFILESIZE", "sh/bash"),
        ("HISTFILE", "sh/bash"),
        ("RPS1", "zsh"),
        ("SPROMPT", "zsh"),
        ("precmd_functions", "zsh"),
        ("SAVEHIST", "zsh"),
        ("fish_function_path", "fish"),
        ("fish_user_paths", "fish"),
        ("CONDA_PREFIX", "conda"),
        ("CONDA_SHLVL", "conda"),
        ("CONDA_PREFIX_1", "conda"),
        ("LD_PRELOAD", "loader"),
        ("psmodulepath", "PowerShell"),
    ],
)
def test_names_a_shell_treats_specially_are_refused(tmp_path: Path, name: str, shell: str) -> None:
    lines = problems(tmp_path, HEAD + f"threading: {{env: {{{name}: x}}}}\n")
    assert len(lines) == 1 and f"'{name}' cannot be set by activation" in lines[0] and shell in lines[0], lines


@pytest.mark.parametrize("name", ["Status", "PATHS", "USER", "HOME_X", "STATUS", "LD_LIBRARY_PATH", "path_extra"])
def test_near_misses_are_plain_names(tmp_path: Path, name: str) -> None:
    """Case matters where the shell's does: zsh's `status` is special, `STATUS` is not."""
    assert read_layer(write_recipe(tmp_path, "r", HEAD + f"threading: {{env: {{{name}: x}}}}\n"))["threading"]["env"][name].value == "x"


def test_extends_as_a_string_is_one_parent(tmp_path: Path) -> None:
    """`extends: name` is accepted shorthand for `extends: [name]` (documented in the README)."""
    layer = read_layer(write_recipe(tmp_path, "r", HEAD + "extends: pytorch-base\n"))
    assert layer["extends"] == ["pytorch-base"]


def test_an_extends_diamond_reads_each_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two recipes per level, each extending both of the level below: 2**levels paths, 2*levels files."""
    from envkit.recipe import loader

    levels = 16
    for level in range(levels):
        for side in "ab":
            parents = f"extends: [r{level - 1}a, r{level - 1}b]\n" if level else "channels: [c]\n"
            write_recipe(tmp_path, f"r{level}{side}", f"envkit: 1\nname: r{level}{side}\n{parents}packages: [p{level}{side}]\n")
    monkeypatch.setenv("ENVKIT_RECIPE_PATH", str(tmp_path))
    reads: list[Path] = []
    real = loader.read_layer

    def recording(path: Path) -> Any:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(loader, "read_layer", recording)
    recipe = load_recipe(f"r{levels - 1}a")
    assert len(reads) == 2 * levels - 1 and len(set(reads)) == len(reads)
    assert {s.name for s in recipe.packages} == {f"p{level}{side}" for level in range(levels) for side in "ab"} - {f"p{levels - 1}b"}


@pytest.mark.parametrize(
    ("channel", "what"),
    [
        ("https://conda.example.com/t/tk-4a4a99ba/team", "a conda token (/t/...)"),
        ("https://team:pw-4a4a99ba@artifactory.example.com/conda/team", "a user name and password"),
        ("https://tk-4a4a99ba@artifactory.example.com/conda/team", "a user name (or a token in its place)"),
    ],
)
def test_a_channel_url_with_credentials_is_refused_without_repeating_them(tmp_path: Path, channel: str, what: str) -> None:
    """A recipe is shared through git, and what it names goes into the lock the team commits, the
    env's record and every export: a token or password in a channel URL is published by all of
    them. The error points at the line and says where credentials go, and does not echo them."""
    lines = problems(tmp_path, f"envkit: 1\nname: r\nchannels:\n  - conda-forge\n  - {channel}\n")
    assert len(lines) == 1 and lines[0].startswith(f"{tmp_path / 'r.yaml'}:5:") and f"holds {what}" in lines[0], lines
    assert "pixi auth login" in lines[0] and "4a4a99ba" not in lines[0]
    assert read_layer(write_recipe(tmp_path, "ok", "envkit: 1\nname: ok\nchannels: [https://conda.example.com/team/t/x]\n"))


def test_a_backslash_separator_is_refused_where_it_is_written(tmp_path: Path) -> None:
    """tcsh's substitution reads a backslash as an escape: refused for every shell, at its line."""
    lines = problems(tmp_path, HEAD + 'threading: {env: {MY_PATH: {prepend: [/a], separator: "\\\\"}}}\n')
    assert len(lines) == 1 and "a backslash cannot separate entries" in lines[0] and ".yaml:" in lines[0], lines


def test_require_proof_takes_machine_kinds_and_names_the_entry_that_is_not_one(tmp_path: Path) -> None:
    body = "envkit: 1\nname: r\nchannels: [conda-forge]\nrequire_proof: [linux-64, linux-64+cuda, linux-aarch64+cuda_arch=9.0]\n"
    recipe = load_recipe(str(write_recipe(tmp_path, "r", body)))
    assert recipe.require_proof == ("linux-64", "linux-64+cuda", "linux-aarch64+cuda_arch=9.0")
    bad = "envkit: 1\nname: r\nchannels: [conda-forge]\nrequire_proof: [linux-64+rocm, linx-64, 'linux-64; rm -rf ~']\n"
    lines = problems(tmp_path, bad)
    assert len(lines) == 3, lines
    assert "require_proof[0]" in lines[0] and "a machine kind such as linux-64" in lines[0] and "linux-64+rocm" in lines[0]
    assert "require_proof[1]" in lines[1] and "did you mean 'linux-64'" in lines[1]
    assert "require_proof[2]" in lines[2]
