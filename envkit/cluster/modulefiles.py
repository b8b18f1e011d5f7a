"""An env published as an environment module: Lmod's Lua (`--format lmod`) or a Tcl modulefile
(`--format modulefile`). Pure: a snapshot in, the file's text out.

What a load does: ENV/bin goes first on PATH, CONDA_PREFIX and CONDA_DEFAULT_ENV are set as
`conda activate` sets them, and every activation setting is applied. An unload must give back the
environment from before the load, so each set or unset goes through `pushenv`, which keeps the
earlier value. Lmod's pushenv leaves a `__LMOD_STACK_NAME` behind when the variable had a value
before the load, and a later load then restores that stale value instead of the current one. The
module therefore clears the stack on unload when only the earlier value is left in it (a stack
another module pushed onto too is left alone). `setenv` in unload mode is Lmod's unset, which is
what the clearing uses.

Lmod writes a value's line break into the shell code it emits as the end of a command (bash,
zsh and tcsh then run the rest as a command of its own), so a value with one is refused in both
forms. Lmod's csh output cannot carry `!`, `{`, `}` or a tab (tcsh expands or splits them): bash,
zsh and fish get such values exactly, and the file names them for csh users. The Tcl form is for Environment Modules, whose pushenv and unsetenv restore on unload. Lmod
reads it too (tcl2lua), but Lmod 8.6 does not undo a Tcl pushenv on unload, strips trailing
whitespace, and re-encodes characters beyond ASCII; values it would alter are refused, and the
file names `--format lmod` for Lmod sites.
"""

from __future__ import annotations

import re

from envkit.core.errors import UsageError
from envkit.recipe.model import EnvOp
from envkit.team.export import EnvSnapshot, unresolved

LAYOUT = "MODULEPATH/NAME/VERSION.lua"


def _lua_str(value: str) -> str:
    """A Lua string literal with exactly these bytes, for every Lua Lmod runs on (5.1 and later):
    printable ASCII as it is, everything else as three-digit decimal byte escapes."""
    out = []
    for byte in value.encode("utf-8", "surrogateescape"):
        ch = chr(byte)
        if ch in '\\"':
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03d}")
    return '"' + "".join(out) + '"'


def _tcl_str(value: str, what: str) -> str:
    """A double-quoted Tcl word that tcl2lua hands on unchanged, or a one-line refusal."""
    if value != value.rstrip(" \t\r\n") or any(not ch.isprintable() for ch in value):
        raise UsageError(
            f"{what} holds a control character or trailing whitespace, which Lmod's reader of Tcl modulefiles changes",
            hint="export --format lmod: the Lua modulefile keeps every value exactly",
        )
    out = []
    for ch in value:
        if ch in '\\"$[]{}':
            out.append("\\" + ch)
        elif ord(ch) < 0x80:
            out.append(ch)
        else:  # Lmod's tcl2lua re-encodes it; Environment Modules reads the escape
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


# Lmod writes a name into the shell code of a load as it is, and a Tcl modulefile as a bare word
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _texts(op: EnvOp) -> tuple[str, ...]:
    return (op.value, *op.entries)


def _no_line_breaks(env: EnvSnapshot) -> None:
    for op in env.activation:
        if not NAME.fullmatch(op.name):
            raise UsageError(f"{op.name!r} is not a variable name a module can set", hint="remove it from the env's settings")
        if any(ch in text for text in _texts(op) for ch in "\r\n"):
            raise UsageError(
                f"{op.name} holds a line break, which Lmod writes into the shell code of a load as the end of a command",
                hint="activate the env instead (conda activate, envkit shell-hook), which keeps it exactly",
            )


CSH_ALTERED = "!{}\t"


def _csh_notes(env: EnvSnapshot, comment: str) -> list[str]:
    """Values Lmod's csh output alters, named in the file for the tcsh users of a site."""
    return [
        f"{comment} csh/tcsh: Lmod cannot write {op.name}'s value for csh exactly (it holds ! {{ }} or a tab); other shells get it exactly"
        for op in env.activation
        if any(ch in CSH_ALTERED for text in _texts(op) for ch in text)
    ]


def _describe(env: EnvSnapshot) -> list[str]:
    lines = [f"envkit env {env.name} at {env.prefix}" + (f", made from recipe {env.recipe}" if env.recipe else "")]
    lines.append(f"platform {env.platform}")
    for op in env.activation:
        if op.action == "set":
            lines.append(f"{op.name}={op.value}")
        elif op.action == "unset":
            lines.append(f"{op.name} unset")
        else:
            lines.append(f"{op.name}: {op.action} {op.separator.join(op.entries)}")
    return lines


def _settable(env: EnvSnapshot) -> list[EnvOp]:
    unset = [op.name for op in env.activation if unresolved(op)]
    if unset:
        raise UsageError(
            f"{', '.join(unset)} is worked out on the machine that installs the env, and this snapshot has no value for it",
            hint="export the module from the installed env (-n NAME or -p PREFIX)",
        )
    return [
        EnvOp("CONDA_PREFIX", "set", value=env.prefix),
        EnvOp("CONDA_DEFAULT_ENV", "set", value=env.name),
        *env.activation,
    ]


def lmod(env: EnvSnapshot) -> str:
    """Lmod's Lua modulefile for the env."""
    _no_line_breaks(env)
    about = _describe(env)
    lines = [
        "-- -*- lua -*-",
        f"-- Written by envkit export for Lmod; install it as {LAYOUT}.",
        "-- Unload gives back every variable as it was before the load.",
        *_csh_notes(env, "--"),
        f"whatis({_lua_str('Name: ' + env.name)})",
        f"whatis({_lua_str('Description: ' + about[0])})",
        f"help({_lua_str(chr(10).join(about) + chr(10))})",
        f'prepend_path("PATH", {_lua_str(env.prefix + "/bin")})',
    ]
    ops = _settable(env)
    pushed = [op.name for op in ops if op.action in ("set", "unset")]
    # Lmod's os.getenv reads what the module has done so far, so the stacks are looked at before
    # the pushenv lines pop them
    lines += [
        "-- unload: a stack holding only this module's value and the earlier one leaves Lmod's",
        "-- leftover once popped, which a later load would restore instead of the value then",
        "local envkit_leftover = {}",
        'if mode() == "unload" then',
        "  for _, name in ipairs({" + ", ".join(_lua_str(n) for n in pushed) + "}) do",
        '    local stack = os.getenv("__LMOD_STACK_" .. name)',
        "    if stack then",
        '      local _, colons = stack:gsub(":", ":")  -- Lmod\'s sandbox has no select()',
        "      envkit_leftover[name] = colons == 1",
        "    end",
        "  end",
        "end",
    ]
    for op in ops:
        if op.action in ("prepend", "append"):
            call = "prepend_path" if op.action == "prepend" else "append_path"
            joined = op.separator.join(op.entries)
            lines.append(f"{call}({_lua_str(op.name)}, {_lua_str(joined)}, {_lua_str(op.separator)})")
        elif op.action == "set":
            lines.append(f"pushenv({_lua_str(op.name)}, {_lua_str(op.value)})")
        else:
            # only what is there is unset (and so only what was unset is given back): Lmod writes
            # fish's `set -e` of an absent variable, whose failing status fails the load
            name = _lua_str(op.name)
            lines.append(f'if os.getenv({name}) ~= nil or os.getenv("__LMOD_STACK_" .. {name}) ~= nil then pushenv({name}, false) end')
    lines += [
        "for name, left in pairs(envkit_leftover) do",
        '  if left then setenv("__LMOD_STACK_" .. name, "") end  -- unload mode: Lmod unsets it',
        "end",
    ]
    return "\n".join(lines) + "\n"


def tcl(env: EnvSnapshot) -> str:
    """A Tcl modulefile (Environment Modules, and Lmod through tcl2lua)."""
    _no_line_breaks(env)
    for op in env.activation:  # a refusal names the variable, before the help text that shows it
        for text in _texts(op):
            _tcl_str(text, op.name)
    about = _describe(env)
    lines = [
        "#%Module1.0",
        "## Written by envkit export: a Tcl modulefile for Environment Modules and Lmod (install it as MODULEPATH/NAME/VERSION).",
        "## Under Environment Modules an unload gives back every variable as it was before the load.",
        "## Lmod sites: use envkit export --format lmod (Lmod 8.6 does not undo a Tcl pushenv on unload).",
        *_csh_notes(env, "##"),
        f"module-whatis {_tcl_str('Name: ' + env.name, 'the env name')}",
        f"module-whatis {_tcl_str('Description: ' + about[0], 'the env path')}",
        "proc ModulesHelp { } {",
        *(f"    puts stderr {_tcl_str(line, 'the help text')}" for line in about),
        "}",
        f"prepend-path PATH {_tcl_str(env.prefix + '/bin', 'the env path')}",
    ]
    for op in _settable(env):
        if op.action in ("prepend", "append"):
            call = "prepend-path" if op.action == "prepend" else "append-path"
            joined = _tcl_str(op.separator.join(op.entries), op.name)
            lines.append(f"{call} {_tcl_str('--delim=' + op.separator, op.name)} {op.name} {joined}")
        elif op.action == "set":
            lines.append(f"pushenv {op.name} {_tcl_str(op.value, op.name)}")
        else:
            lines.append(f"if {{[info exists ::env({op.name})]}} {{ unsetenv {op.name} $::env({op.name}) }}")
    return "\n".join(lines) + "\n"
