"""Variable names that a shell envkit writes activation for treats specially, so a recipe may not set
them: assigning one changes how the shell itself behaves, is refused, or is undone by the shell, and
the restore on deactivation then fails or restores the wrong thing (in zsh, setting `status` or
`argv` makes activation fail and deactivation abort; tcsh "restores" `user` to the login name).

Drawn from each shell's manual, case-sensitively where the shell is (all but cmd.exe):
- bash/dash (POSIX): https://www.gnu.org/software/bash/manual/html_node/Shell-Variables.html
- zsh: https://zsh.sourceforge.io/Doc/Release/Parameters.html (set by / used by the shell)
- fish: https://fishshell.com/docs/current/language.html#special-variables
- tcsh: tcsh(1), "Special shell variables" and the environment variables it ties to them
- cmd.exe: `set /?`, its dynamic variables, and variables that change command lookup
PATH itself is not here: prepending to it is what envs do, and every shell expects that.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reserved:
    """A variable that a shell or conda owns, and why a recipe may not set it."""

    shell: str
    why: str


def _table(shell: str, why: str, names: str) -> dict[str, Reserved]:
    return {name: Reserved(shell, why) for name in names.split()}


_SH = {
    **_table("sh/bash", "splits words and parses the shell's input", "IFS"),
    **_table("sh/bash", "read by the shell at startup and run as code", "ENV BASH_ENV"),
    **_table("sh/bash", "set by the shell itself", "PWD OLDPWD PPID LINENO SHLVL _ OPTIND OPTARG BASHPID BASH_SUBSHELL"),
    **_table("sh/bash", "read-only in bash", "EUID UID BASHOPTS SHELLOPTS"),
    **_table("sh/bash", "changes the shell's behaviour", "POSIXLY_CORRECT TMOUT PROMPT_COMMAND CDPATH PS1 PS2 PS4"),
    **_table(
        "bash",
        "a variable bash manages itself",
        "RANDOM SRANDOM SECONDS EPOCHSECONDS EPOCHREALTIME GROUPS FUNCNAME PIPESTATUS DIRSTACK BASH_ARGV BASH_ARGC "
        "BASH_SOURCE BASH_LINENO BASH_REMATCH BASH_COMMAND BASH_VERSION BASH_VERSINFO BASH_EXECUTION_STRING COMP_WORDS COMP_CWORD",
    ),
}
_ZSH = {
    **_table("zsh", "tied to an array the shell uses (path <-> PATH and so on)", "path fpath cdpath manpath module_path mailpath psvar"),
    **_table(
        "zsh",
        "read-only or managed by zsh",
        "status argv ARGC pipestatus signals options parameters commands functions aliases history historywords "
        "HISTCMD ERRNO TTY TTYIDLE ZSH_SUBSHELL zsh_eval_context",
    ),
    **_table("zsh", "assigning it makes zsh try to change the user or group id", "USERNAME EGID GID"),
    **_table(
        "zsh", "changes how zsh parses or prompts", "histchars HISTCHARS prompt PROMPT RPROMPT PROMPT2 RPROMPT2 NULLCMD READNULLCMD ZDOTDIR"
    ),
}
_FISH = {
    **_table(
        "fish",
        "read-only or set by fish itself",
        "status pipestatus status_generation argv history hostname version FISH_VERSION fish_pid last_pid "
        "CMD_DURATION umask fish_kill_signal fish_killring fish_private_mode",
    ),
}
_TCSH = {
    **_table("tcsh", "a tcsh shell variable tied to an environment variable (user <-> USER)", "user term home shell"),
    **_table(
        "tcsh",
        "a special tcsh shell variable",
        "cwd owd status argv prompt prompt2 prompt3 history savehist histfile noclobber echo verbose autologout "
        "time dirstack tty uid gid euid egid loginsh version tcsh shlvl",
    ),
}
# cmd.exe compares names case-insensitively: these are refused in any case.
_CMD = {
    **_table(
        "cmd.exe", "a dynamic variable cmd.exe computes", "CD DATE TIME RANDOM ERRORLEVEL CMDEXTVERSION CMDCMDLINE HIGHESTNUMANODENUMBER"
    ),
    **_table("cmd.exe", "changes how cmd.exe finds and runs commands", "PATHEXT COMSPEC PROMPT"),
}

RESERVED_EXACT: dict[str, list[Reserved]] = {}
for _table_ in (_SH, _ZSH, _FISH, _TCSH):
    for _name, _entry in _table_.items():
        RESERVED_EXACT.setdefault(_name, []).append(_entry)
RESERVED_FOLDED = {name.upper(): entry for name, entry in _CMD.items()}
# envkit's own state in the environment and its temporaries in the scripts
ENVKIT_PREFIXES = ("_ENVKIT_", "_envkit_", "envkitNew", "envkitOld")


def why_reserved(name: str) -> str | None:
    """Why a shell treats `name` specially, or None when any name would do."""
    if name.startswith(ENVKIT_PREFIXES):
        return "reserved for the state envkit's activation scripts keep"
    found = list(RESERVED_EXACT.get(name, []))
    folded = RESERVED_FOLDED.get(name.upper())
    if folded is not None:
        found.append(folded)
    if not found:
        return None
    shells = ", ".join(dict.fromkeys(r.shell for r in found))
    return f"special in {shells} ({found[0].why})"
