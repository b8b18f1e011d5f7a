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
- PowerShell: about_Environment_Variables (PSModulePath: modules it loads, and so runs, on demand)
- conda: conda.activate (CONDA_PREFIX, CONDA_SHLVL, CONDA_PREFIX_N, CONDA_DEFAULT_ENV, the prompt
  modifier and the `_CE_*` shims are its activation state; `conda deactivate` fails without them)
- the dynamic loader: ld.so(8) (LD_PRELOAD, LD_AUDIT load code into every program), dyld(1)
Prompts and hooks are refused because an interactive shell expands or runs their values (PS0,
PROMPT_COMMAND, zsh's RPS1 under prompt_subst, precmd_functions); history variables because bash
and zsh truncate the user's history file to them the moment they are set (HISTFILESIZE=0 empties
~/.bash_history).
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
    **_table("sh/bash", "changes the shell's behaviour", "POSIXLY_CORRECT TMOUT CDPATH GLOBIGNORE EXECIGNORE FIGNORE INPUTRC"),
    **_table("sh/bash", "a prompt or hook an interactive shell expands or runs as code", "PS0 PS1 PS2 PS3 PS4 PROMPT_COMMAND TIMEFORMAT"),
    **_table(
        "sh/bash",
        "the shell's history: setting it truncates or redirects the user's history file",
        "HISTFILE HISTFILESIZE HISTSIZE HISTCONTROL HISTIGNORE HISTTIMEFORMAT",
    ),
    **_table("sh/bash", "read by the shell and run or loaded as code", "BASH_XTRACEFD BASH_LOADABLES_PATH BASH_COMPAT PROMPT_DIRTRIM"),
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
        "zsh",
        "changes how zsh parses or prompts (prompts are expanded, and run under prompt_subst)",
        "histchars HISTCHARS prompt PROMPT RPROMPT PROMPT2 RPROMPT2 PROMPT3 PROMPT4 RPS1 RPS2 SPROMPT PROMPT_EOL_MARK POSTEDIT "
        "WATCHFMT TIMEFMT NULLCMD READNULLCMD ZDOTDIR",
    ),
    **_table("zsh", "zsh's history: setting it truncates or redirects the user's history file", "SAVEHIST"),
    **_table(
        "zsh",
        "a list of functions zsh runs as hooks",
        "precmd_functions preexec_functions chpwd_functions periodic_functions zshaddhistory_functions zshexit_functions PERIOD",
    ),
}
_FISH = {
    **_table(
        "fish",
        "read-only or set by fish itself",
        "status pipestatus status_generation argv history hostname version FISH_VERSION fish_pid last_pid "
        "CMD_DURATION umask fish_kill_signal fish_killring fish_private_mode",
    ),
    **_table(
        "fish",
        "where fish finds the functions and completions it runs, and the paths it puts on PATH",
        "fish_function_path fish_complete_path fish_user_paths",
    ),
    **_table("fish", "fish's history session: setting it switches the user's history", "fish_history"),
}
_CONDA_AND_LOADER = {
    **_table("conda", "conda's activation state: conda deactivate needs it as conda set it", "CONDA_PREFIX CONDA_SHLVL CONDA_DEFAULT_ENV"),
    **_table(
        "conda",
        "conda's own variable: its location, prompt and shims",
        "CONDA_EXE CONDA_PYTHON_EXE CONDA_PROMPT_MODIFIER CONDA_ROOT _CE_M _CE_CONDA",
    ),
    **_table("dynamic loader", "loads a library into every program started", "LD_PRELOAD LD_AUDIT DYLD_INSERT_LIBRARIES"),
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
    **_table(
        "PowerShell", "where PowerShell finds the modules it loads (and so runs) on demand", "PSModulePath PSExecutionPolicyPreference"
    ),
}

RESERVED_EXACT: dict[str, list[Reserved]] = {}
for _table_ in (_SH, _ZSH, _FISH, _TCSH, _CONDA_AND_LOADER):
    for _name, _entry in _table_.items():
        RESERVED_EXACT.setdefault(_name, []).append(_entry)
RESERVED_FOLDED = {name.upper(): entry for name, entry in _CMD.items()}
# envkit's own state in the environment and its temporaries in the scripts
ENVKIT_PREFIXES = ("_ENVKIT_", "_envkit_", "envkitNew", "envkitOld")
# conda's: CONDA_PREFIX_1.. (the stacked envs), CONDA_BACKUP_* (packages' activation scripts)
CONDA_PREFIXES = ("CONDA_PREFIX_", "CONDA_BACKUP_", "_CONDA_")


def why_reserved(name: str) -> str | None:
    """Why a shell, conda or the loader treats `name` specially, or None when any name would do."""
    if name.startswith(ENVKIT_PREFIXES):
        return "reserved for the state envkit's activation scripts keep"
    if name.startswith(CONDA_PREFIXES):
        return "special in conda (its activation state: conda deactivate restores from it)"
    found = list(RESERVED_EXACT.get(name, []))
    folded = RESERVED_FOLDED.get(name.upper())
    if folded is not None:
        found.append(folded)
    if not found:
        return None
    shells = ", ".join(dict.fromkeys(r.shell for r in found))
    return f"special in {shells} ({found[0].why})"
