"""Activation without conda: the text `eval "$(envkit shell-hook -n ENV)"` runs in the user's own
shell, and the text that undoes it (`eval "$(envkit shell-hook --deactivate)"`).

It does what `conda activate` does: PATH gains ENV/bin, CONDA_PREFIX, CONDA_DEFAULT_ENV and
CONDA_SHLVL name the env, conda's env variables (packages' env_vars.d, `conda env config vars`)
are set, and every activate.d script for the shell is sourced in name order, envkit's own among
them. Before any of it, the values it replaces are kept in one exported variable, _ENVKIT_HOOK
(JSON: the prefix and each name's value, null where it was unset); the deactivation sources the
deactivate.d scripts in reverse order, then puts each kept value back exactly and removes
_ENVKIT_HOOK, so the shell's environment is as it was. Prompts are left alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from envkit.activation.shells import csh_quote, fish_quote, sh_quote
from envkit.core.errors import UsageError

STATE = "_ENVKIT_HOOK"
CONDA_NAMES = ("PATH", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "CONDA_SHLVL", "CONDA_PROMPT_MODIFIER")
HOOK_SHELLS = {"bash": "sh", "zsh": "sh", "dash": "sh", "sh": "sh", "posix": "sh", "fish": "fish", "csh": "csh", "tcsh": "csh"}


@dataclass(frozen=True)
class Syntax:
    """How one shell family sets, unsets and sources; `end` closes each statement (csh reads the
    text of `eval "`...`"` as one line)."""

    set: str
    unset: str
    source: str
    end: str = "\n"


SYNTAX = {
    "sh": Syntax("export {name}={value}", "unset {name}", ". {path}"),
    "fish": Syntax("set -gx {name} {value}", "set -e {name}", "source {path}"),
    "csh": Syntax("setenv {name} {value}", "unsetenv {name}", "source {path}", ";\n"),
}
QUOTE = {"sh": sh_quote, "fish": fish_quote, "csh": csh_quote}


def hook_shell(shell: str | None, environ: Mapping[str, str] = os.environ) -> str:
    """The shell family to write for: the one named, else the user's login shell ($SHELL)."""
    name = shell or Path(environ.get("SHELL") or "bash").name
    family = HOOK_SHELLS.get(name)
    if family is None:
        raise UsageError(
            f"envkit shell-hook does not write for {name!r}",
            hint=f"pass --shell with one of {', '.join(HOOK_SHELLS)}; envkit shell starts any shell",
        )
    return family


def _statements(family: str, assignments: list[tuple[str, str | None]], scripts: list[Path]) -> str:
    syntax, quote = SYNTAX[family], QUOTE[family]
    lines = [
        syntax.unset.format(name=name) if value is None else syntax.set.format(name=name, value=quote(value)) for name, value in assignments
    ]
    lines += [syntax.source.format(path=quote(str(path))) for path in scripts]
    return "".join(line + syntax.end for line in lines)


def activation(prefix: Path, family: str, environ: Mapping[str, str] = os.environ) -> str:
    """The text that activates `prefix` in a shell of `family` whose environment is `environ`."""
    from envkit.prefix.installed import conda_activation_vars

    if STATE in environ:
        active = json.loads(environ[STATE]).get("prefix", "an env")
        raise UsageError(
            f"{active} is active through envkit shell-hook already", hint='deactivate it first: eval "$(envkit shell-hook --deactivate)"'
        )
    conda_vars = {name: value for name, (value, _) in conda_activation_vars(prefix).items()}
    kept = {name: environ.get(name) for name in (*CONDA_NAMES, *conda_vars)}
    level = environ.get("CONDA_SHLVL", "0")
    assignments: list[tuple[str, str | None]] = [
        (STATE, json.dumps({"prefix": str(prefix), "kept": kept}, sort_keys=True)),
        ("PATH", os.pathsep.join(p for p in (str(prefix / "bin"), environ.get("PATH", "")) if p)),
        ("CONDA_PREFIX", str(prefix)),
        ("CONDA_DEFAULT_ENV", prefix.name),
        ("CONDA_SHLVL", str(int(level) + 1 if level.isdigit() else 1)),
        *conda_vars.items(),
    ]
    scripts = sorted((prefix / "etc" / "conda" / "activate.d").glob(f"*.{family}"))
    return _statements(family, assignments, scripts)


def deactivation(family: str, environ: Mapping[str, str] = os.environ) -> str:
    """The text that undoes `activation` in the shell whose environment is `environ`."""
    try:
        state = json.loads(environ[STATE])
        prefix, kept = Path(str(state["prefix"])), dict(state["kept"])
    except KeyError:
        raise UsageError(
            "no env is active through envkit shell-hook in this shell", hint="conda deactivate leaves a conda-activated env"
        ) from None
    except (ValueError, TypeError, AttributeError):
        raise UsageError(f"{STATE} is not as envkit shell-hook wrote it", hint=f"unset {STATE} and start a new shell") from None
    scripts = sorted((prefix / "etc" / "conda" / "deactivate.d").glob(f"*.{family}"), reverse=True)
    restore = [(str(name), None if value is None else str(value)) for name, value in kept.items()]
    # the scripts first, while the env's own PATH and CONDA_PREFIX are still what they expect
    return _statements(family, [], scripts) + _statements(family, [*restore, (STATE, None)], [])
