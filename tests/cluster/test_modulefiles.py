"""An env published as a module, loaded and unloaded by the real Lmod in bash, zsh, fish and tcsh:
the load gives the activation's exact values, the unload the exact prior environment, and nothing
left behind changes a later load."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.activation.shellrun import read_dump
from tests.activation.test_shells import HOSTILE
from tests.conftest import run_envkit, write_recipe
from tests.support.tiny import tiny_channel

LMOD_INIT = Path("/usr/share/lmod/lmod/init")
# Lmod's own bookkeeping: which modules are loaded, and how often each PATH entry was added
LMOD_STATE = ("_ModuleTable", "__LMOD_REF_COUNT_", "LOADEDMODULES", "_LMFILES_", "LMOD_", "MODULEPATH", "MODULESHOME", "BASH_ENV")
NOISE = ("SHLVL", "_", "PWD", "OLDPWD", "fish_greeting", "__fish", "TERM")
# Lmod cannot carry a line break to a shell (envkit refuses it: tested below); everything else of
# the activation tests' hostile value goes through the Lua form
LUA_HOSTILE = HOSTILE.replace("\n", " ")
# Lmod's csh output cannot carry ! { } or a tab (the file says so): tcsh gets the rest
CSH_HOSTILE = "".join(ch for ch in LUA_HOSTILE if ch not in "!{}\t")
# Tcl modulefiles pass through Lmod's tcl2lua, which strips trailing whitespace and rewrites tabs
# and line breaks: the Tcl form is tested with every other kind of hostile character
TAME = 'it\'s "quoted" $HOME `id` $(id) \\ back [x] a,b ; | ^& * ? ~'

SESSION = {
    "bash": 'source {init}/bash; {pre}env -0 > "$D.0"; module load $M || exit 97; env -0 > "$D.1"; module unload $M || exit 98; env -0 > "$D.2"',
    "zsh": 'source {init}/zsh; {pre}env -0 > "$D.0"; module load $M || exit 97; env -0 > "$D.1"; module unload $M || exit 98; env -0 > "$D.2"',
    "fish": 'source {init}/fish; {pre}env -0 > "$D.0"; module load $M; or exit 97; env -0 > "$D.1"; module unload $M; or exit 98; env -0 > "$D.2"',
    "tcsh": 'source {init}/tcsh\n{pre}env -0 > "$D.0"\nmodule load $M\nif ($status) exit 97\nenv -0 > "$D.1"\n'
    'module unload $M\nif ($status) exit 98\nenv -0 > "$D.2"\n',
}
FLAGS = {"bash": ["--noprofile", "--norc", "-c"], "zsh": ["-f", "-c"], "fish": ["--no-config", "-c"], "tcsh": ["-f", "-c"]}
PRIORS = {
    "none": {},
    "set": {
        "MY_VALUE": "mine",
        "MY_GONE": "was here",
        "MY_PATHS": "/usr/old",
        "MKL_THREADING_LAYER": "INTEL",
        "CONDA_PREFIX": "/opt/other",
    },
}


def _env(root: Path, name: str, value: str) -> Path:
    body = (
        f"envkit: 1\nname: {name}\nchannels: [{tiny_channel(root).as_uri()}]\npackages: [tool]\n"
        f"threading:\n  env:\n    MY_VALUE: {json.dumps(value)}\n    MKL_THREADING_LAYER: GNU\n"
        "    MY_GONE: {unset: true}\n    MY_PATHS: {prepend: [/opt/a b, /opt/c]}\n"
    )
    prefix = root / "envs" / name
    made = run_envkit("create", str(write_recipe(root / "recipes", name, body)), "-p", str(prefix), "--yes", "--no-probe")
    assert made.returncode == 0, made.stderr
    return prefix


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path, str]]:
    """{format: (MODULEPATH, env prefix, the value the env sets)}, as a site lays them out."""
    root = tmp_path_factory.mktemp("modules")
    out = {}
    for key, fmt, value, file in (
        ("lmod", "lmod", LUA_HOSTILE, "1.0.lua"),
        ("lmod-csh", "lmod", CSH_HOSTILE, "1.0.lua"),
        ("modulefile", "modulefile", TAME, "1.0"),
    ):
        prefix = _env(root / key, "hooked", value)
        modulepath = root / key / "modulefiles"
        done = run_envkit("export", "-p", str(prefix), "--format", fmt, "-o", str(modulepath / "hooked" / file))
        assert done.returncode == 0, done.stderr
        out[key] = (modulepath, prefix, value)
    assert "csh/tcsh: Lmod cannot write MY_VALUE's value for csh exactly" in (out["lmod"][0] / "hooked" / "1.0.lua").read_text()
    return out


def _clean(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith(NOISE + LMOD_STATE)}


def _session(shell: str, modulepath: Path, dump: Path, prior: dict[str, str], tmp_path: Path, pre: str = "") -> list[dict[str, str]]:
    exe = shutil.which(shell)
    assert exe, f"{shell} is not installed: .ci/run installs it"
    assert (LMOD_INIT / shell).is_file(), "Lmod is not installed: .ci/run installs Debian's lmod"
    script = SESSION[shell].format(init=LMOD_INIT, pre=pre).replace("$D", str(dump)).replace("$M", "hooked/1.0")
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL")}
    # Lmod keeps one copy of each PATH entry once a module changes PATH (a site's
    # LMOD_DUPLICATE_PATHS=yes keeps them): a PATH with none is the one to compare
    env["PATH"] = ":".join(dict.fromkeys(env["PATH"].split(":")))
    env.update(HOME=str(tmp_path), LANG=env.get("LANG", "C.UTF-8"), MODULEPATH=str(modulepath), **prior)
    proc = subprocess.run([exe, *FLAGS[shell], script], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, f"{shell} exit {proc.returncode}: {proc.stdout} {proc.stderr}"
    return [read_dump(dump.with_suffix(f".{i}")) for i in range(3)]


def _expect_loaded(active: dict[str, str], prefix: Path, value: str, prior: dict[str, str]) -> None:
    assert active["MY_VALUE"] == value and active["MKL_THREADING_LAYER"] == "GNU"
    assert "MY_GONE" not in active
    assert active["MY_PATHS"] == "/opt/a b:/opt/c" + (":/usr/old" if prior.get("MY_PATHS") else "")
    assert active["CONDA_PREFIX"] == str(prefix) and active["CONDA_DEFAULT_ENV"] == "hooked"
    assert active["PATH"].split(":")[0] == str(prefix / "bin")


@pytest.mark.parametrize("prior", sorted(PRIORS))
@pytest.mark.parametrize("shell", sorted(SESSION))
def test_lmod_load_gives_the_settings_and_unload_the_prior_environment(
    published: dict[str, tuple[Path, Path, str]], tmp_path: Path, shell: str, prior: str
) -> None:
    modulepath, prefix, value = published["lmod-csh" if shell == "tcsh" else "lmod"]
    before, active, after = _session(shell, modulepath, tmp_path / "dump", PRIORS[prior], tmp_path)
    _expect_loaded(active, prefix, value, PRIORS[prior])
    assert _clean(after) == _clean(before), f"{shell}: not the prior environment after unload"
    assert not [k for k in after if k.startswith("__LMOD_STACK_")], "a stack left behind would change the next load"


@pytest.mark.parametrize("shell", sorted(SESSION))
def test_a_value_changed_after_an_unload_is_the_one_the_next_unload_gives_back(
    published: dict[str, tuple[Path, Path, str]], tmp_path: Path, shell: str
) -> None:
    """Lmod's pushenv alone leaves the first load's earlier value on its stack; the next unload
    would then restore that, not what the user set in between."""
    modulepath, _, _ = published["lmod"]
    setter = {"fish": "set -gx MY_VALUE changed; ", "tcsh": "setenv MY_VALUE changed\n"}.get(shell, "export MY_VALUE=changed; ")
    first = SESSION[shell].split("env -0", 1)[0].format(init=LMOD_INIT, pre="")
    sep = "\n" if shell == "tcsh" else "; "
    pre = f"module load hooked/1.0{sep}module unload hooked/1.0{sep}{setter}"
    assert first  # the same session, with one load and unload before it and the value changed
    before, _, after = _session(shell, modulepath, tmp_path / "dump", {"MY_VALUE": "first"}, tmp_path, pre=pre)
    assert before["MY_VALUE"] == "changed" and after["MY_VALUE"] == "changed"


@pytest.mark.parametrize("shell", sorted(SESSION))
def test_tcl_modulefile_loads_exact_under_lmod_and_names_the_lua_form(
    published: dict[str, tuple[Path, Path, str]], tmp_path: Path, shell: str
) -> None:
    """Lmod reads the Tcl form through tcl2lua: a load gives the same values. Its unload is
    Environment Modules' to undo exactly (Lmod 8.6 does not pop a Tcl pushenv), and the file
    says so; what Lmod does undo, the PATH entries, it undoes."""
    modulepath, prefix, value = published["modulefile"]
    prior = PRIORS["set"]
    before, active, after = _session(shell, modulepath, tmp_path / "dump", prior, tmp_path)
    _expect_loaded(active, prefix, value, prior)
    assert after["PATH"] == before["PATH"] and after["MY_PATHS"] == before["MY_PATHS"]
    assert "Lmod sites: use envkit export --format lmod" in (modulepath / "hooked" / "1.0").read_text()


def test_a_value_the_tcl_reader_would_change_is_refused_with_the_lua_form_named(published: dict[str, tuple[Path, Path, str]]) -> None:
    _, prefix, _ = published["lmod"]  # its MY_VALUE holds a tab
    done = run_envkit("export", "-p", str(prefix), "--format", "modulefile")
    assert done.returncode == 2, done.stderr
    assert "MY_VALUE holds a control character or trailing whitespace" in done.stderr and "--format lmod" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("fmt", ["lmod", "modulefile"])
def test_a_line_break_is_refused_in_both_forms(tmp_path: Path, fmt: str) -> None:
    prefix = _env(tmp_path, "broken", "one\ntwo")
    done = run_envkit("export", "-p", str(prefix), "--format", fmt)
    assert done.returncode == 2 and "MY_VALUE holds a line break" in done.stderr, done.stderr
    assert done.stdout == ""


def test_a_lock_has_no_env_to_put_on_path(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    lock.write_text("version: 6\nenvironments: {}\npackages: []\n")
    done = run_envkit("export", "--lock", str(lock), "--format", "lmod")
    assert done.returncode == 2 and "a lock is not installed" in done.stderr, done.stderr


@pytest.mark.parametrize("fmt", ["lmod", "modulefile"])
def test_a_name_that_is_not_a_variable_name_is_refused(fmt: str) -> None:
    """A name from conda's own env vars (conda-meta/state) reaches no module as code."""
    from envkit.cluster import modulefiles
    from envkit.core.errors import UsageError
    from envkit.recipe.model import EnvOp
    from envkit.team.export import EnvSnapshot

    env = EnvSnapshot("e", "/opt/e", "linux-64", None, (), (), (), (EnvOp("X; touch /tmp/owned", "set", value="1"),))
    with pytest.raises(UsageError, match="is not a variable name a module can set"):
        (modulefiles.lmod if fmt == "lmod" else modulefiles.tcl)(env)
