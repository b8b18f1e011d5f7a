"""Pure generators: resolved operations -> activate/deactivate script text, one pair per shell.

Every generator follows the same protocol, so all shells behave alike:
- On activate, if the env's marker `_ENVKIT_<tag>_ACTIVE` is absent, save each touched variable
  in `_ENVKIT_<tag>_OLD_<NAME>` (present only if the variable was set), then set the marker.
  A second activation keeps the first saved state, so deactivation still restores the original.
- Apply the operations. prepend/append drop duplicates of the new entries and empty entries.
- On deactivate, only if the marker is present: restore each variable (unset if it was unset,
  the saved bytes otherwise), drop the saved copies and the marker.
Values are quoted as data for each shell; nothing in them is ever evaluated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from envkit.core.errors import UsageError
from envkit.recipe.model import EnvOp


@dataclass(frozen=True)
class ScriptPair:
    """One shell's activate and deactivate scripts: written, hashed and checked together."""

    activate: str
    deactivate: str


@dataclass(frozen=True)
class ScriptContext:
    """What every script of one env opens with: the tag that marks it envkit's, and its header lines."""

    tag: str  # [0-9a-f]{8}, unique per env prefix
    header: tuple[str, ...]  # comment lines, shell-neutral text


def _names(ops: tuple[EnvOp, ...]) -> list[str]:
    return list(dict.fromkeys(op.name for op in ops))


def _marker(ctx: ScriptContext) -> str:
    return f"_ENVKIT_{ctx.tag}_ACTIVE"


def _old(ctx: ScriptContext, name: str) -> str:
    return f"_ENVKIT_{ctx.tag}_OLD_{name}"


# ---------------------------------------------------------------- POSIX sh (bash, zsh, dash)


def sh_quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


def _sh_list(op: EnvOp) -> list[str]:
    patterns = "|".join(["''", *(sh_quote(e) for e in op.entries)])
    joined = sh_quote(op.separator.join(op.entries))
    lines = [
        f"_envkit_sep={sh_quote(op.separator)}",
        "_envkit_acc=''",
        f'_envkit_rest="${{{op.name}-}}$_envkit_sep"',
        'while [ -n "$_envkit_rest" ]; do',
        '    _envkit_e=${_envkit_rest%%"$_envkit_sep"*}',
        '    _envkit_rest=${_envkit_rest#*"$_envkit_sep"}',
        "    case $_envkit_e in",
        f"        {patterns}) ;;",
        '        *) _envkit_acc="$_envkit_acc${_envkit_acc:+$_envkit_sep}$_envkit_e" ;;',
        "    esac",
        "done",
    ]
    if op.action == "prepend":
        lines.append(f'export {op.name}={joined}"${{_envkit_acc:+$_envkit_sep}}$_envkit_acc"')
    else:
        lines.append(f'export {op.name}="$_envkit_acc${{_envkit_acc:+$_envkit_sep}}"{joined}')
    lines.append("unset _envkit_sep _envkit_acc _envkit_rest _envkit_e")
    return lines


def _state(ctx: ScriptContext) -> str:
    return f"_ENVKIT_{ctx.tag}_STATE"


def posix(ctx: ScriptContext, ops: tuple[EnvOp, ...]) -> ScriptPair:
    """Prior state is saved in two statements whatever the variable count (activation is on every
    shell start): STATE lists the names that were set, OLD_<NAME> holds each prior value."""
    # SC2016: '$' inside single quotes is literal on purpose; values are data, never expanded.
    head = [f"# {line}" for line in ctx.header] + ["# shellcheck disable=SC2016"]
    names = _names(ops)
    # One case decides: already active (M...), nothing set yet (fast path), or save prior values.
    act = [*head, f'case "${{{_marker(ctx)}+M}}' + "".join(f"${{{n}+x}}" for n in names) + '" in']
    act.append("    M*) ;;")
    act.append(f'    "") export {_marker(ctx)}=1 {_state(ctx)}=" " ;;')
    # Slow path, kept short because every activation parses it. eval only ever sees the
    # variable names (validated identifiers); values are expanded inside it, never re-read as code.
    old_prefix = _old(ctx, "")
    act.append(f"    *) _envkit_s=' '; for _envkit_n in {' '.join(names)}; do")
    act.append(
        '           eval "case \\${$_envkit_n+x} in x) _envkit_s=\\"\\${_envkit_s}$_envkit_n \\"; '
        f'export {old_prefix}$_envkit_n=\\"\\${{$_envkit_n}}\\" ;; esac"'
    )
    act.append(f'       done; export {_state(ctx)}="$_envkit_s" {_marker(ctx)}=1; unset _envkit_s _envkit_n ;;')
    act.append("esac")
    pending_set: list[str] = []
    pending_unset: list[str] = []

    def flush() -> None:
        if pending_set:
            act.append("export " + " ".join(pending_set))
            pending_set.clear()
        if pending_unset:
            act.append("unset " + " ".join(pending_unset))
            pending_unset.clear()

    for op in ops:
        if op.action == "set":
            if pending_unset:
                flush()
            pending_set.append(f"{op.name}={sh_quote(op.value)}")
        elif op.action == "unset":
            if pending_set:
                flush()
            pending_unset.append(op.name)
        else:
            flush()
            act += _sh_list(op)
    flush()
    # SC2154: the saved state comes from the activate script, through the environment.
    deact = [*head[:-1], "# shellcheck disable=SC2016,SC2154", f'if [ -n "${{{_marker(ctx)}+x}}" ]; then']
    for name in reversed(names):
        deact.append(f'    case ${_state(ctx)} in *" {name} "*) export {name}="${_old(ctx, name)}" ;; *) unset {name} ;; esac')
    deact.append("    unset " + " ".join([_state(ctx), *(_old(ctx, n) for n in names), _marker(ctx)]))
    deact.append("fi")
    return ScriptPair("\n".join(act) + "\n", "\n".join(deact) + "\n")


# ---------------------------------------------------------------- fish


def fish_quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


# fish's `set VAR value` passes the status before it through, so one `set -e` of a variable that
# was not set (status 4) would be the script's status, and conda's: `conda activate ENV; and train`
# would not train.
FISH_ZERO_STATUS = ("# leave status 0: `set` passes an earlier `set -e`'s failure through", "true")


def fish(ctx: ScriptContext, ops: tuple[EnvOp, ...]) -> ScriptPair:
    head = [f"# {line}" for line in ctx.header]
    act = [*head, f"if not set -q {_marker(ctx)}"]
    for name in _names(ops):
        old = _old(ctx, name)
        act += [
            f"    if set -q {name}",
            f'        set -gx {old} "${name}"',
            "    else",
            f"        set -e -g {old}",
            "    end",
        ]
    act += [f"    set -gx {_marker(ctx)} 1", "end"]
    for op in ops:
        if op.action == "set":
            act.append(f"set -gx {op.name} {fish_quote(op.value)}")
        elif op.action == "unset":
            act.append(f"set -e -g {op.name}")
        else:
            sep = fish_quote(op.separator)
            entries = " ".join(fish_quote(e) for e in op.entries)
            act += [
                "set -l _envkit_old",
                f"if set -q {op.name}",
                f'    for _envkit_e in (string split -- {sep} "${op.name}")',
                f'        if test -n "$_envkit_e"; and not contains -- "$_envkit_e" {entries}',
                '            set -a _envkit_old "$_envkit_e"',
                "        end",
                "    end",
                "end",
            ]
            parts = f"{entries} $_envkit_old" if op.action == "prepend" else f"$_envkit_old {entries}"
            act += [f"set -gx {op.name} (string join -- {sep} {parts})", "set -e _envkit_old"]
    deact = [*head, f"if set -q {_marker(ctx)}"]
    for name in reversed(_names(ops)):
        old = _old(ctx, name)
        deact += [
            f"    if set -q {old}",
            f'        set -gx {name} "${old}"',
            f"        set -e -g {old}",
            "    else",
            f"        set -e -g {name}",
            "    end",
        ]
    deact += [f"    set -e -g {_marker(ctx)}", "end"]
    return ScriptPair("\n".join([*act, *FISH_ZERO_STATUS]) + "\n", "\n".join([*deact, *FISH_ZERO_STATUS]) + "\n")


# ---------------------------------------------------------------- csh / tcsh


def csh_quote(value: str) -> str:
    """Single quotes; csh still treats `!` (history) and a bare newline specially inside them."""
    return "'" + value.replace("'", "'\\''").replace("!", "\\!").replace("\n", "\\\n") + "'"


# tcsh takes any ASCII character but letters, digits, `_` and space as the `:s` delimiter (measured on tcsh 6.24).
# Readable ones first; control characters are the fallback for an entry that holds all of those.
_CSH_DELIMS = "/|#,^~@%+=" + "".join(map(chr, (*range(0x01, 0x09), *range(0x0E, 0x20), 0x7F)))


def _csh_in_double_quotes(value: str) -> str:
    """Text inside csh double quotes, where a `:s` modifier's words go: `'` is plain there, and
    only `!` (history) and a newline need a backslash."""
    return value.replace("!", "\\!").replace("\n", "\\\n")


def _csh_delim(texts: list[str]) -> str:
    for delim in _CSH_DELIMS:
        if not any(delim in t for t in texts):
            return delim
    raise UsageError("a path entry uses every csh substitution delimiter", hint="simplify the entry")


def _csh_list(op: EnvOp) -> list[str]:
    sep = op.separator
    d = _csh_delim([*op.entries, sep])
    lines = [
        f"if ( $?{op.name} ) then",
        f'    set _envkit_v = {csh_quote(sep)}"${op.name}"{csh_quote(sep)}',
        "else",
        f"    set _envkit_v = {csh_quote(sep + sep)}",
        "endif",
    ]
    # tcsh's :a modifier stops after one pass on overlapping matches (":0:0:"), so loop to a fixed point.
    lines += ['set _envkit_prev = ""', 'while ( "$_envkit_v" != "$_envkit_prev" )', '    set _envkit_prev = "$_envkit_v"']
    for entry in op.entries:
        needle = _csh_in_double_quotes(f"{sep}{entry}{sep}")
        lines.append(f'    set _envkit_v = "$_envkit_v:s{d}{needle}{d}{_csh_in_double_quotes(sep)}{d}"')
    lines += [f'    set _envkit_v = "$_envkit_v:s{d}{sep}{sep}{d}{sep}{d}"', "end", "unset _envkit_prev"]
    joined = csh_quote(sep.join(op.entries))
    if op.action == "prepend":
        lines.append(f'set _envkit_v = {joined}"$_envkit_v"{csh_quote("@@ENVKIT@@")}')
        lines.append(f'setenv {op.name} "$_envkit_v:s{d}{sep}@@ENVKIT@@{d}{d}"')
    else:
        lines.append(f'set _envkit_v = {csh_quote("@@ENVKIT@@")}"$_envkit_v"{joined}')
        lines.append(f'setenv {op.name} "$_envkit_v:s{d}@@ENVKIT@@{sep}{d}{d}"')
    lines.append("unset _envkit_v")
    return lines


def csh(ctx: ScriptContext, ops: tuple[EnvOp, ...]) -> ScriptPair:
    head = [f"# {line}" for line in ctx.header]
    act = [*head, f"if ( ! $?{_marker(ctx)} ) then"]
    for name in _names(ops):
        old = _old(ctx, name)
        act += [f"    if ( $?{name} ) then", f"        setenv {old} ${name}:q", "    else", f"        unsetenv {old}", "    endif"]
    act += [f"    setenv {_marker(ctx)} 1", "endif"]
    for op in ops:
        if op.action == "set":
            act.append(f"setenv {op.name} {csh_quote(op.value)}")
        elif op.action == "unset":
            act.append(f"unsetenv {op.name}")
        else:
            act += _csh_list(op)
    deact = [*head, f"if ( $?{_marker(ctx)} ) then"]
    for name in reversed(_names(ops)):
        old = _old(ctx, name)
        deact += [
            f"    if ( $?{old} ) then",
            f"        setenv {name} ${old}:q",
            f"        unsetenv {old}",
            "    else",
            f"        unsetenv {name}",
            "    endif",
        ]
    deact += [f"    unsetenv {_marker(ctx)}", "endif"]
    return ScriptPair("\n".join(act) + "\n", "\n".join(deact) + "\n")


# ---------------------------------------------------------------- cmd.exe


def _cmd_value(value: str) -> str:
    return value.replace("%", "%%")


def _cmd_unsafe(value: str) -> str | None:
    """What keeps a value out of a cmd.exe script. A newline ends the line. A double quote ends the
    quoting of `SET "NAME=..."`, and cmd.exe runs what follows an `&` or `|` as a command (`a"&calc`
    ran calc); set unquoted and caret-escaped, the value would still run once another script
    expands it (`%NAME%`, as every save and prepend does), so no value holding one is set at all."""
    if "\n" in value or "\r" in value:
        return "a newline"
    return "a double quote" if '"' in value else None


def _cmd_unrepresentable(name: str, what: str) -> str:
    return f"@ECHO envkit: {name} holds {what}, which cmd.exe cannot take safely; it was not set 1>&2"


def _cmd_dedupable(op: EnvOp) -> bool:
    """Entries cmd.exe's `%NAME:old=new%` can find: a `;` list (Windows' own), none holding `%` or
    `=`, which that syntax cannot take. Others are added as they are, duplicates and all."""
    return op.separator == ";" and not any("%" in e or "=" in e for e in op.entries)


def _cmd_list(op: EnvOp) -> list[str]:
    """Prepend or append as the other shells do: each new entry taken out of the list first (so a
    second activation adds nothing), empty entries dropped. `;list;` with `;entry;` replaced by `;`,
    three times over, since one pass leaves every second one of adjacent copies (and of `;;` runs):
    up to seven in a row go. Matching is case-insensitive, as Windows paths are."""
    t = "_envkit_t"
    lines = [f'@SET "{t}=;%{op.name}%;"']
    for entry in [*op.entries, ""]:  # "": the empty entries
        lines += [f'@SET "{t}=%{t}:;{entry};=;%"'] * 3
    lines.append(f'@SET "{t}=%{t}:~1,-1%"')
    joined = ";".join(op.entries)
    both = f"{joined};%{t}%" if op.action == "prepend" else f"%{t}%;{joined}"
    lines += [f'@IF DEFINED {t} (SET "{op.name}={both}") ELSE (SET "{op.name}={joined}")', f'@SET "{t}="']
    return lines


# conda's cmd.exe activation (26.x) CALLs each hook and stops with "Activation script ... failed"
# when its ERRORLEVEL is not 0, and in a .bat a SET that succeeds leaves ERRORLEVEL as it was (only
# .cmd files reset it), so a script falling off its end returns whatever came before, or what a SET
# deleting a variable that is not there left: every way out of a script says 0.
CMD_ZERO_EXIT = "@EXIT /B 0"


def cmd(ctx: ScriptContext, ops: tuple[EnvOp, ...]) -> ScriptPair:
    """cmd.exe has no unset-vs-empty distinction (an empty SET deletes), so none is kept here."""
    head = [f"@REM {line}" for line in ctx.header]
    label = f"envkit_{ctx.tag}"
    act = [*head, f"@IF DEFINED {_marker(ctx)} GOTO {label}_apply"]
    for name in _names(ops):
        act.append(f'@IF DEFINED {name} (SET "{_old(ctx, name)}=%{name}%") ELSE (SET "{_old(ctx, name)}=")')
    act += [f'@SET "{_marker(ctx)}=1"', f":{label}_apply"]
    for op in ops:
        unsafe = _cmd_unsafe(op.value if op.action == "set" else "".join(op.entries))
        if unsafe:
            act.append(_cmd_unrepresentable(op.name, unsafe))
        elif op.action == "set":
            act.append(f'@SET "{op.name}={_cmd_value(op.value)}"')
        elif op.action == "unset":
            act.append(f'@SET "{op.name}="')
        elif _cmd_dedupable(op):
            act += _cmd_list(op)
        else:
            joined = _cmd_value(op.separator.join(op.entries))
            both = f"{joined}{op.separator}%{op.name}%" if op.action == "prepend" else f"%{op.name}%{op.separator}{joined}"
            act.append(f'@IF DEFINED {op.name} (SET "{op.name}={both}") ELSE (SET "{op.name}={joined}")')
    act.append(CMD_ZERO_EXIT)
    deact = [*head, f"@IF NOT DEFINED {_marker(ctx)} {CMD_ZERO_EXIT[1:]}"]
    for name in reversed(_names(ops)):
        old = _old(ctx, name)
        deact += [f'@SET "{name}=%{old}%"', f'@SET "{old}="']
    deact += [f'@SET "{_marker(ctx)}="', CMD_ZERO_EXIT]
    return ScriptPair("\r\n".join(act) + "\r\n", "\r\n".join(deact) + "\r\n")


# ---------------------------------------------------------------- PowerShell


# PowerShell's tokenizer takes five characters for a single quote (CharExtensions.IsSingleQuote in
# its CharTraits.cs): ' and the typographic U+2018, U+2019, U+201A and U+201B. Any of them ends a
# '...' string, and two together are one of it, so each is doubled.
PS_SINGLE_QUOTES = frozenset("'\u2018\u2019\u201a\u201b")


def ps_quote(value: str) -> str:
    return "'" + "".join(ch * 2 if ch in PS_SINGLE_QUOTES else ch for ch in value) + "'"


def powershell(ctx: ScriptContext, ops: tuple[EnvOp, ...]) -> ScriptPair:
    head = [f"# {line}" for line in ctx.header]
    act = [*head, f"if (-not (Test-Path Env:{_marker(ctx)})) {{"]
    for name in _names(ops):
        old = _old(ctx, name)
        act.append(
            f"    if (Test-Path Env:{name}) {{ $env:{old} = $env:{name} }} else {{ Remove-Item Env:{old} -ErrorAction SilentlyContinue }}"
        )
    act += [f"    $env:{_marker(ctx)} = '1'", "}"]
    for op in ops:
        if op.action == "set":
            act.append(f"$env:{op.name} = {ps_quote(op.value)}")
        elif op.action == "unset":
            act.append(f"Remove-Item Env:{op.name} -ErrorAction SilentlyContinue")
        else:
            sep = ps_quote(op.separator)
            entries = ", ".join(ps_quote(e) for e in op.entries)
            act += [
                f"$envkitNew = @({entries})",
                f"$envkitOld = @(if (Test-Path Env:{op.name}) {{ $env:{op.name}.Split({sep}) | Where-Object {{ $_ -and ($envkitNew -notcontains $_) }} }})",
                f"$env:{op.name} = ("
                + ("@($envkitNew) + @($envkitOld)" if op.action == "prepend" else "@($envkitOld) + @($envkitNew)")
                + f") -join {sep}",
                "Remove-Variable envkitNew, envkitOld",
            ]
    deact = [*head, f"if (Test-Path Env:{_marker(ctx)}) {{"]
    for name in reversed(_names(ops)):
        old = _old(ctx, name)
        deact.append(
            f"    if (Test-Path Env:{old}) {{ $env:{name} = $env:{old}; Remove-Item Env:{old} }} "
            f"else {{ Remove-Item Env:{name} -ErrorAction SilentlyContinue }}"
        )
    deact += [f"    Remove-Item Env:{_marker(ctx)}", "}"]
    return ScriptPair("\n".join(act) + "\n", "\n".join(deact) + "\n")


Generator = Callable[[ScriptContext, tuple[EnvOp, ...]], ScriptPair]

# suffix -> generator; conda sources activate.d files by these suffixes per shell.
GENERATORS: dict[str, Generator] = {
    "sh": posix,
    "fish": fish,
    "csh": csh,
    "bat": cmd,
    "ps1": powershell,
}

SHELL_SUFFIX: dict[str, str] = {
    "bash": "sh",
    "zsh": "sh",
    "dash": "sh",
    "sh": "sh",
    "posix": "sh",
    "fish": "fish",
    "csh": "csh",
    "tcsh": "csh",
    "cmd": "bat",
    "cmd.exe": "bat",
    "powershell": "ps1",
    "pwsh": "ps1",
}
