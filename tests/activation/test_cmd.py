"""The cmd.exe scripts run by a cmd.exe: Wine's (Debian's wine64), the one that runs on Linux.
It is a reimplementation, not Microsoft's: it parses quotes, `%` and `&` as cmd.exe does, and
these tests keep to what the two agree on. One known difference is avoided: Wine runs the `||`
branch after a CALL whose script ends with EXIT /B 0, so the driver reads ERRORLEVEL with IF
instead of conda's `CALL ... || (EXIT /B 4)`."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from envkit.activation.writer import render_files, write_files
from envkit.recipe.model import EnvOp

WINE = shutil.which("wine64") or "/usr/lib/wine/wine64"


@pytest.fixture(scope="module")
def wine_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One Wine prefix for the module (making one takes seconds)."""
    if not os.access(WINE, os.X_OK):
        pytest.fail("wine64 is not installed; .ci/run installs it (Debian's wine64) to run the cmd.exe scripts")
    env = {**os.environ, "WINEPREFIX": str(tmp_path_factory.mktemp("wineprefix")), "WINEDEBUG": "-all"}
    yield env
    subprocess.run([shutil.which("wineserver") or "/usr/lib/wine/wineserver", "-k"], env=env, check=False, capture_output=True)


def _win(path: Path) -> str:
    return "Z:" + str(path).replace("/", "\\")


def run_steps(wine_env: dict[str, str], workdir: Path, prefixes: list[Path], steps: list[str], env: dict[str, str]) -> list[dict[str, str]]:
    """As conda's cmd.exe activation does: CALL each activate.d/*.bat in order (deactivate.d in
    reverse), stopping when one leaves an ERRORLEVEL; 'dump:N' writes the environment."""
    lines = ["@ECHO OFF"]
    for step in steps:
        kind, _, arg = step.partition(":")
        if kind == "dump":
            lines.append(f'SET > "{_win(workdir / f"dump.{arg}")}"')
            continue
        folder = prefixes[int(arg)] / "etc" / "conda" / ("activate.d" if kind == "a" else "deactivate.d")
        files = sorted(folder.glob("*.bat"), reverse=kind == "d")
        for f in files:
            lines += [f'CALL "{_win(f)}"', f"IF ERRORLEVEL 1 (ECHO {f.name} left ERRORLEVEL %ERRORLEVEL% 1>&2 & EXIT /B 97)"]
    driver = workdir / "driver.bat"
    driver.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    proc = subprocess.run([WINE, "cmd", "/c", _win(driver)], env={**wine_env, **env}, capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    dumps = []
    for step in steps:
        if step.startswith("dump:"):
            text = (workdir / f"dump.{step[5:]}").read_bytes().decode("ascii", errors="replace")
            dumps.append(dict(line.partition("=")[::2] for line in text.splitlines() if "=" in line))
    return dumps


SPECIAL = "it's 100% & more ^ | < > (x) !x! %PATH% $HOME ; trailing "
OPS = (
    EnvOp("MKL_THREADING_LAYER", "set", value="GNU"),
    EnvOp("ENVKIT_SPECIAL", "set", value=SPECIAL),
    EnvOp("ENVKIT_GONE", "unset"),
    EnvOp("ENVKIT_PATHS", "prepend", entries=("C:\\a b", "C:\\Program Files (x86)\\c&d"), separator=";"),
    EnvOp("ENVKIT_LIST", "append", entries=("C:\\z",), separator=";"),
)
WATCHED = ("MKL_THREADING_LAYER", "ENVKIT_SPECIAL", "ENVKIT_GONE", "ENVKIT_PATHS", "ENVKIT_LIST")


def make_env(root: Path, name: str, ops: tuple[EnvOp, ...]) -> Path:
    prefix = root / name
    write_files(render_files(prefix, name, ops))
    return prefix


def watched(dump: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in dump.items() if k in WATCHED}


def test_activate_sets_exactly_and_deactivate_restores(wine_env: dict[str, str], tmp_path: Path) -> None:
    prefix = make_env(tmp_path, "env", OPS)
    # an entry already there (in another case: Windows paths are case-insensitive) and empty entries go
    prior = {"ENVKIT_GONE": "was here", "ENVKIT_PATHS": "C:\\old;;c:\\A B;", "MKL_THREADING_LAYER": "INTEL"}
    before, active, after = run_steps(wine_env, tmp_path, [prefix], ["dump:0", "a:0", "dump:1", "d:0", "dump:2"], prior)
    assert watched(active) == {
        "MKL_THREADING_LAYER": "GNU",
        "ENVKIT_SPECIAL": SPECIAL,
        "ENVKIT_PATHS": "C:\\a b;C:\\Program Files (x86)\\c&d;C:\\old",
        "ENVKIT_LIST": "C:\\z",
    }
    assert watched(after) == watched(before) == prior
    assert not any(k.upper().startswith("_ENVKIT") for k in after)


def test_twice_activated_and_stacked_envs_restore_what_was_there(wine_env: dict[str, str], tmp_path: Path) -> None:
    lower = make_env(
        tmp_path, "lower", (EnvOp("OMP_NUM_THREADS", "set", value="8"), EnvOp("P", "prepend", entries=("C:\\low",), separator=";"))
    )
    upper = make_env(
        tmp_path, "upper", (EnvOp("OMP_NUM_THREADS", "set", value="1"), EnvOp("P", "prepend", entries=("C:\\up",), separator=";"))
    )
    steps = ["dump:0", "a:0", "a:0", "dump:1", "a:1", "dump:2", "d:1", "dump:3", "d:0", "dump:4", "d:0", "dump:5"]
    d = run_steps(wine_env, tmp_path, [lower, upper], steps, {"P": "C:\\base"})
    pick = [(x.get("OMP_NUM_THREADS"), x.get("P")) for x in d]
    assert pick == [
        (None, "C:\\base"),
        ("8", "C:\\low;C:\\base"),
        ("1", "C:\\up;C:\\low;C:\\base"),
        ("8", "C:\\low;C:\\base"),
        (None, "C:\\base"),
        (None, "C:\\base"),  # a stray deactivation does no harm
    ]


def test_a_value_with_a_double_quote_runs_nothing_and_is_not_set(wine_env: dict[str, str], tmp_path: Path) -> None:
    """`SET "NAME=a"&echo ...` ran the echo: a recipe's value was code at activation. Now such a
    value is named on stderr and left unset; the rest of the script still runs."""
    marker = tmp_path / "ran"
    hostile = f'a"&echo injected> "{_win(marker)}"'
    entries = (f'C:\\x"&echo injected> "{_win(marker)}"',)
    ops = (
        EnvOp("ENVKIT_HOSTILE", "set", value=hostile),
        EnvOp("ENVKIT_HOSTILE_PATHS", "prepend", entries=entries, separator=";"),
        EnvOp("MKL_THREADING_LAYER", "set", value="GNU"),
    )
    prefix = make_env(tmp_path, "env", ops)
    [active] = run_steps(wine_env, tmp_path, [prefix], ["a:0", "dump:0"], {})
    assert not marker.exists()
    assert "ENVKIT_HOSTILE" not in active and "ENVKIT_HOSTILE_PATHS" not in active
    assert active["MKL_THREADING_LAYER"] == "GNU"
