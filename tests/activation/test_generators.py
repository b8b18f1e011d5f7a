"""Pure generator output: golden files for cmd.exe and PowerShell (no Windows shells run here),
shellcheck on the POSIX output, and the writer's ownership rules."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from envkit.activation.shells import GENERATORS, ScriptContext
from envkit.activation.writer import render_files, write_files
from envkit.recipe.model import EnvOp

GOLDEN = Path(__file__).parent / "golden"
CTX = ScriptContext(tag="0123abcd", header=("golden test header",))
OPS = (
    EnvOp("MKL_THREADING_LAYER", "set", value="GNU"),
    EnvOp("ENVKIT_QUOTES", "set", value='it\'s "100%" & more ^ | < > !x! $env:HOME `n'),
    EnvOp("ENVKIT_SPECIAL", "set", value="it's 100% & more ^ | < > (x) !x! $env:HOME `n"),
    EnvOp("ENVKIT_MULTILINE", "set", value="line one\nline two"),
    EnvOp("KMP_DUPLICATE_LIB_OK", "unset"),
    EnvOp("PATH", "prepend", entries=("C:\\tools\\bin", "D:\\x y"), separator=";"),
    EnvOp("PSModulePath", "append", entries=("C:\\mods",), separator=";"),
)


@pytest.mark.parametrize("suffix", ["bat", "ps1"])
def test_golden(suffix: str) -> None:
    pair = GENERATORS[suffix](CTX, OPS)
    for kind, text in (("activate", pair.activate), ("deactivate", pair.deactivate)):
        path = GOLDEN / f"{kind}.{suffix}"
        if os.environ.get("ENVKIT_TEST_REGEN_GOLDEN"):
            path.write_bytes(text.encode())
        assert path.read_bytes().decode() == text, f"{path} differs; rerun with ENVKIT_TEST_REGEN_GOLDEN=1 after checking the change"


def test_cmd_escapes_percent_and_refuses_newlines_and_double_quotes_visibly() -> None:
    """A double quote ends `SET "..."`'s quoting, after which cmd.exe runs what follows an & as a
    command (tests/activation/test_cmd.py runs it)."""
    text = GENERATORS["bat"](CTX, OPS).activate
    assert '@SET "ENVKIT_SPECIAL=it\'s 100%% & more ^ | < > (x) !x! $env:HOME `n"' in text
    assert "@ECHO envkit: ENVKIT_QUOTES holds a double quote, which cmd.exe cannot take safely; it was not set 1>&2" in text
    assert "@ECHO envkit: ENVKIT_MULTILINE holds a newline, which cmd.exe cannot take safely; it was not set 1>&2" in text
    assert "ENVKIT_QUOTES=" not in text.replace("_OLD_ENVKIT_QUOTES=", "")
    assert text.endswith("\r\n") and "\n" not in text.replace("\r\n", "")


def test_powershell_quotes_are_doubled() -> None:
    text = GENERATORS["ps1"](CTX, OPS).activate
    assert "$env:ENVKIT_QUOTES = 'it''s \"100%\" & more ^ | < > !x! $env:HOME `n'" in text


def test_shellcheck_clean(tmp_path: Path) -> None:
    exe = shutil.which("shellcheck")
    assert exe, "shellcheck is not installed; .ci/run installs it"
    posix_ops = tuple(op if op.separator == ":" else EnvOp(op.name, op.action, op.value, op.entries, ":") for op in OPS)
    pair = GENERATORS["sh"](CTX, posix_ops)
    for name, text in (("a.sh", pair.activate), ("d.sh", pair.deactivate)):
        path = tmp_path / name
        path.write_text(text)
        proc = subprocess.run([exe, "--shell=sh", "--severity=style", str(path)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout


def test_writer_owns_only_its_files(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    foreign = prefix / "etc" / "conda" / "activate.d" / "libblas_mkl_activate.sh"
    foreign.parent.mkdir(parents=True)
    foreign.write_text("export MKL_INTERFACE_LAYER=LP64,GNU\n")
    files = render_files(prefix, "demo", OPS[:1])
    assert {f.path.name for f in files} == {f"envkit-demo.{s}" for s in GENERATORS}
    assert len(write_files(files)) == 10
    assert write_files(files) == []  # idempotent: nothing rewritten
    assert foreign.read_text() == "export MKL_INTERFACE_LAYER=LP64,GNU\n"
    for f in files:
        assert f.path.stat().st_mode & 0o777 == 0o644


def test_every_way_out_of_a_cmd_script_says_errorlevel_0() -> None:
    """conda's cmd.exe activation (26.x, _conda_activate.bat) CALLs each hook with `|| (...EXIT /B 4)`:
    a hook ending with a nonzero ERRORLEVEL stops activation, and in a .bat a SET that succeeds does
    not reset it (what came before, or a SET deleting a variable that is not there, would stand).
    No cmd.exe runs here, so this checks the shape: each exit is an explicit EXIT /B 0."""
    pair = GENERATORS["bat"](CTX, OPS)
    for text in (pair.activate, pair.deactivate):
        assert text.endswith("@EXIT /B 0\r\n") and "GOTO :EOF" not in text
    assert "@IF NOT DEFINED _ENVKIT_0123abcd_ACTIVE EXIT /B 0\r\n" in pair.deactivate


# SCRIPTS_FORMAT -> the digest of every generator's text for OPS
FORMAT_DIGESTS = {
    2: "dbee94581816e0146c76328c9e6649fc68b569bcdd8fdd795d86c755b2ae7f5c",
    3: "d78f7d9f8fee53823ddf23a93499bf930898830d9ae1b25a24f2b9e7d76a3f68",
    4: "331faee091c040a164f29fd2f5392f060138b2c17156fe447c57a9a24605387c",
    5: "e91f47697ba60538bb7d3c578ac2c2715c7f2ebe5f6460b2abffcdd47db0dc2f",
    6: "5b1b967a44179cf668e20007c950c7de37cfb58fb9549301e3dd4e713c9d332a",
}


def test_the_scripts_format_moves_with_the_generated_text() -> None:
    """`envkit sync` rewrites an env's scripts when its record names an older SCRIPTS_FORMAT; a
    generator that writes other text without a new number would leave older envs as they are."""
    import hashlib

    from envkit.activation import SCRIPTS_FORMAT
    from envkit.activation.startup import startup_texts

    digest = hashlib.sha256()
    for suffix in sorted(GENERATORS):
        pair = GENERATORS[suffix](CTX, OPS)
        digest.update(pair.activate.encode())
        digest.update(pair.deactivate.encode())
    if SCRIPTS_FORMAT >= 4:  # the startup files in site-packages are written from then on
        for name, text in sorted(startup_texts(CTX.header, OPS).items()):
            digest.update(name.encode() + text.encode())
    if SCRIPTS_FORMAT >= 5:  # and where they set PYTHONNOUSERSITE, they take the user site out
        for name, text in sorted(startup_texts(CTX.header, (*OPS, EnvOp("PYTHONNOUSERSITE", "set", value="1"))).items()):
            digest.update(name.encode() + text.encode())
    if SCRIPTS_FORMAT >= 6:  # and csh removes an entry holding a single quote before adding it again
        quoted = (EnvOp("ENVKIT_QUOTED", "prepend", entries=("/it's", "/b!c")),)
        digest.update(GENERATORS["csh"](CTX, quoted).activate.encode())
    assert FORMAT_DIGESTS.get(SCRIPTS_FORMAT) == digest.hexdigest(), (
        f"the generated scripts changed: bump SCRIPTS_FORMAT (envkit/activation/__init__.py) to {SCRIPTS_FORMAT + 1} "
        f"and add {{{SCRIPTS_FORMAT + 1}: {digest.hexdigest()!r}}} to FORMAT_DIGESTS"
    )


def test_powershell_doubles_every_character_its_tokenizer_takes_for_a_single_quote() -> None:
    """U+201A and U+201B end a '...' string as ' does (PowerShell's CharTraits.cs, IsSingleQuote):
    a value holding one ran what followed it. No PowerShell runs here, so the text is checked."""
    value = "a\u201a; calc; \u201b \u2018x\u2019 'y'"
    script = GENERATORS["ps1"](CTX, (EnvOp("ENVKIT_Q", "set", value=value),)).activate
    [line] = [ln for ln in script.splitlines() if ln.startswith("$env:ENVKIT_Q")]
    assert line == "$env:ENVKIT_Q = 'a\u201a\u201a; calc; \u201b\u201b \u2018\u2018x\u2019\u2019 ''y'''"
