"""The CLI contract: versioned JSON envelope on every command, documented exit codes, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envkit import __version__
from tests.conftest import run_envkit, write_recipe
from tests.support.tiny import tiny_channel, tiny_recipe

ENVELOPE = {"envkit_json", "envkit_version", "command", "ok", "exit_code", "data", "messages", "errors", "hint"}


def test_version() -> None:
    proc = run_envkit("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"envkit {__version__}"


@pytest.mark.parametrize(
    "args",
    [
        ["recipes", "list"],
        ["recipes", "show", "yolov8"],
        ["recipes", "show", "yolov8", "--resolved"],
        ["recipes", "validate", "recipes/yolov8.yaml"],
        ["audit", "--explain", "EK001"],
    ],
)
def test_every_command_has_the_envelope(args: list[str]) -> None:
    proc = run_envkit(*args, "--json", cwd=Path(__file__).parents[2])
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == ENVELOPE and doc["envkit_json"] == 1 and doc["ok"] is True and doc["errors"] == []


def test_show_resolved_json_has_specs_and_settings() -> None:
    doc = json.loads(run_envkit("recipes", "show", "yolov8", "--resolved", "--json").stdout)
    compiled = doc["data"]["compiled"]
    assert "libblas * *mkl" in [s["spec"] for s in compiled["conda_specs"]]
    settings = {s["op"]["name"]: s for s in compiled["activation"]["settings"]}
    assert settings["MKL_THREADING_LAYER"]["op"]["value"] == "GNU"
    assert doc["data"]["recipe"]["chain"][0].endswith("yolov8.yaml")


def test_show_resolved_human() -> None:
    proc = run_envkit("recipes", "show", "pytorch-cpu-openblas", "--resolved")
    assert proc.returncode == 0
    assert "libblas * *openblas" in proc.stdout and "libopenblas * *openmp*" in proc.stdout and "nomkl" in proc.stdout


def test_show_names_the_gpus_a_recipe_is_for(tmp_path: Path) -> None:
    recipe = write_recipe(
        tmp_path, "gpu", "envkit: 1\nname: gpu\nchannels: [c]\ntoolchain: {pytorch: {variant: cuda, cuda: '12.9', cuda_arch: '9.0'}}\n"
    )
    proc = run_envkit("recipes", "show", str(recipe))
    assert proc.returncode == 0 and "pytorch=conda-forge/cuda/12.9  cuda_arch=9.0" in proc.stdout, proc.stdout
    doc = json.loads(run_envkit("recipes", "show", str(recipe), "--json").stdout)
    assert doc["data"]["recipe"]["toolchain"]["pytorch"]["cuda_arch"] == "9.0"


def test_validate_reports_each_problem_and_exit_2(tmp_path: Path) -> None:
    bad = write_recipe(
        tmp_path,
        "bad",
        "envkit: 1\nname: bad\nchannels: [conda-forge]\ntoolchain: {blas: mkll}\nthreading: {env: {KMP_DUPLICATE_LIB_OK: 'TRUE'}}\n",
    )
    inconsistent = write_recipe(
        tmp_path, "inc", "envkit: 1\nname: inc\nchannels: [conda-forge]\nthreading: {env: {KMP_DUPLICATE_LIB_OK: 'TRUE'}}\n"
    )
    proc = run_envkit("recipes", "validate", str(bad), str(inconsistent), "recipes/yolov8.yaml", cwd=Path(__file__).parents[2])
    assert proc.returncode == 2
    lines = proc.stdout.splitlines()
    assert any(f"{bad}:4:19: toolchain.blas: expected one of" in line for line in lines)
    assert any("RC004" in line and "KMP_DUPLICATE_LIB_OK" in line for line in lines)
    assert "ok recipes/yolov8.yaml" in proc.stdout
    # a folder is each recipe file in it, as for `recipes check` (it was "invalid recipe name '.'")
    folder = run_envkit("recipes", "validate", str(tmp_path), "recipes", cwd=Path(__file__).parents[2])
    assert folder.returncode == 2
    assert {line.split()[0] + " " + line.split()[1].split(":")[0] for line in folder.stdout.splitlines()} >= {
        f"error {bad}",
        f"error {inconsistent}",
        "ok recipes/yolov8.yaml",
        "ok recipes/pytorch-base.yaml",
    }
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = run_envkit("recipes", "validate", str(empty))
    assert nothing.returncode == 2 and "no recipe file (*.yaml, *.yml)" in nothing.stderr and nothing.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["recipes", "show", "no-such"], 2, "no recipe named 'no-such'"),
        (["recipes", "show", "../../no/such/file.yaml"], 2, "recipe file not found"),
        (["recipes", "show", "Bad\nName"], 2, "invalid recipe name"),
        (["create", "nope", "--dry-run"], 2, "no recipe named 'nope'"),
        (["create", "yolov8", "-n", "a", "-p", "/tmp/x"], 2, "not allowed with argument"),
        (["probe", "-p", "/nonexistent/env"], 2, "is not a conda env"),
        (["create", "yolov8", "-n", "../escape", "--dry-run"], 2, "invalid env name"),
        (["frobnicate"], 2, "invalid choice"),
        # an empty value (`-p "$UNSET"`) named nothing and was taken as not given: the default env
        (["create", "yolov8", "-p", "", "--dry-run"], 2, "argument -p/--prefix: needs a value, not an empty string"),
        (["sync", "-n", ""], 2, "argument -n/--name: needs a value, not an empty string"),
        (["remove", "-p", "", "--yes"], 2, "argument -p/--prefix: needs a value"),
        (["lock", "yolov8", "-o", ""], 2, "argument -o/--output: needs a value"),
        (["lock", "yolov8", "--update", ""], 2, "argument --update: needs a value"),
        (["sync", "-n", "x", "--update", ""], 2, "argument --update: needs a value"),
        # `--lock "$UNSET"` solved afresh instead of installing the lock; `-c ""` went to a channel
        # named '' (https://conda.anaconda.org/); `--explain ""` audited the active env
        (["create", "yolov8", "--lock", "", "--dry-run"], 2, "argument --lock: needs a value"),
        (["sync", "-n", "x", "--lock", ""], 2, "argument --lock: needs a value"),
        (["create", "yolov8", "-c", "", "--dry-run"], 2, "argument -c/--channel: needs a value"),
        (["lock", "yolov8", "-c", ""], 2, "argument -c/--channel: needs a value"),
        (["audit", "--explain", ""], 2, "argument --explain: needs a value"),
        (["recipes", "add-source", ""], 2, "argument url: needs a value"),
        (["recipes", "add-source", "/srv/recipes.git", "--ref", ""], 2, "argument --ref: needs a value"),
        (["recipes", "add-source", "/srv/recipes.git", "--name", ""], 2, "argument --name: needs a value"),
        (["export", "-n", "x", "--format", "dockerfile", "--base", ""], 2, "argument --base: needs a value"),
    ],
)
def test_bad_input_is_one_line_with_exit_code(args: list[str], code: int, needle: str) -> None:
    proc = run_envkit(*args)
    assert proc.returncode == code, proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr


def test_json_errors_are_enveloped() -> None:
    proc = run_envkit("recipes", "show", "nope", "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 2 and doc["ok"] is False and doc["exit_code"] == 2
    assert doc["errors"] == ["no recipe named 'nope'"] and doc["hint"]


def test_unreachable_channel_says_which_why_and_suggests_mirror() -> None:
    proc = run_envkit("create", "conda-forge-base", "--dry-run", "--mirror", "conda-forge=http://127.0.0.1:9/conda-forge")
    assert proc.returncode == 3, proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and "cannot reach channel 'conda-forge' (http://127.0.0.1:9/conda-forge): Connection refused" in line
    assert "--mirror NAME=URL" in line
    dns = run_envkit("create", "conda-forge-base", "--dry-run", "--mirror", "conda-forge=http://no-such-host.invalid/conda-forge")
    assert dns.returncode == 3 and "the host name could not be resolved" in dns.stderr


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ("mirors: {conda-forge: https://m.example/cf}\n", "unknown key 'mirors' (did you mean 'mirrors'?)"),
        ("mirrors: {conda-forge: 42}\n", "mirrors.conda-forge: expected a URL, found 42"),
        ("mirrors: {conda-forge: notaurl}\n", "'notaurl' is not a URL"),
        ("mirrors: [conda-forge]\n", "mirrors: expected a mapping"),
    ],
)
def test_config_is_checked_field_by_field(isolated: Path, config: str, needle: str) -> None:
    path = isolated / ".config" / "envkit" / "config.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(config)
    proc = run_envkit("create", "conda-forge-base", "--dry-run")
    assert proc.returncode == 2 and needle in proc.stderr and str(path) in proc.stderr and "Traceback" not in proc.stderr


def test_mirror_flag_must_be_a_url() -> None:
    proc = run_envkit("create", "conda-forge-base", "--dry-run", "--mirror", "conda-forge=notaurl")
    assert proc.returncode == 2 and "--mirror conda-forge: 'notaurl' is not a URL" in proc.stderr


@pytest.mark.parametrize("args", [["create", "--json"], ["audit", "--min-severity", "loud", "--json"], ["frobnicate", "--json"]])
def test_usage_errors_are_json_documents_too(args: list[str]) -> None:
    proc = run_envkit(*args)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 2 and set(doc) == ENVELOPE and doc["ok"] is False and doc["exit_code"] == 2
    assert doc["errors"] and doc["hint"] and "Traceback" not in proc.stderr


def test_validate_json_lists_problems_at_the_top(tmp_path: Path) -> None:
    bad = write_recipe(tmp_path, "bad", "envkit: 1\nname: bad\nchannels: [conda-forge]\ntoolchain: {blas: mkll}\n")
    proc = run_envkit("recipes", "validate", str(bad), "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 2 and doc["ok"] is False
    assert doc["errors"] and doc["errors"][0].startswith(f"{bad}:4:19: toolchain.blas")


def test_solver_explanation_is_lines_and_the_hint_names_the_python_line(replica: dict[str, Path], tmp_path: Path) -> None:
    mirror = f"--mirror=conda-forge={replica['conda-forge'].as_uri()}"
    clash = write_recipe(tmp_path, "clash", "envkit: 1\nname: clash\nchannels: [conda-forge]\npackages: [pytorch 2.10.* cpu_mkl*, nomkl]\n")
    proc = run_envkit("create", str(clash), "--dry-run", mirror)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 3 and len(lines) > 5 and "\\n" not in proc.stderr
    assert all(line.startswith("envkit: error: ") for line in lines) and any("└─ nomkl" in line for line in lines)
    assert f"'nomkl' from {clash}:4:37 (recipe package)" in lines[-1]
    doc = json.loads(run_envkit("create", str(clash), "--dry-run", mirror, "--json").stdout)
    assert len(doc["errors"]) > 5 and any("└─ nomkl" in e for e in doc["errors"])
    oldpy = write_recipe(tmp_path, "oldpy", 'envkit: 1\nname: oldpy\nchannels: [conda-forge]\npython: "3.9"\npackages: [numpy]\n')
    proc = run_envkit("create", str(oldpy), "--dry-run", mirror)
    assert proc.returncode == 3 and f"'python 3.9.*' from {oldpy}:4:9 (python)" in proc.stderr


def test_recipe_path_that_is_not_a_file_says_what_it_is(tmp_path: Path) -> None:
    folder = tmp_path / "dir.yaml"
    folder.mkdir()
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    broken = tmp_path / "gone.yaml"
    broken.symlink_to(tmp_path / "nowhere.yaml")
    for path, needle in ((folder, "is a directory"), (fifo, "a FIFO"), (broken, "a broken symbolic link")):
        proc = run_envkit("recipes", "show", str(path))
        assert proc.returncode == 2 and needle in proc.stderr, (path, proc.stderr)


def test_name_must_match_the_file_and_unusable_files_are_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = write_recipe(tmp_path, "other", "envkit: 1\nname: different\nchannels: [conda-forge]\n")
    proc = run_envkit("recipes", "validate", str(other))
    assert proc.returncode == 2 and f"{other}:2:7: name: the recipe is named 'different' but its file is 'other.yaml'" in proc.stdout
    write_recipe(tmp_path / "path", "Bad Name", "envkit: 1\nname: x\nchannels: [conda-forge]\n")
    monkeypatch.setenv("ENVKIT_RECIPE_PATH", str(tmp_path / "path"))
    listed = json.loads(run_envkit("recipes", "list", "--json").stdout)["data"]
    row = next(r for r in listed if r["name"] == "Bad Name")
    assert "not usable" in row["description"] and "not a recipe name" in row["description"]


def test_empty_results_say_so() -> None:
    audit = run_envkit("audit", "--all")
    assert audit.returncode == 0 and audit.stdout.startswith("no envs found; looked at ")
    update = run_envkit("recipes", "update")
    assert update.returncode == 0 and "no recipe sources to update" in update.stdout


def test_every_option_has_help() -> None:
    from envkit.cli.main import build_parser

    parsers = [build_parser()]
    seen = 0
    while parsers:
        parser = parsers.pop()
        for action in parser._actions:
            if action.choices and isinstance(action.choices, dict):
                parsers.extend(action.choices.values())
            elif action.option_strings or action.dest not in ("command", "action"):
                seen += 1
                assert action.help, f"{parser.prog}: {action.option_strings or action.dest} has no help"
    assert seen > 40


def test_existing_env_is_refused_before_the_solve(tmp_path: Path, isolated: Path) -> None:
    from tests.support.tiny import tiny_channel, tiny_recipe

    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    assert run_envkit("create", str(recipe), "--yes", "--no-probe").returncode == 0
    again = run_envkit("create", str(recipe), "--yes", "--no-probe")
    assert again.returncode == 2 and "already exists" in again.stderr and "Plan for" not in again.stdout
    assert sorted(p.name for p in (isolated / ".conda").iterdir()) == ["environments.txt"]


def test_a_reader_that_goes_away_ends_envkit_quietly() -> None:
    """`envkit audit --list-rules | head -1`: the pipe closes under envkit's output. That is the
    reader's choice, not an envkit bug: no traceback, the exit code shells give SIGPIPE (141)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before envkit writes a byte
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "envkit", "audit", "--list-rules"], stdout=write_end, stderr=subprocess.PIPE, text=True, check=False
        )
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (141, "")


def test_a_write_the_filesystem_refuses_is_one_line_with_its_own_exit_code(tmp_path: Path) -> None:
    """A full disk is not a bug in envkit (70, a traceback): one line naming the file (a write()
    names none: the atomic writer adds its target), exit 74, and nothing left behind."""
    from tests.support.fullfs import run_in_small_fs

    channel = tiny_channel(tmp_path)
    recipe = tiny_recipe(tmp_path, channel)
    mount = tmp_path / "small"
    script = f"""
import json, os, subprocess, sys
fill({str(mount)!r})
out = subprocess.run([sys.executable, "-m", "envkit", "lock", {str(recipe)!r}, "-o", {str(mount / "tiny.lock")!r}], capture_output=True, text=True)
print(json.dumps({{"code": out.returncode, "stderr": out.stderr, "left": sorted(n for n in os.listdir({str(mount)!r}) if not n.startswith(".filler"))}}))
"""
    seen = run_in_small_fs(mount, 64, script, dict(os.environ))
    assert seen["code"] == 74 and "Traceback" not in seen["stderr"], seen["stderr"]
    assert seen["stderr"].startswith(f"envkit: error: no space left on the device: cannot write {mount}/tiny.lock ("), seen["stderr"]
    assert seen["left"] == []


@pytest.mark.parametrize("closed", [0, 1, 2], ids=["stdin", "stdout", "stderr"])
def test_a_standard_stream_closed_at_start(tmp_path: Path, closed: int) -> None:
    """`envkit sync >&-` in a script, `0<&-` from a daemon: Python leaves the stream None (the first
    print was a traceback, exit 70) and its fd free for the next file opened. A sync still changes
    the env through its installer child (forked: the parent's /dev/null stream must not close the
    child's pipe), says what it did on the streams left open, and a bad input keeps its exit code."""
    from tests.team.test_sync import edit, tiny_env

    _, recipe, prefix = tiny_env(tmp_path)
    edit(recipe, "packages: [tool]", "packages: [tool, extra]")

    def envkit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "envkit", *args],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            preexec_fn=lambda: os.close(closed),  # after the pipes are in place: this fd is closed at start
        )

    synced = envkit("sync", "-n", "tiny", "--yes", "--no-probe")
    assert synced.returncode == 0, synced.stderr
    assert (prefix / "conda-meta" / "extra-2.0-0.json").is_file()
    if closed != 1:
        assert f"synced {prefix}" in synced.stdout
    if closed != 2:
        assert synced.stderr == ""
    bad = envkit("create", str(tmp_path / "missing.yaml"), "--yes")
    assert bad.returncode == 2
    if closed != 2:
        assert bad.stderr.startswith("envkit: error: recipe file not found") and bad.stderr.count("\n") == 1


def test_output_the_disk_refuses_is_an_error_not_a_success(tmp_path: Path) -> None:
    """`envkit audit --json > report.json` on a full disk (/dev/full), or stdout open only for
    reading: the output is buffered, so the refusal came at the final flush, which ignored it: exit
    0 and a truncated report (or a traceback when a write failed first). Now one line on stderr and
    exit 74; a command that failed anyway keeps its own exit code and says both."""
    prefix = tmp_path / "envs" / "tiny"
    assert run_envkit("create", str(tiny_recipe(tmp_path, tiny_channel(tmp_path))), "--yes", "--no-probe").returncode == 0

    def envkit(*args: str, stdout: str = "/dev/full", mode: str = "w") -> subprocess.CompletedProcess[str]:
        with open(stdout, mode) as out:
            return subprocess.run(
                [sys.executable, "-m", "envkit", *args], stdout=out, stderr=subprocess.PIPE, text=True, timeout=300, check=False
            )

    refusal = "envkit: error: cannot write envkit's output to stdout: No space left on device (make room where stdout goes"
    for args in (("audit", "-p", str(prefix), "--json"), ("list",), ("--version",), ("sync", "-p", str(prefix))):
        full = envkit(*args)
        assert full.returncode == 74 and full.stderr.startswith(refusal) and full.stderr.count("\n") == 1, (args, full.stderr)
    (tmp_path / "some-file").touch()
    unreadable = envkit("list", stdout=str(tmp_path / "some-file"), mode="r")
    assert unreadable.returncode == 74 and "Bad file descriptor" in unreadable.stderr
    failed = envkit("create", str(tmp_path / "missing.yaml"), "--json")
    assert failed.returncode == 2 and failed.stderr.splitlines()[0].startswith(refusal)
    assert failed.stderr.splitlines()[1:] == [f"envkit: error: recipe file not found: {tmp_path / 'missing.yaml'}"]
    assert envkit("list", stdout="/dev/null").returncode == 0


def test_show_a_recipe_without_packages(tmp_path: Path) -> None:
    """A parent recipe may list no packages: the line says so ("-", as python's does), not
    "packages: " with nothing after it."""
    recipe = write_recipe(tmp_path, "bare", "envkit: 1\nname: bare\nchannels: [conda-forge]\n")
    proc = run_envkit("recipes", "show", str(recipe))
    assert proc.returncode == 0 and "packages: -\n" in proc.stdout and "python: -" in proc.stdout, proc.stdout


def test_a_stdout_that_cannot_encode_a_name(tmp_path: Path) -> None:
    """An env named café (conda takes it) with stdout set to ASCII: `envkit list` died with an
    internal error. Text for people escapes what it cannot write; data on stdout is never a lossy
    copy: it is refused in one line, and the same export to a file is exact."""
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    assert run_envkit("create", str(recipe), "-n", "café", "--yes", "--no-probe").returncode == 0
    ascii_out = {**os.environ, "PYTHONIOENCODING": "ascii"}
    listed = run_envkit("list", env=ascii_out)
    assert listed.returncode == 0 and "caf\\xe9" in listed.stdout, listed.stderr
    exported = run_envkit("export", "-n", "café", "--format", "environment-yml", env=ascii_out)
    assert exported.returncode == 74 and exported.stdout == "", exported.stdout
    assert (
        exported.stderr
        == "envkit: error: stdout's encoding (ascii) cannot write '\\xe9' (set PYTHONIOENCODING=utf-8, or use a UTF-8 locale)\n"
    )
    out = tmp_path / "env.yml"
    to_file = run_envkit("export", "-n", "café", "--format", "environment-yml", "-o", str(out), env=ascii_out)
    assert to_file.returncode == 0 and "/envs/café" in out.read_text(encoding="utf-8")


def test_bare_envkit_prints_the_usage_and_exits_2() -> None:
    proc = run_envkit()
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("usage: envkit") and "exit codes" in proc.stderr and "141" in proc.stderr


def test_a_typo_gets_a_did_you_mean() -> None:
    command = run_envkit("creat", "x")
    assert command.returncode == 2 and "did you mean 'create'?" in command.stderr and command.stderr.count("\n") == 1
    flag = run_envkit("audit", "--min-severty", "error")
    assert flag.returncode == 2 and "did you mean '--min-severity'?" in flag.stderr
    doc = json.loads(run_envkit("create", "x", "--dyr-run", "--json").stdout)
    assert doc["command"] == "create" and doc["exit_code"] == 2 and "did you mean '--dry-run'?" in doc["hint"]


@pytest.mark.parametrize("argv", [["--version"], ["--help"], [], ["nosuchcommand"], ["list", "--json"]])
def test_only_the_command_named_is_imported(argv: list[str]) -> None:
    """The registry (envkit.commands.registry) imports a command's module when that command is
    named: --version, --help, a bare envkit or a typo load none, `list` loads list's alone."""
    code = (
        "import sys; from envkit.cli.main import main; main(sys.argv[1:]); "
        "print('MODULES', sorted(m for m in sys.modules if m.startswith('envkit.commands.') and m != 'envkit.commands.registry'))"
    )
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=False)
    loaded = done.stdout.rsplit("MODULES ", 1)[1].strip()
    expected = "['envkit.commands.arguments', 'envkit.commands.list_envs']" if argv[:1] == ["list"] else "[]"
    assert loaded == expected, done.stderr
