"""Activation in interactive shells, where prompts are expanded and history is kept: a hostile
value is set exactly and never run, the prompt that shows it runs nothing, and the user's history
file keeps every line. The reserved names (envkit.recipe.reserved) are why this can hold: a
recipe cannot set PS0, RPS1 or HISTFILESIZE; these tests prove the values of the names it can set."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from envkit.activation.writer import render_files, write_files
from envkit.recipe.model import EnvOp
from tests.activation.shellrun import SUFFIX, base_env, read_dump

CORPUS = (
    "$(touch canary-1)",
    "`touch canary-2`",
    "(touch canary-3)",
    "'; touch canary-4; '",
    '"; touch canary-5; "',
    "%{$(touch canary-6)%}",
    "!! !-1 ^x^y",
    "${HOME} $((6*7)) \\$(touch canary-7)",
    "%(?.x.y) %F{red} \\e[2J",
)
VALUE = " | ".join(CORPUS)
HISTORY = "".join(f"echo line {i}\n" for i in range(100))

# per shell: how to start it interactive, a prompt that shows the variable, and how to keep history
SETUP = {
    "bash": (
        ["--noprofile", "--norc", "-i"],
        "PS1='[$ENVKIT_HOSTILE]' ; PS0='$ENVKIT_HOSTILE' ; HISTFILE=~/.bash_history ; set -o history",
    ),
    "zsh": (["-f", "-i"], "setopt prompt_subst ; PS1='$ENVKIT_HOSTILE' ; RPS1='$ENVKIT_HOSTILE' ; HISTFILE=~/.bash_history"),
    "dash": (["-i"], "PS1='$ENVKIT_HOSTILE'"),
    "fish": (["--no-config", "-i"], "function fish_prompt; echo $ENVKIT_HOSTILE; end"),
    "tcsh": (["-f", "-i"], "set histfile=~/.bash_history ; set savehist=(1000 merge)"),
}


def _source(shell: str, path: Path) -> str:
    return f"{'.' if shell == 'dash' else 'source'} '{path}'"


@pytest.mark.parametrize("shell", sorted(SETUP))
def test_hostile_values_in_an_interactive_shell_are_exact_and_run_nothing(shell: str, tmp_path: Path) -> None:
    exe = shutil.which(shell)
    assert exe, f"{shell} is not installed: .ci/run installs it"
    prefix = tmp_path / "env"
    ops = (EnvOp("ENVKIT_HOSTILE", "set", value=VALUE), EnvOp("ENVKIT_PATHS", "prepend", entries=CORPUS[:3], separator=":"))
    write_files(render_files(prefix, "env", ops))
    home = tmp_path / "user-home"
    home.mkdir()
    (home / ".bash_history").write_text(HISTORY)
    suffix = SUFFIX[shell]
    args, setup = SETUP[shell]
    lines = [setup]
    lines += [_source(shell, p) for p in sorted((prefix / "etc" / "conda" / "activate.d").glob(f"*.{suffix}"))]
    lines += ["echo shown: $ENVKIT_HOSTILE" if shell != "tcsh" else "echo shown: $ENVKIT_HOSTILE:q", f"env -0 > '{tmp_path / 'dump'}'"]
    lines += [_source(shell, p) for p in sorted((prefix / "etc" / "conda" / "deactivate.d").glob(f"*.{suffix}"), reverse=True)]
    lines += [f"env -0 > '{tmp_path / 'after'}'", "exit"]
    env = base_env() | {"HOME": str(home), "ENVKIT_PATHS": "/prior"}
    proc = subprocess.run(
        [exe, *args], input="\n".join(lines) + "\n", env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert not list(tmp_path.rglob("canary-*")), f"{shell} ran a value: {proc.stdout} {proc.stderr}"
    active = read_dump(tmp_path / "dump")
    assert active["ENVKIT_HOSTILE"] == VALUE, proc.stderr
    assert active["ENVKIT_PATHS"] == ":".join([*CORPUS[:3], "/prior"])
    after = read_dump(tmp_path / "after")
    assert "ENVKIT_HOSTILE" not in after and after["ENVKIT_PATHS"] == "/prior"
    assert (home / ".bash_history").read_text().startswith(HISTORY), f"{shell} lost history lines"
