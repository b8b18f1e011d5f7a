"""Generated activation scripts in real shells, sourced the way conda does: exact values in,
exact prior state back out, in bash, dash, zsh, fish and tcsh."""

from __future__ import annotations

import shutil
import string
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envkit.activation.writer import render_files, write_files
from envkit.recipe.model import EnvOp
from tests.activation.shellrun import SHELLS, base_env, read_dump, run_shell, script_for

NOISE = ("SHLVL", "_", "PWD", "OLDPWD", "SHELL", "fish_greeting", "__fish")


def clean(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith(("_ENVKIT", *NOISE))}


def make_env(root: Path, name: str, ops: tuple[EnvOp, ...]) -> Path:
    prefix = root / name
    write_files(render_files(prefix, name, ops))
    return prefix


def run_steps(shell: str, workdir: Path, prefixes: list[Path], steps: list[str], env: dict[str, str]) -> list[dict[str, str]]:
    proc = run_shell(shell, script_for(shell, prefixes, steps, workdir / "dump"), env, workdir)
    assert proc.returncode == 0, f"{shell}: {proc.stderr}"
    dumps = [s.split(":")[1] for s in steps if s.startswith("dump")]
    return [read_dump(workdir / f"dump.{n}") for n in dumps]


HOSTILE = 'it\'s "quoted" $HOME `id` $(id) \\ back\\\\ bang! 100% ^& | ; * ? [x] ~ {a,b} \t tab\nsecond line ünï €'
OPS = (
    EnvOp("MKL_THREADING_LAYER", "set", value="GNU"),
    EnvOp("ENVKIT_HOSTILE", "set", value=HOSTILE),
    EnvOp("ENVKIT_EMPTY", "set", value=""),
    EnvOp("ENVKIT_GONE", "unset"),
    EnvOp("LD_LIBRARY_PATH", "prepend", entries=("/opt/a b", "/opt/c")),
    EnvOp("ENVKIT_LIST", "append", entries=("/z",), separator=";"),
)


@pytest.fixture(params=SHELLS)
def shell(request: pytest.FixtureRequest) -> str:
    if shutil.which(request.param) is None:
        pytest.fail(f"{request.param} is not installed; .ci/run installs every shell the tests need")
    return str(request.param)


def test_activate_sets_exactly_and_deactivate_restores(shell: str, tmp_path: Path) -> None:
    prefix = make_env(tmp_path, "env", OPS)
    env = base_env() | {"ENVKIT_GONE": "was here", "LD_LIBRARY_PATH": "/opt/c::/old:/opt/a b:", "ENVKIT_EMPTY": "prior", "ENVKIT_LIST": ""}
    before, active, after = run_steps(shell, tmp_path, [prefix], ["dump:0", "a:0", "dump:1", "d:0", "dump:2"], env)
    assert active["MKL_THREADING_LAYER"] == "GNU"
    assert active["ENVKIT_HOSTILE"] == HOSTILE
    assert active["ENVKIT_EMPTY"] == ""
    assert "ENVKIT_GONE" not in active
    assert active["LD_LIBRARY_PATH"] == "/opt/a b:/opt/c:/old"
    assert active["ENVKIT_LIST"] == "/z"
    assert clean(after) == clean(before)
    assert not any(k.startswith("_ENVKIT") for k in after)


def test_unset_stays_unset_and_empty_stays_empty(shell: str, tmp_path: Path) -> None:
    prefix = make_env(tmp_path, "env", OPS)
    env = base_env() | {"ENVKIT_EMPTY": ""}
    env.pop("LD_LIBRARY_PATH", None)
    before, after = run_steps(shell, tmp_path, [prefix], ["dump:0", "a:0", "d:0", "dump:1"], env)
    assert "MKL_THREADING_LAYER" not in after and "LD_LIBRARY_PATH" not in after and "ENVKIT_GONE" not in after
    assert after["ENVKIT_EMPTY"] == ""
    assert clean(after) == clean(before)


def test_twice_activated_and_stray_deactivation_do_no_harm(shell: str, tmp_path: Path) -> None:
    prefix = make_env(tmp_path, "env", OPS)
    env = base_env() | {"LD_LIBRARY_PATH": "/old", "MKL_THREADING_LAYER": "INTEL"}
    d = run_steps(shell, tmp_path, [prefix], ["dump:0", "d:0", "dump:1", "a:0", "a:0", "dump:2", "d:0", "dump:3", "d:0", "dump:4"], env)
    assert clean(d[1]) == clean(d[0])
    assert d[2]["LD_LIBRARY_PATH"] == "/opt/a b:/opt/c:/old" and d[2]["MKL_THREADING_LAYER"] == "GNU"
    assert clean(d[3]) == clean(d[0]) and d[3]["MKL_THREADING_LAYER"] == "INTEL"
    assert clean(d[4]) == clean(d[0])


def test_stacked_envs_restore_the_lower_one(shell: str, tmp_path: Path) -> None:
    lower = make_env(tmp_path, "lower", (EnvOp("OMP_NUM_THREADS", "set", value="8"), EnvOp("P", "prepend", entries=("/low",))))
    upper = make_env(tmp_path, "upper", (EnvOp("OMP_NUM_THREADS", "set", value="1"), EnvOp("P", "prepend", entries=("/up",))))
    env = base_env() | {"P": "/base"}
    d = run_steps(shell, tmp_path, [lower, upper], ["dump:0", "a:0", "dump:1", "a:1", "dump:2", "d:1", "dump:3", "d:0", "dump:4"], env)
    assert (d[1]["OMP_NUM_THREADS"], d[1]["P"]) == ("8", "/low:/base")
    assert (d[2]["OMP_NUM_THREADS"], d[2]["P"]) == ("1", "/up:/low:/base")
    assert clean(d[3]) == clean(d[1])
    assert clean(d[4]) == clean(d[0])


def test_an_entry_holding_every_readable_csh_delimiter(shell: str, tmp_path: Path) -> None:
    """Found by the property test below: tcsh's `:s` needs a delimiter the entry lacks; control characters are the fallback."""
    entry = "=@/,+%#^|~"
    prefix = make_env(tmp_path, "env", (EnvOp("ENVKIT_P", "prepend", entries=(entry, "/b")),))
    env = base_env() | {"ENVKIT_P": f"/old:{entry}"}
    before, active, after = run_steps(shell, tmp_path, [prefix], ["dump:0", "a:0", "dump:1", "d:0", "dump:2"], env)
    assert active["ENVKIT_P"] == f"{entry}:/b:/old"
    assert clean(after) == clean(before)


def test_activation_spawns_no_process(tmp_path: Path) -> None:
    """strace would be the direct proof; here: the sourced script runs with an empty PATH."""
    prefix = make_env(tmp_path, "env", OPS)
    for shell in ("bash", "dash", "zsh"):
        script = f"PATH=/nonexistent\n. '{prefix}/etc/conda/activate.d/env.sh'\n. '{prefix}/etc/conda/deactivate.d/env.sh'\n"
        proc = subprocess.run(
            [shutil.which(shell) or shell, "-c", script.replace("env.sh", "envkit-env.sh")], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0 and proc.stderr == "", (shell, proc.stderr)


VALUE = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=40)
ENTRY = st.text(st.characters(blacklist_categories=["Cs", "Cc"], blacklist_characters="\x00:\n"), min_size=1, max_size=12)
PRIOR = st.one_of(st.none(), st.just(""), VALUE)
PATH_PRIOR = st.one_of(st.none(), st.just(""), st.lists(st.one_of(ENTRY, st.just("")), max_size=4).map(":".join))


@pytest.mark.parametrize("shell_name", SHELLS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    value=VALUE,
    prior=PRIOR,
    path_prior=PATH_PRIOR,
    entries=st.lists(ENTRY, min_size=1, max_size=3, unique=True),
    action=st.sampled_from(["prepend", "append"]),
)
def test_property_any_value_any_prior_state(
    shell_name: str,
    tmp_path_factory: pytest.TempPathFactory,
    value: str,
    prior: str | None,
    path_prior: str | None,
    entries: list[str],
    action: str,
) -> None:
    if shell_name == "fish" and "\r" in value:
        value = value.replace("\r", "")  # fish stores what it reads from the environment; CR round-trips only inside values it sets
    work = tmp_path_factory.mktemp(shell_name)
    ops = (EnvOp("ENVKIT_V", "set", value=value), EnvOp("ENVKIT_P", action, entries=tuple(entries)))  # type: ignore[arg-type]
    prefix = make_env(work, "env", ops)
    env = base_env()
    if prior is not None:
        env["ENVKIT_V"] = prior
    if path_prior is not None:
        env["ENVKIT_P"] = path_prior
    before, active, after = run_steps(shell_name, work, [prefix], ["dump:0", "a:0", "dump:1", "d:0", "dump:2"], env)
    assert active["ENVKIT_V"] == value
    old = [e for e in (path_prior or "").split(":") if e and e not in entries]
    expected = [*entries, *old] if action == "prepend" else [*old, *entries]
    assert active["ENVKIT_P"] == ":".join(expected)
    assert clean(after) == clean(before)


STATUS_SHAPES = {
    "sets only (the yolov8 recipe)": (EnvOp("MKL_THREADING_LAYER", "set", value="GNU"), EnvOp("OMP_NUM_THREADS", "set", value="2")),
    "ends with an unset": (EnvOp("MKL_THREADING_LAYER", "set", value="GNU"), EnvOp("KMP_DUPLICATE_LIB_OK", "unset")),
    "ends with a prepend": (EnvOp("MKL_THREADING_LAYER", "set", value="GNU"), EnvOp("ENVKIT_P", "prepend", entries=("/x",))),
}


@pytest.mark.parametrize("shape", STATUS_SHAPES)
@pytest.mark.parametrize("prior", ["unset", "set"])
def test_sourcing_leaves_a_zero_status(shell: str, shape: str, prior: str, tmp_path: Path) -> None:
    """conda's activate returns what its last hook left (fish's `set` passes an earlier failure
    through), so a failing status would stop `conda activate ENV && train`; run_steps stops at
    the first script that leaves one (shellrun._source)."""
    ops = STATUS_SHAPES[shape]
    prefix = make_env(tmp_path, "env", ops)
    env = base_env()
    for op in ops:
        env.pop(op.name, None)
        if prior == "set":
            env[op.name] = "prior"
    before, after = run_steps(shell, tmp_path, [prefix], ["dump:0", "a:0", "d:0", "d:0", "a:0", "a:0", "d:0", "dump:1"], env)
    assert clean(after) == clean(before)


SEPARATORS = "".join(ch for ch in string.punctuation + " \t€·" if ch != "\\")


def test_every_separator_a_recipe_may_name_works_in_every_shell(shell: str, tmp_path: Path) -> None:
    """Each punctuation character the schema accepts splits and joins exactly, the variables after
    it are set too, and deactivation restores the prior list; the backslash is refused (schema)."""
    for index, sep in enumerate(SEPARATORS):
        quote = "'" if sep != "'" else '"'
        entries = ("A b", f"C{quote}d")
        ops = (EnvOp("ENVKIT_L", "prepend", entries=entries, separator=sep), EnvOp("ENVKIT_AFTER", "set", value="ok"))
        prefix = make_env(tmp_path, f"env{index}", ops)
        env = base_env() | {"ENVKIT_L": f"x{sep}{entries[1]}"}
        work = tmp_path / f"w{index}"
        work.mkdir()
        active, after = run_steps(shell, work, [prefix], ["a:0", "dump:1", "d:0", "dump:2"], env)
        assert (active["ENVKIT_L"], active["ENVKIT_AFTER"]) == (f"A b{sep}{entries[1]}{sep}x", "ok"), repr(sep)
        assert after["ENVKIT_L"] == f"x{sep}{entries[1]}", repr(sep)
