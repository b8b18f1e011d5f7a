"""conda's own commands on envs envkit made: list, list --explicit, env export, install, remove,
doctor, rename, remove --all, run, and conda activate/deactivate through its shell hooks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from envkit.activation.writer import prefix_tag
from envkit.install.transaction import env_lock
from envkit.prefix.record import legacy_record_path, record_path
from tests.conftest import run_envkit, write_recipe
from tests.support.conda import Conda
from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_tar_bz2
from tests.support.records import record_json
from tests.support.tiny import tiny_channel


def envkit_env(tmp_path: Path, replica: dict[str, Path], name: str = "mklenv") -> Path:
    recipe = write_recipe(
        tmp_path / "recipes",
        name,
        f'envkit: 1\nname: {name}\nchannels: [conda-forge]\npython: "3.12"\npackages: [numpy, mkl-service]\n'
        "toolchain: {blas: mkl, openmp: llvm}\n",
    )
    prefix = tmp_path / "envs" / name
    proc = run_envkit(
        "create", str(recipe), "-p", str(prefix), "--yes", "--no-probe", f"--mirror=conda-forge={replica['conda-forge'].as_uri()}"
    )
    assert proc.returncode == 0, proc.stderr
    return prefix


def package_names(prefix: Path) -> set[str]:
    return {json.loads(p.read_text())["name"] for p in (prefix / "conda-meta").glob("*.json")}


def test_conda_reads_lists_exports_and_changes_an_envkit_env(conda: Conda, replica: dict[str, Path], tmp_path: Path) -> None:
    prefix = envkit_env(tmp_path, replica)
    names = package_names(prefix)
    listed = conda.ok("list", "-p", str(prefix))
    assert all(name in listed for name in names) and "envkit" not in listed.replace(str(prefix), "")
    explicit = [line for line in conda.ok("list", "--explicit", "-p", str(prefix)).splitlines() if line.startswith("file:")]
    assert len(explicit) == len(names)
    exported = conda.ok("env", "export", "-p", str(prefix))
    assert "numpy=2.2.6" in exported and "mkl-service=2.8.0" in exported
    cf = replica["conda-forge"].as_uri()
    conda.ok("install", "-y", "-q", "-p", str(prefix), "--override-channels", "-c", cf, "blis")
    assert "blis" in package_names(prefix)
    conda.ok("remove", "-y", "-q", "-p", str(prefix), "blis")
    assert package_names(prefix) == names
    doctor = conda.ok("doctor", "-p", str(prefix))
    assert "❌" not in doctor and "The environment is consistent" in doctor
    audit = run_envkit("audit", "-p", str(prefix), "--min-severity", "warning")
    assert audit.returncode == 0, audit.stdout


def lock_file(prefix: Path) -> Path:
    return prefix.with_name(f".{prefix.name}.envkit-lock")


def test_rename_carries_the_record_and_remove_all_deletes_it(conda: Conda, replica: dict[str, Path], tmp_path: Path) -> None:
    """What conda does to an envkit env leaves nothing of envkit's beside it: the lock file envkit
    keeps next to an env goes when conda renames the env away or removes it (the plugin's hook
    after those commands), as it goes with `envkit remove`."""
    prefix = envkit_env(tmp_path, replica)
    renamed = tmp_path / "envs" / "renamed"
    assert lock_file(prefix).is_file()  # the create's
    conda.ok("rename", "-p", str(prefix), str(renamed))
    assert not prefix.exists() and not lock_file(prefix).exists()
    record = record_json(renamed)
    assert record is not None and record["recipe"]["name"] == "mklenv"
    audit = json.loads(run_envkit("audit", "-p", str(renamed), "--json").stdout)
    assert audit["data"]["audits"][0]["envkit_managed"] is True and audit["exit_code"] == 0, audit
    shown = run_envkit("activation", "show", "-p", str(renamed))
    assert shown.returncode == 0 and "MKL_THREADING_LAYER='GNU'" in shown.stdout
    with env_lock(renamed):  # as every envkit command that changes the env takes it
        pass
    cf = replica["conda-forge"].as_uri()
    conda.ok("install", "-y", "-q", "-p", str(renamed), "--override-channels", "-c", cf, "blis")
    conda.ok("remove", "-y", "-q", "-p", str(renamed), "blis")
    assert lock_file(renamed).is_file()  # a package removal leaves the env, and its lock file
    conda.ok("remove", "--all", "-y", "-p", str(renamed))
    assert not renamed.exists() and not lock_file(renamed).exists()
    assert sorted(p.name for p in renamed.parent.iterdir() if p.name.startswith(".")) == []

    # `conda env remove`, of an env conda made and envkit took the lock of (audit --fix does)
    made = conda.create(tmp_path / "envs" / "made", [tiny_channel(tmp_path)], ["tool"])
    with env_lock(made):
        pass
    conda.ok("env", "remove", "-y", "-p", str(made))
    assert not made.exists() and not lock_file(made).exists()


def test_old_record_breaks_conda_until_audit_fix_moves_it(conda: Conda, replica: dict[str, Path], tmp_path: Path) -> None:
    """What envkit 0.1 left behind: conda list dies on conda-meta/envkit.json; the audit's fix heals it."""
    prefix = envkit_env(tmp_path, replica)
    legacy_record_path(prefix).write_text(record_path(prefix).read_text())
    record_path(prefix).unlink()
    broken = conda.run("list", "-p", str(prefix))
    assert broken.returncode != 0 and "not enough values to unpack" in broken.stdout + broken.stderr
    assert run_envkit("audit", "-p", str(prefix), "--fix", "--yes").returncode == 0
    conda.ok("list", "-p", str(prefix))
    conda.ok("list", "--explicit", "-p", str(prefix))
    conda.ok("env", "export", "-p", str(prefix))


def test_conda_run_applies_envkit_activation(conda: Conda, seed_env: Path) -> None:
    out = conda.ok("run", "-p", str(seed_env), "python", "-c", "import os; print(os.environ.get('MKL_THREADING_LAYER'))")
    assert out.strip() == "GNU"


TRICKY = "a 'b' \"c\" $d `e` \\f *"
PRIOR_STATES = {
    "unset": {},
    "empty": {"ENVKIT_A": "", "ENVKIT_B": "", "ENVKIT_GONE": "", "ENVKIT_PATHS": ""},
    "set": {"ENVKIT_A": "old a", "ENVKIT_B": "old b", "ENVKIT_GONE": "was here", "ENVKIT_PATHS": "/usr/old:/opt/y"},
}
NAMES = ("ENVKIT_A", "ENVKIT_B", "ENVKIT_GONE", "ENVKIT_PATHS")


@pytest.fixture(scope="module")
def hook_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hooks")
    body = (
        f"envkit: 1\nname: hooks\nchannels: [{tiny_channel(root).as_uri()}]\npackages: [tool]\n"
        "threading:\n  env:\n    ENVKIT_A: GNU\n"
        f"    ENVKIT_B: {json.dumps(TRICKY)}\n"
        "    ENVKIT_GONE: {unset: true}\n    ENVKIT_PATHS: {prepend: [/opt/x, /opt/y]}\n"
    )
    recipe = write_recipe(root / "recipes", "hooks", body)
    prefix = root / "env"
    proc = run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe", env={**_base_env(root)})
    assert proc.returncode == 0, proc.stderr
    return prefix


def _base_env(root: Path) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONDA_", "ENVKIT_", "_ENVKIT_"))}
    env.update(HOME=str(root / "home"), XDG_CONFIG_HOME=str(root / "cfg"), XDG_CACHE_HOME=str(root / "cache"))
    return env


HOOK_SCRIPTS = {
    # conda activate && the job: each step must leave status 0 (exit 97/98 says which did not)
    "bash": 'eval "$("$CONDA_EXE_FOR_TEST" shell.bash hook)"; {dump}; conda activate "$ENV_PREFIX" || exit 97; {dump}; conda deactivate || exit 98; {dump}',
    "zsh": 'eval "$("$CONDA_EXE_FOR_TEST" shell.zsh hook)"; {dump}; conda activate "$ENV_PREFIX" || exit 97; {dump}; conda deactivate || exit 98; {dump}',
    "fish": 'eval ("$CONDA_EXE_FOR_TEST" shell.fish hook | string collect); {dump}; conda activate "$ENV_PREFIX"; or exit 97; {dump}; conda deactivate; or exit 98; {dump}',
    # conda's csh hook sources ROOT/etc/profile.d/conda.csh, which conda's installer puts there (tools/test.sh
    # too). csh expands aliases a line at a time, so the `conda` alias the hook defines is there from the next
    # line on; and it runs `a || b` in a subshell, which would lose what the alias's `source` sets.
    "tcsh": 'eval "`$CONDA_EXE_FOR_TEST shell.csh hook`"\n{dump}\nconda activate "$ENV_PREFIX"\nif ($status) exit 97\n{dump}\n'
    "conda deactivate\nif ($status) exit 98\n{dump}",
}
DUMP = "env -0; printf '|\\0'"  # the whole environment, NUL-separated, then a fence


def need_shell(conda: Conda, shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.fail(f"{shell} is not installed (tools/test.sh installs it)")
    csh_hook = conda.exe.resolve().parent.parent / "etc" / "profile.d" / "conda.csh"
    if shell == "tcsh" and not csh_hook.is_file():
        pytest.fail(f"{csh_hook} is missing: conda's csh hook sources it (tools/test.sh copies it from conda/shell/etc/profile.d)")


@pytest.mark.parametrize("prior", sorted(PRIOR_STATES))
@pytest.mark.parametrize("shell", sorted(HOOK_SCRIPTS))
def test_conda_activate_and_deactivate_through_the_shell_hook(conda: Conda, hook_env: Path, shell: str, prior: str) -> None:
    need_shell(conda, shell)
    script = HOOK_SCRIPTS[shell].format(dump=DUMP)
    env = conda.environ(CONDA_EXE_FOR_TEST=str(conda.exe), ENV_PREFIX=str(hook_env))
    for name in NAMES:
        env.pop(name, None)
    env.update(PRIOR_STATES[prior])
    proc = subprocess.run([shell, "-c", script], capture_output=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr.decode()}"
    before, during, after = (chunk.split(b"\0") for chunk in proc.stdout.split(b"|\0")[:3])
    state = {n: PRIOR_STATES[prior].get(n) for n in NAMES}

    def parse(items: list[bytes]) -> dict[str, str | None]:
        seen = dict(item.decode().partition("=")[::2] for item in items if b"=" in item)
        return {name: seen.get(name) for name in NAMES}

    assert parse(before) == state
    old_paths = PRIOR_STATES[prior].get("ENVKIT_PATHS")
    expected_paths = "/opt/x:/opt/y" + (":/usr/old" if old_paths == "/usr/old:/opt/y" else "")
    assert parse(during) == {"ENVKIT_A": "GNU", "ENVKIT_B": TRICKY, "ENVKIT_GONE": None, "ENVKIT_PATHS": expected_paths}
    assert parse(after) == state


@pytest.mark.parametrize("shell", sorted(HOOK_SCRIPTS))
def test_conda_activate_succeeds_for_a_recipe_of_plain_settings(conda: Conda, shell: str, tmp_path: Path) -> None:
    """Settings only, none set before (the yolov8 recipe's shape): nothing in the script resets
    fish's status after a `set -e` of a variable that was not there, so the script's status, and
    conda activate's, was 4 until envkit's fish scripts ended with `true`."""
    need_shell(conda, shell)
    body = f"envkit: 1\nname: plain\nchannels: [{tiny_channel(tmp_path).as_uri()}]\npackages: [tool]\n"
    body += "threading:\n  env:\n    ENVKIT_A: GNU\n    ENVKIT_B: '2'\n"
    prefix = tmp_path / "env"
    proc = run_envkit(
        "create", str(write_recipe(tmp_path / "recipes", "plain", body)), "-p", str(prefix), "--yes", "--no-probe", env=_base_env(tmp_path)
    )
    assert proc.returncode == 0, proc.stderr
    env = conda.environ(CONDA_EXE_FOR_TEST=str(conda.exe), ENV_PREFIX=str(prefix))
    for name in NAMES:
        env.pop(name, None)
    proc = subprocess.run(
        [shell, "-c", HOOK_SCRIPTS[shell].format(dump="printenv ENVKIT_A; echo '|'")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr}"
    assert proc.stdout == "|\nGNU\n|\n|\n"


def test_conda_doctor_finds_no_altered_files_in_an_env_with_real_files(conda: Conda, wheel_channel: Path, tmp_path: Path) -> None:
    """rattler hashes a softlink's target text into sha256_in_prefix; conda doctor hashes the file
    it points to. envkit's records carry no softlink hashes, as conda's own do."""
    recipe = write_recipe(
        tmp_path / "recipes", "files", f"envkit: 1\nname: files\nchannels: [{wheel_channel.as_uri()}]\npython: '3.11'\npackages: [numpy]\n"
    )
    prefix = tmp_path / "envs" / "files"
    proc = run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe")
    assert proc.returncode == 0, proc.stderr
    assert (prefix / "bin" / "python").is_symlink()  # the softlinks this is about
    doctor = conda.ok("doctor", "-v", "-p", str(prefix))
    assert "There are no packages with altered files" in doctor, doctor

    # a sync that links a package with a softlink mends the record it writes (and reads no other)
    extra = tmp_path / "extra"
    files = [PkgFile("share/linky/real.txt", b"real\n"), PkgFile("bin/linky", link_target="../share/linky/real.txt")]
    write_tar_bz2(extra, PkgMeta("linky", "1.0", "0"), files)
    index_channel(extra)
    recipe.write_text(
        f"envkit: 1\nname: files\nchannels: [{wheel_channel.as_uri()}, {extra.as_uri()}]\npython: '3.11'\npackages: [numpy, linky]\n"
    )
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe")
    assert synced.returncode == 0, synced.stderr
    linky = json.loads(next((prefix / "conda-meta").glob("linky-1.0-0.json")).read_text())
    link = next(p for p in linky["paths_data"]["paths"] if p["_path"] == "bin/linky")
    assert link["path_type"] == "softlink" and "sha256_in_prefix" not in link
    doctor = conda.ok("doctor", "-v", "-p", str(prefix))
    assert "There are no packages with altered files" in doctor, doctor


def test_paths_conda_refuses_for_an_env_envkit_refuses_too(conda: Conda, replica: dict[str, Path], tmp_path: Path) -> None:
    """A ':' splits PATH at activation, conda cannot name an env whose folder holds a space or '#',
    and an env in another env goes when that one is removed. A space elsewhere in the path only
    makes conda warn."""
    outer = envkit_env(tmp_path, replica)
    recipe = tmp_path / "recipes" / "mklenv.yaml"
    mirror = f"--mirror=conda-forge={replica['conda-forge'].as_uri()}"
    for bad, said in (
        (tmp_path / "a:b", "cannot contain ':'"),
        (tmp_path / "a:b" / "c", "cannot contain ':'"),
        (tmp_path / "team env#2", "folder name cannot contain a space and '#'"),
        (outer / "inner", f"is inside the env {outer}"),
    ):
        theirs = conda.run("create", "-y", "-q", "-p", str(bad))
        assert theirs.returncode != 0 and not bad.exists(), theirs.stdout + theirs.stderr
        ours = run_envkit("create", str(recipe), "-p", str(bad), "--yes", "--no-probe", mirror)
        assert ours.returncode == 2 and said in ours.stderr and ours.stderr.count("\n") == 1, ours.stderr
        assert not bad.exists()
    # nested deeper is what conda's own layout is (ROOT/envs/NAME under the base env): allowed
    deeper = outer / "more" / "inner"
    assert conda.run("create", "-y", "-q", "-p", str(outer / "conda-made" / "inner")).returncode == 0
    ours = run_envkit("create", str(recipe), "-p", str(deeper), "--yes", "--no-probe", mirror)
    assert ours.returncode == 0, ours.stderr
    spaced = tmp_path / "my envs" / "plain"
    assert conda.run("create", "-y", "-q", "-p", str(tmp_path / "conda envs" / "plain")).returncode == 0
    assert run_envkit("create", str(recipe), "-p", str(spaced), "--yes", "--no-probe", mirror).returncode == 0


def test_env_names_are_condas_names(conda: Conda, replica: dict[str, Path], tmp_path: Path) -> None:
    """`-n` takes what conda takes (envkit refused "MyEnv" and "py3.11", saying "use letters"), and
    refuses conda's own env's names: an env at ENVS/base was made, which `conda activate base` never
    reaches."""
    recipe = write_recipe(tmp_path, "plain", 'envkit: 1\nname: plain\nchannels: [conda-forge]\npython: "3.12"\npackages: [numpy]\n')
    mirror = f"--mirror=conda-forge={replica['conda-forge'].as_uri()}"
    envs_dir = tmp_path / "envs"
    env = {**conda.environ(), "CONDA_ENVS_DIRS": str(envs_dir / "conda"), "ENVKIT_ENVS_DIR": str(envs_dir / "envkit")}
    for name in ("MyEnv", "py3.11", "café"):
        assert conda.run("create", "-y", "-q", "-n", name, env=env).returncode == 0
        made = run_envkit("create", str(recipe), "-n", name, "--yes", "--no-probe", mirror, env=env)
        assert made.returncode == 0 and (envs_dir / "envkit" / name / "conda-meta").is_dir(), made.stderr
    for name in ("base", "root"):
        theirs = conda.run("create", "-y", "-q", "-n", name, env=env)
        assert theirs.returncode != 0 and "reserved environment name" in theirs.stdout + theirs.stderr
        ours = run_envkit("create", str(recipe), "-n", name, "--yes", "--no-probe", mirror, env=env)
        assert ours.returncode == 2 and f"'{name}' is the name of conda's own (base) env" in ours.stderr, ours.stderr
        assert not (envs_dir / "envkit" / name).exists()
    dots = run_envkit("create", str(recipe), "-n", "..", "--yes", "--no-probe", mirror, env=env)  # conda makes that one in ENVS/..
    assert dots.returncode == 2 and "names a folder, not an env" in dots.stderr


def test_a_path_that_is_not_utf8_is_refused_before_anything_is_made(conda: Conda, replica: dict[str, Path], tmp_path: Path) -> None:
    """A folder named in Latin-1 ('café' as one byte 0xe9): conda solves, downloads, then fails its
    transaction on the path and rolls back; rattler refuses to link there. envkit says so first."""
    recipe = write_recipe(tmp_path, "plain", 'envkit: 1\nname: plain\nchannels: [conda-forge]\npython: "3.12"\npackages: [numpy]\n')
    mirror = f"--mirror=conda-forge={replica['conda-forge'].as_uri()}"
    theirs = os.fsdecode(bytes(tmp_path) + b"/conda-caf\xe9/env")
    assert conda.run("create", "-y", "-q", "-p", theirs, "python").returncode != 0
    ours = os.fsdecode(bytes(tmp_path) + b"/envkit-caf\xe9/env")
    made = run_envkit("create", str(recipe), "-p", ours, "--yes", "--no-probe", mirror)
    assert made.returncode == 2 and made.stderr.count("\n") == 1 and "an env's path must be UTF-8 text" in made.stderr, made.stderr
    assert not Path(ours).parent.exists()


def test_a_path_with_a_line_break_is_refused_before_anything_is_made(conda: Conda, replica: dict[str, Path], tmp_path: Path) -> None:
    """environments.txt holds one path a line. conda makes an env at 'team\\nenv' and writes its
    path there as two lines, after which `conda env list` shows it no more. envkit wrote it so too;
    it now refuses such a path, and the registry is untouched."""
    theirs = tmp_path / "conda\nenv"
    conda.ok("create", "-y", "-q", "-p", str(theirs))
    listed = json.loads(conda.ok("env", "list", "--json"))["envs"]
    assert (theirs / "conda-meta").is_dir() and str(theirs) not in listed

    registry = Path.home() / ".conda" / "environments.txt"
    before = registry.read_bytes()
    recipe = write_recipe(tmp_path, "plain", 'envkit: 1\nname: plain\nchannels: [conda-forge]\npython: "3.12"\npackages: [numpy]\n')
    mirror = f"--mirror=conda-forge={replica['conda-forge'].as_uri()}"
    for bad, made_first in ((tmp_path / "team\nenv", tmp_path / "team\nenv"), (tmp_path / "team\renv" / "inner", tmp_path / "team\renv")):
        made = run_envkit("create", str(recipe), "-p", str(bad), "--yes", "--no-probe", mirror)
        assert made.returncode == 2 and made.stderr.count("\n") == 1, made.stderr
        assert f"{str(bad)!r}: an env's path cannot contain a line break" in made.stderr
        assert not made_first.exists()
    assert registry.read_bytes() == before


def test_a_conda_env_var_envkit_replaces_is_found_and_its_fix_works(conda: Conda, replica: dict[str, Path], tmp_path: Path) -> None:
    """`conda env config vars set MKL_THREADING_LAYER=INTEL` on an envkit env: conda applies it before
    the activate.d scripts, so processes get envkit's GNU, and conda's own export says GNU too (the
    plugin hands conda's exporter the value activation ends with)."""
    prefix = envkit_env(tmp_path, replica)
    conda.ok("env", "config", "vars", "set", "-p", str(prefix), "MKL_THREADING_LAYER=INTEL")
    show = 'printf "%s\\n" "$MKL_THREADING_LAYER"'
    assert conda.ok("run", "-p", str(prefix), "sh", "-c", show).strip() == "GNU"
    script = f'eval "$("$CONDA_EXE_FOR_TEST" shell.bash hook)"; conda activate "$ENV_PREFIX"; {show}'
    env = conda.environ(CONDA_EXE_FOR_TEST=str(conda.exe), ENV_PREFIX=str(prefix))
    activated = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert activated.stdout.strip() == "GNU", activated.stderr
    assert "MKL_THREADING_LAYER: GNU" in conda.ok("env", "export", "-p", str(prefix))

    audit = json.loads(run_envkit("audit", "-p", str(prefix), "--json").stdout)
    [found] = [f for f in audit["data"]["audits"][0]["findings"] if f["rule_id"] == "EK033"]
    assert found["severity"] == "warning"
    assert (
        found["evidence"]
        == "conda's MKL_THREADING_LAYER=INTEL (conda env config vars) gives way to envkit's MKL_THREADING_LAYER=GNU at activation"
    )
    command = f"conda env config vars unset MKL_THREADING_LAYER -p {prefix}"
    assert command in found["fix"]
    conda.ok(*command.split()[1:])  # the fix, as it says
    audit = json.loads(run_envkit("audit", "-p", str(prefix), "--json").stdout)
    assert "EK033" not in {f["rule_id"] for f in audit["data"]["audits"][0]["findings"]}
    assert conda.ok("run", "-p", str(prefix), "sh", "-c", show).strip() == "GNU"
    assert "MKL_THREADING_LAYER: GNU" in conda.ok("env", "export", "-p", str(prefix))  # envkit's own, through the plugin
    assert json.loads((prefix / "conda-meta" / "state").read_text())["env_vars"] == {"MKL_THREADING_LAYER": "***unset***"}  # conda's own


def test_a_script_conda_runs_after_envkits_has_the_last_word_and_the_audit_says_so(
    conda: Conda, replica: dict[str, Path], tmp_path: Path
) -> None:
    """conda runs activate.d scripts in name order: one sorted after envkit-RECIPE.sh that exports
    MKL_THREADING_LAYER=INTEL wins (the audit took envkit's GNU for granted); one sorted before it
    does not."""
    prefix = envkit_env(tmp_path, replica)
    scripts = prefix / "etc" / "conda" / "activate.d"
    show = 'printf "%s\\n" "$MKL_THREADING_LAYER"'

    def audit() -> list[dict[str, str]]:
        doc = json.loads(run_envkit("audit", "-p", str(prefix), "--json").stdout)
        return [f for f in doc["data"]["audits"][0]["findings"] if f["rule_id"] == "EK034"]

    (scripts / "00-early.sh").write_text("export MKL_THREADING_LAYER=INTEL\n")
    assert conda.ok("run", "-p", str(prefix), "sh", "-c", show).strip() == "GNU"
    assert audit() == []
    (scripts / "zz-vendor.sh").write_text("export MKL_THREADING_LAYER=INTEL\n")
    assert conda.ok("run", "-p", str(prefix), "sh", "-c", show).strip() == "INTEL"
    assert run_envkit("run", "-p", str(prefix), "--", "sh", "-c", show).stdout.strip() == "INTEL"
    [found] = audit()
    assert found["severity"] == "error" and found["evidence"] == (
        "etc/conda/activate.d/zz-vendor.sh sets MKL_THREADING_LAYER=INTEL after envkit's MKL_THREADING_LAYER=GNU"
        " (conda runs activate.d scripts in name order)"
    )
    shown = json.loads(run_envkit("toolchain", "-p", str(prefix), "--json").stdout)["data"]
    assert ["MKL_THREADING_LAYER", "INTEL", "etc/conda/activate.d/zz-vendor.sh"] in shown["activation"], shown["activation"]


STACKED = (
    'eval "$("$CONDA_EXE_FOR_TEST" shell.bash hook)"; conda activate "$OUTER" || exit 97; conda activate --stack "$INNER" || exit 97; '
    'conda deactivate || exit 98; echo "${ENVKIT_EXTRA-unset} ${MKL_THREADING_LAYER-unset}"; '
    'conda deactivate || exit 98; echo "${ENVKIT_EXTRA-unset} ${MKL_THREADING_LAYER-unset}"'
)


def _stacked(conda: Conda, outer: Path, inner: Path) -> list[str]:
    """ENVKIT_EXTRA and MKL_THREADING_LAYER in `outer` once `inner`, stacked on it, is deactivated;
    then once both are. ENVKIT_EXTRA was 'mine' before, MKL_THREADING_LAYER not set."""
    env = conda.environ(CONDA_EXE_FOR_TEST=str(conda.exe), OUTER=str(outer), INNER=str(inner), ENVKIT_EXTRA="mine")
    env.pop("MKL_THREADING_LAYER", None)
    proc = subprocess.run(["bash", "-c", STACKED], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr}"
    return proc.stdout.splitlines()


def test_a_sync_that_changes_a_clone_gives_its_activation_a_tag_of_its_own(conda: Conda, replica: dict[str, Path], tmp_path: Path) -> None:
    """conda create --clone copies envkit's scripts as they are, with the tag their saved state is
    kept under. Stacked on its original with a setting of its own, a clone sharing it found the
    original's saved state there, saved nothing, and its deactivate unset the variable it had
    replaced: the user's value was lost for the rest of the shell."""
    prefix = envkit_env(tmp_path, replica)
    clone = tmp_path / "envs" / "clone"
    conda.ok("create", "-y", "-q", "--offline", "--clone", str(prefix), "-p", str(clone))
    assert record_json(clone)["activation"]["tag"] == prefix_tag(prefix)  # what conda copied
    assert _stacked(conda, prefix, clone) == ["mine GNU", "mine unset"]  # same settings: conda's reactivation covers it
    recipe = Path(record_json(clone)["recipe"]["path"])
    recipe.write_text(recipe.read_text() + "threading:\n  env:\n    ENVKIT_EXTRA: '1'\n")
    synced = run_envkit("sync", "-p", str(clone), "--yes", "--no-probe")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert _stacked(conda, prefix, clone) == ["mine GNU", "mine unset"]
    assert record_json(clone)["activation"]["tag"] == prefix_tag(clone)
    assert record_json(prefix)["activation"]["tag"] == prefix_tag(prefix)
    assert run_envkit("audit", "-p", str(clone), "--min-severity", "warning").returncode == 0
    # an env moved with conda rename shares its tag with nobody: a sync keeps it (a shell where it is
    # active still deactivates it)
    renamed = tmp_path / "envs" / "renamed"
    conda.ok("rename", "-p", str(clone), str(renamed))
    recipe.write_text(recipe.read_text().replace("ENVKIT_EXTRA: '1'", "ENVKIT_EXTRA: '2'"))
    assert run_envkit("sync", "-p", str(renamed), "--yes", "--no-probe").returncode == 0
    assert record_json(renamed)["activation"]["tag"] == prefix_tag(clone)


def test_conda_moving_the_python_of_an_envkit_env_is_named_and_the_fix_moves_the_startup_files(conda: Conda, tmp_path: Path) -> None:
    """`conda install python=3.12` in an env envkit made with 3.11: conda links the new python and
    leaves envkit's startup files in lib/python3.11, which nothing reads any more, so the new python
    started without activation has no settings. The audit says where the files are, and its fix
    writes them for the new python and takes the old folder away."""
    import sys

    from tests.support.pipchannel import two_pythons_pip_channel

    channel, _, other = two_pythons_pip_channel(tmp_path)
    host = f"{sys.version_info[0]}.{sys.version_info[1]}"
    recipe = write_recipe(
        tmp_path / "recipes",
        "moves",
        f'envkit: 1\nname: moves\nchannels: [{channel.as_uri()}]\npython: "{host}"\npackages: [python]\n'
        "threading: {mkl_threading_layer: gnu}\n",
    )
    prefix = tmp_path / "envs" / "moves"
    made = run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe")
    assert made.returncode == 0, made.stderr
    conda.ok("install", "-y", "-q", "--offline", "-p", str(prefix), "--override-channels", "-c", channel.as_uri(), f"python={other}")
    show = "import os, sys; print(sys.version_info[:2], os.environ.get('MKL_THREADING_LAYER'))"
    bare = {k: v for k, v in os.environ.items() if not k.startswith(("CONDA_", "MKL_"))}
    major, minor = other.split(".")
    lost = subprocess.run([str(prefix / "bin" / "python"), "-c", show], capture_output=True, text=True, env=bare, check=False)
    assert lost.stdout == f"({major}, {minor}) None\n", lost.stderr
    audited = run_envkit("audit", "-p", str(prefix), "--json")
    evidence = [f["evidence"] for a in json.loads(audited.stdout)["data"]["audits"] for f in a["findings"] if f["rule_id"] == "EK031"]
    assert (
        f"lib/python{other}/site-packages/_envkit_settings.pth is not there: the env's python moved, and the file is in "
        f"lib/python{host}/site-packages, which it no longer reads"
    ) in evidence, audited.stdout
    fixed = run_envkit("audit", "-p", str(prefix), "--fix", "--yes")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    back = subprocess.run([str(prefix / "bin" / "python"), "-c", show], capture_output=True, text=True, env=bare, check=False)
    assert back.stdout == f"({major}, {minor}) GNU\n", back.stderr
    assert not (prefix / "lib" / f"python{host}").exists()
    conda.ok("doctor", "-p", str(prefix))


def test_conda_knows_when_an_envkit_env_was_made(conda: Conda, tmp_path: Path) -> None:
    """conda 25.11+ gives each env's creation time (`conda env list --json`'s envs_details), read on
    Linux from conda-meta/created_at, which conda writes with a new env's first history: envkit's
    envs had none, and showed `created: null` beside conda's own."""
    from datetime import datetime

    channel = tiny_channel(tmp_path)
    envs = tmp_path / "envs"
    before = datetime.now().astimezone()
    made = run_envkit(
        "create",
        str(write_recipe(tmp_path, "tiny", f"envkit: 1\nname: tiny\nchannels: [{channel.as_uri()}]\npackages: [tool]\n")),
        "-p",
        str(envs / "ek"),
        "--yes",
        "--no-probe",
    )
    assert made.returncode == 0, made.stderr
    conda.create(envs / "cd", [channel], ["tool"])
    after = datetime.now().astimezone()
    details = json.loads(conda.ok("env", "list", "--json", env=conda.environ(CONDA_ENVS_DIRS=str(envs))))["envs_details"]
    for name in ("ek", "cd"):
        created = details[str(envs / name)]["created"]
        assert created is not None, (name, details[str(envs / name)])
        assert before.timestamp() - 1 <= datetime.fromisoformat(created).timestamp() <= after.timestamp() + 1
