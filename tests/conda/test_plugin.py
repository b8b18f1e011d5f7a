"""envkit as a conda plugin, through the real conda (tools/test.sh installs envkit into it with
`pip install -e .`): `conda envkit`, the `conda doctor` check and its fixer, the guard after each
solve, `conda env export --format envkit-recipe`, and conda unchanged where envkit has no business."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_envkit
from tests.support.conda import Conda
from tests.support.condapkg import index_channel
from tests.support.pipchannel import editable_project, offline_pip_env, pip_channel
from tests.support.tiny import tiny_channel
from tests.support.wheelchannel import python_shim


@pytest.fixture
def plugged(conda: Conda) -> Conda:
    proc = subprocess.run(
        [str(conda.exe.parent / "python"), "-c", "import envkit.conda.plugin"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        pytest.fail(f"envkit is not installed in the test conda (tools/test.sh runs its pip install -e .): {proc.stderr.strip()}")
    return conda


def seed_env(conda: Conda, wheel_channel: Path, prefix: Path, *specs: str) -> Path:
    """The seed users' env as conda makes it, minus what the caller adds later."""
    return conda.create(prefix, [wheel_channel], ["python=3.11", "pytorch=2.13.0", "numpy", *specs])


def test_subcommand_runs_envkit_with_conda_settings(plugged: Conda, replica: dict[str, Path], tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / ".condarc").write_text(
        f"custom_channels:\n  conda-forge: {replica['conda-forge'].parent.as_uri()}\nenvs_dirs: [{tmp_path / 'team-envs'}]\n"
    )
    env = plugged.environ(HOME=str(home))
    env.pop("ENVKIT_ENVS_DIR")  # envkit's own variable would win over conda's envs_dirs
    version = plugged.run("envkit", "--version", env=env)
    assert version.returncode == 0 and version.stdout.startswith("envkit ")
    proc = plugged.run("envkit", "create", "pytorch-cpu-openblas", "--dry-run", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)["data"]["plan"]
    assert plan["channels"] == [{"name": "conda-forge", "url": replica["conda-forge"].as_uri(), "via": "conda's custom_channels"}]
    assert plan["prefix"] == str(tmp_path / "team-envs" / "pytorch-cpu-openblas")  # conda's envs_dirs
    bad = plugged.run("envkit", "create", "no-such-recipe", env=env)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_doctor_names_ek001_on_the_seed_env_and_fixes_it(plugged: Conda, wheel_channel: Path, tmp_path: Path, isolated: Path) -> None:
    """The fix reaches the env's notebook kernel too (a kernelspec as `ipykernel install --user`
    writes it): Jupyter starts it without activation."""
    prefix = seed_env(plugged, wheel_channel, tmp_path / "seed", "mkl-service")
    kernel = isolated / ".local" / "share" / "jupyter" / "kernels" / "seed" / "kernel.json"
    kernel.parent.mkdir(parents=True)
    kernel.write_text(
        json.dumps({"argv": [str(prefix / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"]}, indent=1)
    )
    report = plugged.run("doctor", "-p", str(prefix))
    assert report.returncode == 0, report.stderr
    assert (
        "❌ envkit found toolchain hazards" in report.stdout and "EK001 error: mkl-service with a non-Intel OpenMP runtime" in report.stdout
    )

    dry = plugged.run("doctor", "--fix", "envkit-toolchain", "--dry-run", "-p", str(prefix))
    assert "MKL_THREADING_LAYER" in dry.stdout and not (prefix / "etc" / "conda" / "activate.d").exists()
    fixed = plugged.run("doctor", "--fix", "envkit-toolchain", "--yes", "-p", str(prefix))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "wrote " in fixed.stdout
    assert json.loads(kernel.read_text())["env"] == {"MKL_THREADING_LAYER": "GNU"}
    again = plugged.run("doctor", "-p", str(prefix))
    assert "✅ No BLAS, OpenMP or threading hazards" in again.stdout
    ran = plugged.ok("run", "-p", str(prefix), "python", "-c", "import os; print(os.environ['MKL_THREADING_LAYER'])")
    assert ran.strip() == "GNU"


def test_doctor_on_a_clean_env(plugged: Conda, tmp_path: Path) -> None:
    prefix = plugged.create(tmp_path / "clean", [tiny_channel(tmp_path)], ["tool"])
    report = plugged.run("doctor", "-p", str(prefix))
    assert report.returncode == 0 and "✅ No BLAS, OpenMP or threading hazards found by envkit's audit rules." in report.stdout


def test_doctor_carries_condas_own_threading_value_to_a_python_started_without_activation(plugged: Conda, tmp_path: Path) -> None:
    """`conda env config vars set MKL_THREADING_LAYER=GNU` in conda alone: its doctor names EK037,
    and its fixer gives the value to the env's python started directly, as a job script does."""
    channel = tiny_channel(tmp_path)
    python_shim(channel)
    index_channel(channel)
    prefix = plugged.create(tmp_path / "env", [channel], ["python"])
    plugged.ok("env", "config", "vars", "set", "-p", str(prefix), "MKL_THREADING_LAYER=GNU")
    report = plugged.run("doctor", "-p", str(prefix))
    assert "EK037 warning: threading settings that only an activated python gets" in report.stdout, report.stdout
    fixed = plugged.run("doctor", "--fix", "envkit-toolchain", "--yes", "-p", str(prefix))
    assert fixed.returncode == 0 and "_envkit_settings.pth" in fixed.stdout, fixed.stdout + fixed.stderr
    bare = {k: v for k, v in os.environ.items() if not k.startswith(("CONDA_", "MKL_"))}
    show = [str(prefix / "bin" / "python"), "-c", "import os; print(os.environ.get('MKL_THREADING_LAYER'))"]
    assert subprocess.run(show, capture_output=True, text=True, env=bare, check=True).stdout == "GNU\n"
    assert "✅ No BLAS, OpenMP or threading hazards" in plugged.run("doctor", "-p", str(prefix)).stdout


def guard_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line.strip() for line in proc.stderr.splitlines() if line.strip().startswith("EK")]


def test_guard_warns_about_hazardous_installs(plugged: Conda, wheel_channel: Path, replica: dict[str, Path], tmp_path: Path) -> None:
    wc = wheel_channel.as_uri()
    # the seed crash in the making: mkl-service into a torch env with no threading layer
    torch_env = seed_env(plugged, wheel_channel, tmp_path / "torch")
    proc = plugged.run("install", "-y", "-p", str(torch_env), "--override-channels", "-c", wc, "mkl-service")
    assert proc.returncode == 0, proc.stderr
    assert [line[:5] for line in guard_lines(proc)] == ["EK001"]
    assert "envkit_guard: this change would bring toolchain errors into the env" in proc.stderr

    # mkl 2024.1 into an env of the legacy pytorch channel (undefined symbol iJIT_NotifyEvent)
    legacy = tmp_path / "legacy"
    channels = ["--override-channels", "-c", replica["pytorch"].as_uri(), "-c", replica["defaults"].as_uri()]
    plugged.ok("create", "-y", "-q", "-p", str(legacy), *channels, "python=3.12", "pytorch=2.5.1", "cpuonly", "mkl=2023.1")
    proc = plugged.run("install", "-y", "-p", str(legacy), *channels, "mkl=2024.1")
    assert proc.returncode == 0, proc.stderr
    assert any(line.startswith("EK002 error") for line in guard_lines(proc)), proc.stderr

    # conda numpy over a numpy pip put into the env (two numpys, the conda one shadowed)
    piped = plugged.create(tmp_path / "piped", [wheel_channel], ["python=3.11"])
    wheel = next((Path(os.environ["ENVKIT_TEST_CACHE"]) / "wheels").glob("numpy-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--prefix", str(piped), str(wheel)], check=True)
    proc = plugged.run("install", "-y", "-p", str(piped), "--override-channels", "-c", wc, "numpy")
    assert proc.returncode == 0, proc.stderr
    assert any(line.startswith("EK006 error") for line in guard_lines(proc)), proc.stderr

    # a clean change says nothing
    clean = plugged.run("install", "-y", "-p", str(torch_env), "--override-channels", "-c", wc, "threadpoolctl")
    assert clean.returncode == 0 and "envkit_guard" not in clean.stderr


def test_guard_refuses_when_told_and_can_be_off(plugged: Conda, wheel_channel: Path, tmp_path: Path) -> None:
    prefix = seed_env(plugged, wheel_channel, tmp_path / "torch")
    before = sorted(p.name for p in (prefix / "conda-meta").glob("*.json"))
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / ".condarc").write_text("plugins:\n  envkit_guard: refuse\n")
    args = ("install", "-y", "-p", str(prefix), "--override-channels", "-c", wheel_channel.as_uri(), "mkl-service")
    refused = plugged.run(*args, env=plugged.environ(HOME=str(home)))
    assert refused.returncode != 0 and "envkit_guard refused the transaction" in refused.stderr
    assert sorted(p.name for p in (prefix / "conda-meta").glob("*.json")) == before
    off = plugged.run(*args, env=plugged.environ(HOME=str(home), CONDA_PLUGINS_ENVKIT_GUARD="off"))
    assert off.returncode == 0 and "envkit_guard" not in off.stderr
    typo = plugged.run("config", "--show", env=plugged.environ(HOME=str(home), CONDA_PLUGINS_ENVKIT_GUARD="loud"))
    assert typo.returncode != 0 and "envkit_guard must be one of warn, refuse, off" in typo.stderr


def test_exported_recipe_recreates_the_env_and_passes_the_probe(plugged: Conda, wheel_channel: Path, tmp_path: Path) -> None:
    prefix = seed_env(plugged, wheel_channel, tmp_path / "handmade", "mkl-service")
    text = plugged.ok("env", "export", "-p", str(prefix), "--format", "envkit-recipe")
    recipe = tmp_path / "recipes" / "handmade.yaml"
    recipe.parent.mkdir()
    recipe.write_text(text)
    assert "mkl_threading_layer: auto" in text and '"pytorch ==2.13.0"' in text and 'python: "3.11"' in text
    made = run_envkit("create", str(recipe), "-p", str(tmp_path / "from-recipe"), "--yes", "--json", timeout=900)
    doc = json.loads(made.stdout)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr
    assert doc["data"]["probe"]["status"] != "fail"
    checks = {c["id"]: c["status"] for c in doc["data"]["probe"]["checks"]}
    assert checks["ddp-seed"] == "pass"


def test_exported_recipe_carries_the_pip_wheels_and_names_an_editable_install(plugged: Conda, tmp_path: Path) -> None:
    """conda's own environment.yml keeps a pip section; the recipe export did not, so an env whose
    threadpoolctl came from pip lost it on the way to a team recipe."""
    channel, links = pip_channel(tmp_path)
    prefix = plugged.create(tmp_path / "handmade", [channel], ["python=3.11", "pip"])
    env = offline_pip_env(dict(os.environ), links)
    python = str(prefix / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "threadpoolctl"], env=env, check=True)
    project = editable_project(tmp_path / "myproj", "myproj")
    subprocess.run([python, "-m", "pip", "install", "-q", "-e", str(project)], env=env, check=True)
    text = plugged.ok("env", "export", "-p", str(prefix), "--format", "envkit-recipe")
    assert 'pip:\n  - "threadpoolctl==3.8.0"\n' in text
    assert f"# left out: myproj 0.1, an editable install of {project.as_uri()}: pip install -e it in the new env\n" in text
    recipe = tmp_path / "recipes" / "handmade.yaml"
    recipe.parent.mkdir()
    recipe.write_text(text)
    made = run_envkit("create", str(recipe), "-p", str(tmp_path / "from-recipe"), "--yes", "--no-probe", env=env)
    assert made.returncode == 0, made.stderr
    check = [str(tmp_path / "from-recipe" / "bin" / "python"), "-c", "import threadpoolctl"]
    assert subprocess.run(check, env=env, check=False).returncode == 0


def test_conda_is_unchanged_where_envkit_has_no_business(plugged: Conda, tmp_path: Path) -> None:
    channel = tiny_channel(tmp_path)
    with_plugin = plugged.run("create", "-y", "-p", str(tmp_path / "a"), "--override-channels", "-c", channel.as_uri(), "tool")
    assert with_plugin.returncode == 0 and "envkit" not in with_plugin.stdout + with_plugin.stderr
    listed = plugged.ok("list", "-p", str(tmp_path / "a"))
    without = plugged.ok("--no-plugins", "list", "-p", str(tmp_path / "a"))
    assert listed == without


def test_conda_works_when_envkit_cannot_load(plugged: Conda, tmp_path: Path) -> None:
    """An envkit that cannot be imported leaves conda as it was: conda reports the entry point in
    one line and every command works; a missing dependency of envkit is one line from envkit."""
    shadow = tmp_path / "shadow"
    (shadow / "envkit").mkdir(parents=True)
    (shadow / "envkit" / "__init__.py").write_text("raise ImportError('envkit is broken on purpose')\n")
    env = plugged.environ(PYTHONPATH=str(shadow))
    prefix = plugged.create(tmp_path / "env", [tiny_channel(tmp_path)], ["tool"])
    for args in (("--help",), ("list", "-p", str(prefix)), ("doctor", "-p", str(prefix))):
        proc = plugged.run(*args, env=env)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "envkit-toolchain" not in proc.stdout and "Consistent numeric toolchains" not in proc.stdout
        assert proc.stderr.count("envkit is broken on purpose") == 1
    more = tiny_channel(tmp_path / "more", extra=())
    installed = plugged.run(
        "install", "-y", "-p", str(prefix), "--override-channels", "-c", more.as_uri(), "helper", "--force-reinstall", env=env
    )
    assert installed.returncode == 0, installed.stderr
    removed = plugged.run("remove", "--all", "-y", "-p", str(prefix), env=env)  # a command the plugin acts after
    assert removed.returncode == 0 and removed.stderr.count("envkit is broken on purpose") == 1, removed.stderr
    assert not prefix.exists()

    broken = tmp_path / "broken-rattler"
    (broken / "rattler").mkdir(parents=True)
    (broken / "rattler" / "__init__.py").write_text("raise ImportError('rattler is broken on purpose')\n")
    env = plugged.environ(PYTHONPATH=str(broken))
    proc = plugged.run("envkit", "create", "pytorch-base", "--dry-run", env=env)
    assert proc.returncode == 70 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "envkit: error: rattler is broken on purpose (reinstall envkit with its dependencies)"
    prefix = plugged.create(tmp_path / "env", [tiny_channel(tmp_path)], ["tool"])
    assert plugged.run("doctor", "-p", str(prefix), env=env).returncode == 0  # the audit needs no rattler
    removed = plugged.run("env", "remove", "-y", "-p", str(prefix), env=env)  # nor does the lock file's removal after it
    assert removed.returncode == 0 and "envkit" not in removed.stderr, removed.stderr


def test_the_guard_sees_the_libraries_of_packages_conda_removes(plugged: Conda, wheel_channel: Path, tmp_path: Path) -> None:
    """The guard judges the env as the transaction leaves it: a removed package's libraries go with
    it (each library's owner is the conda package whose record lists it). Real conda records."""
    prefix = seed_env(plugged, wheel_channel, tmp_path / "seed", "mkl-service")
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from conda.core.prefix_data import PrefixData\n"
        "from envkit.audit.inventory import read_inventory\n"
        "from envkit.conda.hooks import after_transaction\n"
        "inv = read_inventory(Path(sys.argv[1]))\n"
        "gone = PrefixData(sys.argv[1]).get('intel-openmp')\n"
        "after = after_transaction(inv, (gone,), ())\n"
        "print(json.dumps([[{l.path: l.owner for l in i.libs if l.kind == 'openmp'} for i in (inv, after)]]))\n"
    )
    proc = subprocess.run([str(plugged.exe.parent / "python"), "-c", script, str(prefix)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    [[before, after]] = json.loads(proc.stdout)
    assert before["lib/libiomp5.so"] == "conda:intel-openmp"
    torch_gomp = [path for path, owner in before.items() if path.endswith("torch/lib/libgomp.so.1")]
    assert torch_gomp and before[torch_gomp[0]] == "conda:pytorch"
    assert "lib/libiomp5.so" not in after and torch_gomp[0] in after
