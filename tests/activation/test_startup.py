"""The startup files: a python started without activation (a job script's `srun ENV/bin/python`,
a console script, a shebang, an IDE) gets the env's settings, as real interpreters start it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envkit.activation.startup import MODULE, NAMES
from tests.conftest import payload_recipe, python_env, run_envkit, write_recipe
from tests.support.records import record_json
from tests.support.seed import SEED_SCENARIO
from tests.support.wheelchannel import PY_VER

SITE = f"lib/python{PY_VER}/site-packages"
SHOW = "import os, sys; print(os.environ.get(sys.argv[1], '<unset>'))"


def _run(prefix: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """The env's python started directly, as a job script or a shebang starts it: no activation."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONDA_", "_ENVKIT_")) and k != "PYTHONDONTWRITEBYTECODE"}
    return subprocess.run(
        [str(prefix / "bin" / "python"), *args], capture_output=True, text=True, env={**env, **extra}, timeout=300, check=False
    )


def _findings(prefix: Path) -> dict[str, str]:
    """Rule id -> its findings' evidence, from the audit's JSON; an error finding makes the audit exit 1."""
    proc = run_envkit("audit", "-p", str(prefix), "--json")
    (audit,) = json.loads(proc.stdout)["data"]["audits"]
    found: dict[str, str] = {}
    for f in audit["findings"]:  # one finding per evidence line
        found[f["rule_id"]] = found.get(f["rule_id"], "") + f["evidence"] + "\n"
    assert proc.returncode == (1 if any(f["severity"] == "error" for f in audit["findings"]) else 0), proc.stdout
    return found


def _unactivated(prefix: Path, **shell: str) -> tuple[str, str]:
    """The probe's `unactivated` check: its status and the first part of its evidence."""
    proc = run_envkit("probe", "-p", str(prefix), "--json", env={**os.environ, **shell})
    (check,) = [c for c in json.loads(proc.stdout)["data"]["checks"] if c["id"] == "unactivated"]
    return check["status"], check["evidence"].split(": a job script")[0]


def _as_an_older_envkit_left_it(prefix: Path) -> None:
    """An env made before envkit wrote startup files: the same scripts, and a record (scripts
    format 3) that names them alone."""
    for name in NAMES:
        (prefix / SITE / name).unlink()
    for pyc in (prefix / SITE / "__pycache__").glob(f"{MODULE}.*.pyc"):
        pyc.unlink()
    path = prefix / "etc" / "envkit" / "record.json"
    record = json.loads(path.read_text())
    activation = record["activation"]
    activation["files"] = [f for f in activation["files"] if not f.startswith(SITE)]
    activation["sha256"] = {f: d for f, d in activation["sha256"].items() if not f.startswith(SITE)}
    activation["format"] = 3
    path.write_text(json.dumps(record, indent=2))


def test_the_seed_crash_comes_back_where_the_env_s_python_runs_without_activation_until_the_startup_files_are_there(
    tmp_path: Path, wheel_channel: Path, session_pkgs: Path
) -> None:
    """A multi-GPU train started by `srun ENV/bin/python train.py`, or by ENV/bin/yolo, runs no
    activation: in an env whose activation sets MKL_THREADING_LAYER=GNU, the DDP-style child still
    died. An env made now starts right; one an older envkit made is named by the audit (EK031) and
    mended by its fix."""
    recipe = payload_recipe(tmp_path / "recipes", wheel_channel, name="direct")
    prefix = tmp_path / "env"
    made = run_envkit(
        "create", str(recipe), "-p", str(prefix), "--yes", "--no-probe", env={**os.environ, "ENVKIT_PKGS_DIR": str(session_pkgs)}
    )
    assert made.returncode == 0, made.stderr
    assert "site-packages/_envkit_settings" in made.stdout  # the plan says where the settings go
    fresh = _run(prefix, "-c", SEED_SCENARIO)
    assert fresh.returncode == 0 and json.loads(fresh.stdout)["rc"] == 0, fresh.stdout + fresh.stderr

    _as_an_older_envkit_left_it(prefix)
    crashed = json.loads(_run(prefix, "-c", SEED_SCENARIO).stdout)
    assert crashed["rc"] != 0 and "MKL_THREADING_LAYER=INTEL is incompatible with libgomp" in crashed["stderr"], crashed
    found = _findings(prefix)
    assert f"{SITE}/{MODULE}.pth is not there: this envkit writes it too" in found["EK031"], found
    assert "EK014" not in found  # nothing the record names is missing or edited

    fixed = run_envkit("audit", "-p", str(prefix), "--fix", "--yes")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    ran = _run(prefix, "-c", SEED_SCENARIO)
    assert ran.returncode == 0 and json.loads(ran.stdout)["rc"] == 0, ran.stdout + ran.stderr
    assert not {"EK014", "EK031"} & set(_findings(prefix))


ODD = 'it\'s "100%" $HOME `x` \\ é\nsecond line'


def test_each_value_arrives_exact_and_one_the_process_has_wins(tmp_path: Path) -> None:
    """A value given to the process (a job script's export, another env's activation) is kept, as
    when nothing activated the env; a missing one is set byte for byte; `python -S` (no site) gets
    nothing; the PEP 829 entry point, resolved as Python 3.15's site resolves it, does the same as
    the .pth line."""
    _, prefix = python_env(tmp_path, "direct", f"{{mkl_threading_layer: gnu, env: {{ODD_VALUE: {json.dumps(ODD)}}}}}")
    assert sorted(p.name for p in (prefix / SITE).glob(f"{MODULE}.*")) == sorted(NAMES)
    assert _run(prefix, "-c", SHOW, "MKL_THREADING_LAYER").stdout == "GNU\n"
    assert _run(prefix, "-c", SHOW, "ODD_VALUE").stdout == ODD + "\n"
    # under an ASCII locale (Python 3.11 reads .pth files in it, os.environ encodes in it) the
    # process gets the value's UTF-8 bytes, as from the shell scripts; a UTF-8 `é` in the file made
    # site skip it, and an `é` in a str cannot go into os.environ there (the line failed midway)
    plain = {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    as_bytes = "import os, sys; sys.stdout.buffer.write(os.environb[b'ODD_VALUE'] + b'|' + os.environb[b'MKL_THREADING_LAYER'])"
    assert _run(prefix, "-c", as_bytes, **plain).stdout.encode("utf-8", "surrogateescape") == ODD.encode() + b"|GNU"
    shell = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import subprocess; subprocess.run(['sh', '-c', 'printf %s \"$ODD_VALUE\"'])"],
        capture_output=True,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("CONDA_")}, **plain},
        check=False,
    )
    assert shell.stdout == ODD.encode()  # and so do the processes it starts
    assert _unactivated(prefix, **plain)[0] == "pass"  # the probe's check compares those bytes
    assert _run(prefix, "-c", SHOW, "MKL_THREADING_LAYER", MKL_THREADING_LAYER="INTEL").stdout == "INTEL\n"
    assert _run(prefix, "-c", SHOW, "MKL_THREADING_LAYER", MKL_THREADING_LAYER="").stdout == "\n"
    assert _run(prefix, "-S", "-c", SHOW, "MKL_THREADING_LAYER").stdout == "<unset>\n"
    entry = [line for line in (prefix / SITE / f"{MODULE}.start").read_text().splitlines() if line and not line.startswith("#")]
    assert entry == [f"{MODULE}:apply"]
    started = _run(
        prefix,
        "-S",
        "-c",
        "import os, pkgutil, sys; sys.path.append(sys.argv[1]); pkgutil.resolve_name(sys.argv[2])(); print(os.environ['ODD_VALUE'])",
        str(prefix / SITE),
        entry[0],
    )
    assert started.stdout == ODD + "\n", started.stderr
    children = _run(prefix, "-c", "import subprocess, sys; subprocess.run(['sh', '-c', 'echo $MKL_THREADING_LAYER'])")
    assert children.stdout == "GNU\n"  # what the python set reaches the processes it starts, as the seed's children


def test_the_files_follow_the_settings_through_audit_fix_and_sync(tmp_path: Path) -> None:
    """One deleted is missing (EK014, an error) and one edited differs; the fix writes both back.
    A sync that changes a value rewrites the module, and one that leaves nothing to set takes the
    files out, with the bytecode Python wrote for the module."""
    recipe, prefix = python_env(tmp_path, "direct", "{mkl_threading_layer: gnu}")
    site = prefix / SITE
    assert _run(prefix, "-c", SHOW, "MKL_THREADING_LAYER").stdout == "GNU\n"
    assert not (site / "__pycache__").exists()  # the .pth line imports nothing on this Python
    assert _run(prefix, "-c", f"import {MODULE}").returncode == 0  # as a .start entry point does, bytecode and all
    assert list((site / "__pycache__").glob(f"{MODULE}.*.pyc"))
    (site / f"{MODULE}.pth").unlink()
    module = site / f"{MODULE}.py"
    module.write_text(module.read_text().replace("'GNU'", "'INTEL'"))
    drift = _findings(prefix)["EK014"]  # an error: the audit exits 1
    assert f"{SITE}/{MODULE}.pth is missing" in drift
    assert f"{SITE}/{MODULE}.py differs from what the env's record (etc/envkit/record.json) asks for" in drift
    assert _unactivated(prefix) == ("warn", "MKL_THREADING_LAYER is unset, not 'GNU'")
    fixed = run_envkit("audit", "-p", str(prefix), "--fix", "--yes")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert _run(prefix, "-c", SHOW, "MKL_THREADING_LAYER").stdout == "GNU\n"
    # the probe's check starts the python as a job would, whatever the shell envkit runs in has set
    assert _unactivated(prefix, MKL_THREADING_LAYER="INTEL") == (
        "pass",
        f"MKL_THREADING_LAYER=GNU, from the startup files (site-packages/{MODULE}.*)",
    )

    recipe.write_text(recipe.read_text().replace("{mkl_threading_layer: gnu}", "{mkl_threading_layer: sequential}"))
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe")
    assert synced.returncode == 0, synced.stderr
    assert _run(prefix, "-c", SHOW, "MKL_THREADING_LAYER").stdout == "SEQUENTIAL\n"
    record = record_json(prefix)
    assert record is not None and f"{SITE}/{MODULE}.start" in record["activation"]["files"]

    recipe.write_text(recipe.read_text().replace("{mkl_threading_layer: sequential}", "{env: {KMP_DUPLICATE_LIB_OK: {unset: true}}}"))
    emptied = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe")
    assert emptied.returncode == 0, emptied.stderr
    assert not list(site.glob(f"{MODULE}.*")) and not list((site / "__pycache__").glob(f"{MODULE}.*"))
    assert site.is_dir()  # the live site-packages stays, whatever it holds
    assert _run(prefix, "-c", SHOW, "MKL_THREADING_LAYER").stdout == "<unset>\n"
    assert not {"EK014", "EK031"} & set(_findings(prefix))


@pytest.mark.parametrize(
    ("records", "folders", "found"),
    [
        (["python-3.11.7-hab00c5b_0_cpython.json"], ["lib/python3.11/site-packages"], "lib/python3.11/site-packages"),
        # conda-forge's free-threaded build reads lib/python3.13t, beside which a 3.13 folder may sit
        (
            ["python-3.13.0-h9ebbce0_100_cp313t.json"],
            ["lib/python3.13/site-packages", "lib/python3.13t/site-packages"],
            "lib/python3.13t/site-packages",
        ),
        (["python-3.12.4-h889d299_0_cpython.json"], ["Lib/site-packages"], "Lib/site-packages"),  # a win-64 layout
        (["python-dateutil-2.9.0-pyhd8ed1ab_0.json", "numpy-2.1.0-py312_0.json"], ["lib/python3.12/site-packages"], None),
        (["python-3.12.4-h889d299_0_cpython.json"], [], None),  # its folder is gone: nothing to write into
    ],
)
def test_the_site_packages_is_the_one_the_env_s_python_reads(
    tmp_path: Path, records: list[str], folders: list[str], found: str | None
) -> None:
    from envkit.activation.startup import site_dir

    (tmp_path / "conda-meta").mkdir()
    for name in records:
        (tmp_path / "conda-meta" / name).write_text("{}")
    for folder in folders:
        (tmp_path / folder).mkdir(parents=True)
    assert site_dir(tmp_path) == (tmp_path / found if found else None)


def test_a_sync_of_an_env_an_older_envkit_made_writes_the_startup_files_and_names_them(tmp_path: Path) -> None:
    _, prefix = python_env(tmp_path, "direct", "{mkl_threading_layer: gnu}")
    _as_an_older_envkit_left_it(prefix)
    assert _run(prefix, "-c", SHOW, "MKL_THREADING_LAYER").stdout == "<unset>\n"
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe")
    assert synced.returncode == 0, synced.stderr
    written = ", ".join(f"{SITE}/{name}" for name in NAMES)
    assert (
        f"wrote 3 activation file(s) anew from its recorded settings (they were not as this envkit writes them): {written}" in synced.stdout
    )
    assert _run(prefix, "-c", SHOW, "MKL_THREADING_LAYER").stdout == "GNU\n"
    assert "nothing to do" in run_envkit("sync", "-p", str(prefix)).stdout


def test_a_threading_value_from_another_activate_script_is_carried_until_envkit_sets_it(tmp_path: Path) -> None:
    """The conda docs' way: an etc/conda/activate.d/env_vars.sh of one's own, beside envkit's. Its
    threading value reaches an activated python only (EK037); the fix carries it, a project's own
    variable stays the script's, a sync keeps what is carried, and once the recipe sets the same
    variable envkit's script wins at activation and its value is the one the files give."""
    recipe, prefix = python_env(tmp_path, "direct", "{mkl_threading_layer: gnu}")
    own = prefix / "etc" / "conda" / "activate.d" / "env_vars.sh"  # sourced before envkit-direct.sh
    own.write_text("export OMP_NUM_THREADS=4\nexport WANDB_PROJECT=yolo\n")
    assert _findings(prefix)["EK037"] == (
        "OMP_NUM_THREADS=4 is set by etc/conda/activate.d/env_vars.sh at activation only: a python started without activation "
        "(a job script's `srun ENV/bin/python`, a console script, a kernel) does not get it\n"
    )
    assert _unactivated(prefix) == ("warn", "OMP_NUM_THREADS is unset, not '4'")  # the probe sources the scripts as conda does
    assert run_envkit("audit", "-p", str(prefix), "--fix", "--yes").returncode == 0
    assert _unactivated(prefix)[0] == "pass"
    assert _run(prefix, "-c", SHOW, "OMP_NUM_THREADS").stdout == "4\n"
    assert _run(prefix, "-c", SHOW, "WANDB_PROJECT").stdout == "<unset>\n"
    assert _run(prefix, "-c", SHOW, "MKL_THREADING_LAYER").stdout == "GNU\n"
    assert "EK037" not in _findings(prefix)

    recipe.write_text(recipe.read_text().replace("{mkl_threading_layer: gnu}", "{mkl_threading_layer: sequential}"))
    assert run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    assert [_run(prefix, "-c", SHOW, name).stdout for name in ("MKL_THREADING_LAYER", "OMP_NUM_THREADS")] == ["SEQUENTIAL\n", "4\n"]
    assert "EK037" not in _findings(prefix)

    recipe.write_text(recipe.read_text().replace("{mkl_threading_layer: sequential}", "{mkl_threading_layer: gnu, omp_num_threads: 2}"))
    assert run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    assert _run(prefix, "-c", SHOW, "OMP_NUM_THREADS").stdout == "2\n"
    record = record_json(prefix)
    assert record is not None and "carried" not in record["activation"]
    assert not {"EK014", "EK031", "EK037"} & set(_findings(prefix))


def test_values_carried_alone_need_no_scripts_and_win_over_the_settings_in_the_files(tmp_path: Path) -> None:
    from envkit.activation.writer import render_files
    from envkit.recipe.model import EnvOp

    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "python-3.11.7-0.json").write_text("{}")
    (prefix / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    carried_only = render_files(prefix, "audit", (), carried=(("OMP_NUM_THREADS", "4"),))
    assert sorted(f.path.name for f in carried_only) == sorted(NAMES)
    both = render_files(prefix, "r", (EnvOp("OMP_NUM_THREADS", "set", value="2"),), carried=(("OMP_NUM_THREADS", "4"),))
    (pth,) = [f.text for f in both if f.path.name == f"{MODULE}.pth"]
    assert pth.splitlines()[-1] == "import os; os.environ.setdefault('OMP_NUM_THREADS', '4')"
    assert len(both) == 13  # each shell's two scripts, and the three startup files


def _plain_env(tmp_path: Path, minor: int, threading: str) -> Path:
    """An env envkit made whose python is CPython 3.`minor` and no venv (python_plain)."""
    from tests.support.condapkg import index_channel
    from tests.support.tiny import tiny_channel
    from tests.support.wheelchannel import python_plain

    channel = tiny_channel(tmp_path)
    python_plain(channel, minor)
    index_channel(channel)
    recipe = f"envkit: 1\nname: plain\nchannels: [{channel.as_uri()}]\npackages: [python, tool]\nthreading: {threading}\n"
    prefix = tmp_path / "plain"
    made = run_envkit("create", str(write_recipe(tmp_path / "r", "plain", recipe)), "-p", str(prefix), "--yes", "--no-probe")
    assert made.returncode == 0, made.stderr
    return prefix


@pytest.mark.parametrize("minor", sorted({sys.version_info[1], 12, 13}), ids=lambda m: f"3.{m}")
def test_a_python_started_without_activation_keeps_the_user_site_out_where_the_settings_say_so(tmp_path: Path, minor: int) -> None:
    """PYTHONNOUSERSITE, EK032's way out of `pip install --user` shadows, works only if it is there
    when the interpreter starts: site has put the user site on sys.path before it reads the env's
    .pth files. In an env whose python is no venv (as conda's is not), the startup files take that
    folder out again; a value the process has wins, empty included (Python reads empty as unset).
    On each CPython here whose site the ML envs run (3.12 and 3.13 from pyenv, beside the host's)."""
    prefix = _plain_env(tmp_path, minor, "{mkl_threading_layer: gnu, env: {PYTHONNOUSERSITE: '1'}}")
    site_dir = prefix / "lib" / f"python3.{minor}" / "site-packages"
    assert sorted(p.name for p in site_dir.glob(f"{MODULE}.*")) == sorted(NAMES)
    assert _run(prefix, "-c", SHOW, "MKL_THREADING_LAYER").stdout == "GNU\n"
    user_site = tmp_path / "userbase" / "lib" / f"python3.{minor}" / "site-packages"
    user_site.mkdir(parents=True)
    (user_site / "threadpoolctl.py").write_text("WHERE = 'user site'\n")  # `pip install --user threadpoolctl`
    probe = (
        "import importlib.util, site, sys; spec = importlib.util.find_spec('threadpoolctl'); "
        "print(sys.prefix == sys.argv[1], site.ENABLE_USER_SITE, spec.origin if spec else None)"
    )
    base = {"PYTHONUSERBASE": str(tmp_path / "userbase")}
    assert _run(prefix, "-c", probe, str(prefix), **base).stdout == "True False None\n"
    assert _run(prefix, "-c", SHOW, "PYTHONNOUSERSITE", **base).stdout == "1\n"
    kept = _run(prefix, "-c", probe, str(prefix), **base, PYTHONNOUSERSITE="")
    assert kept.stdout == f"True True {user_site / 'threadpoolctl.py'}\n", kept.stderr
    # the module, which the Pythons that read .start files (3.15 on) call in the line's place, from
    # the state site leaves before it reads the env's site-packages (no 3.15 runs here)
    started = _run(
        prefix,
        "-S",
        "-c",
        "import site, sys; site.ENABLE_USER_SITE = True; sys.path.insert(0, site.getusersitepackages()); "
        "sys.path.append(sys.argv[1]); import _envkit_settings; _envkit_settings.apply(); "
        "print(site.ENABLE_USER_SITE, site.USER_SITE in sys.path)",
        str(site_dir),
        **base,
    )
    assert started.stdout == "False False\n", started.stderr


@pytest.mark.parametrize("minor", [12, 13], ids=lambda m: f"3.{m}")
def test_each_value_arrives_exact_on_the_newer_pythons_too(tmp_path: Path, minor: int) -> None:
    """3.13 reads .pth files as UTF-8 first, 3.12 and 3.11 in the locale's encoding: the ASCII text
    gives the same bytes under a UTF-8 and an ASCII locale on each, and `-S` gets nothing."""
    prefix = _plain_env(tmp_path, minor, f"{{mkl_threading_layer: gnu, env: {{ODD_VALUE: {json.dumps(ODD)}}}}}")
    as_bytes = "import os, sys; sys.stdout.buffer.write(os.environb[b'ODD_VALUE'] + b'|' + os.environb[b'MKL_THREADING_LAYER'])"
    plain = {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    for locale in ({}, plain):
        got = _run(prefix, "-c", as_bytes, **locale)
        assert got.stdout.encode("utf-8", "surrogateescape") == ODD.encode() + b"|GNU", (locale, got.stderr)
    assert _run(prefix, "-c", "import sys; print(sys.version_info[:2])").stdout == f"(3, {minor})\n"
    assert _run(prefix, "-S", "-c", SHOW, "MKL_THREADING_LAYER").stdout == "<unset>\n"
    assert _run(prefix, "-c", SHOW, "MKL_THREADING_LAYER", MKL_THREADING_LAYER="INTEL").stdout == "INTEL\n"


def test_a_packages_env_vars_are_carried_and_what_envkit_unsets_is_not_expected(tmp_path: Path) -> None:
    """A package's etc/conda/env_vars.d values are set by conda's activation alone, before envkit's
    script, which unsets one of them here: the audit and the probe ask the startup files for the
    other (EK037) and not for the one activation takes out."""
    from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_tar_bz2
    from tests.support.tiny import tiny_channel
    from tests.support.wheelchannel import python_shim

    channel = tiny_channel(tmp_path)
    python_shim(channel)
    shipped = json.dumps({"KMP_DUPLICATE_LIB_OK": "TRUE", "OMP_NUM_THREADS": "3"}).encode()
    write_tar_bz2(channel, PkgMeta("shipsvars", "1.0", "0"), [PkgFile("etc/conda/env_vars.d/shipsvars.json", shipped)])
    index_channel(channel)
    threading = "{mkl_threading_layer: gnu, env: {KMP_DUPLICATE_LIB_OK: {unset: true}}}"
    body = f"envkit: 1\nname: ships\nchannels: [{channel.as_uri()}]\npackages: [python, tool, shipsvars]\nthreading: {threading}\n"
    prefix = tmp_path / "ships"
    made = run_envkit("create", str(write_recipe(tmp_path / "r", "ships", body)), "-p", str(prefix), "--yes", "--no-probe")
    assert made.returncode == 0, made.stderr
    assert _findings(prefix)["EK037"].startswith("OMP_NUM_THREADS=3 is set by etc/conda/env_vars.d/shipsvars.json at activation only")
    assert _unactivated(prefix) == ("warn", "OMP_NUM_THREADS is unset, not '3'")
    assert run_envkit("audit", "-p", str(prefix), "--fix", "--yes").returncode == 0
    assert [_run(prefix, "-c", SHOW, name).stdout for name in ("OMP_NUM_THREADS", "KMP_DUPLICATE_LIB_OK")] == ["3\n", "<unset>\n"]
    assert _unactivated(prefix)[0] == "pass" and "EK037" not in _findings(prefix)
