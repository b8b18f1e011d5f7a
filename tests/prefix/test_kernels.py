"""Jupyter kernels of an env: found where Jupyter looks, judged against envkit's settings, and
written so that a real Jupyter client starts a real ipykernel with them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from envkit.audit.engine import findings_for
from envkit.audit.inventory import read_inventory
from envkit.prefix.kernels import env_kernels, escaped, installed_kernels, kernel_dirs, kernels_of, search_ahead, unescaped
from tests.conftest import python_env, run_envkit
from tests.support.conda import tool_exe
from tests.support.seed import SEED_SCENARIO

# a value Jupyter would change were its `$` not doubled in the spec: $HOME expanded, $$ made one $
ODD = "a $HOME b $$ c"


def _spec(folder: Path, name: str, argv: list[str], env: dict[str, str] | None = None) -> Path:
    path = folder / name / "kernel.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"argv": argv, "display_name": name, "language": "python", **({"env": env} if env else {})}, indent=1))
    return path


def test_the_env_s_kernels_are_found_where_jupyter_looks_and_others_are_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix, other = tmp_path / "env", tmp_path / "other"
    for p in (prefix, other):
        (p / "bin").mkdir(parents=True)
    linked = tmp_path / "linked-env"
    linked.symlink_to(prefix)
    user = tmp_path / "home" / ".local" / "share" / "jupyter" / "kernels"
    extra = tmp_path / "extra" / "kernels"
    _spec(user, "mine", [str(prefix / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"])
    _spec(user, "via-link", [str(linked / "bin" / "python3.11"), "-m", "ipykernel_launcher"])
    _spec(user, "theirs", [str(other / "bin" / "python"), "-m", "ipykernel_launcher"])
    _spec(user, "activated", ["conda", "run", "-p", str(prefix), "python", "-m", "ipykernel_launcher"])
    _spec(user, "bare", ["python", "-m", "ipykernel_launcher"])
    for name, text in (("broken", "{not json"), ("deep", "[" * 100_000), ("binary", None)):
        (user / name).mkdir()
        if text is None:
            (user / name / "kernel.json").write_bytes(b"\xff\xfe\x00")
        else:
            (user / name / "kernel.json").write_text(text)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)  # a kernel whose python sits in a link loop: it is nobody's
    _spec(user, "looped", [str(loop / "bin" / "python")])
    (user / "fifo").mkdir()
    os.mkfifo(user / "fifo" / "kernel.json")  # read, it would block for ever
    _spec(extra, "MINE", [str(other / "bin" / "python")])  # JUPYTER_PATH comes first: this one hides the user's 'mine'
    _spec(prefix / "share" / "jupyter" / "kernels", "in-env", [str(prefix / "bin" / "python")])
    monkeypatch.setenv("JUPYTER_PATH", str(extra.parent))
    dirs = kernel_dirs((prefix,))
    assert dirs[0] == extra and user in dirs and prefix / "share" / "jupyter" / "kernels" in dirs
    found = {k.name: k for k in kernels_of(prefix, installed_kernels(dirs))}
    assert sorted(found) == ["in-env", "via-link"]
    assert {k.name for k in kernels_of(prefix, installed_kernels(dirs[1:]))} == {"mine", "in-env", "via-link"}


def test_kernels_read_while_the_env_is_linked_are_taken_as_read_and_its_own_folder_is_read_after(tmp_path: Path, isolated: Path) -> None:
    """create reads every folder but the new env's own while rattler links it (search_ahead), and
    the env's own folder (where a package installs a kernel) once it is in place: what is found is
    what a search made after would find, but for what changed meanwhile in another env's folder."""
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "conda-meta").mkdir()
    user = isolated / ".local" / "share" / "jupyter" / "kernels"
    python = [str(prefix / "bin" / "python"), "-m", "ipykernel_launcher"]
    _spec(user, "made-before", python)
    _spec(user, "theirs", ["/elsewhere/bin/python"])
    alias = tmp_path / "alias"  # the registry names the env by another path: its folder is the env's own all the same
    alias.symlink_to(prefix)
    registry = isolated / ".conda" / "environments.txt"
    registry.parent.mkdir()
    registry.write_text(f"{alias}\n")
    search = search_ahead(prefix)
    assert prefix / "share" / "jupyter" / "kernels" in search.dirs and alias / "share" / "jupyter" / "kernels" in search.dirs
    assert prefix / "share" / "jupyter" / "kernels" not in search.read and alias / "share" / "jupyter" / "kernels" not in search.read
    assert user in search.read and [k.name for k in search.read[user]] == ["made-before", "theirs"]

    _spec(prefix / "share" / "jupyter" / "kernels", "shipped", python)  # the install puts one in the env
    _spec(user, "made-meanwhile", python)  # another process, while the env was being linked
    assert [k.name for k in env_kernels(prefix, search)] == ["made-before", "shipped"]
    assert [k.name for k in env_kernels(prefix)] == ["made-before", "made-meanwhile", "shipped"]
    assert [k.name for k in env_kernels(tmp_path / "other", search)] == []  # a search made for another env is not used


def test_differences_and_the_written_spec_keep_jupyters_reading_of_dollars(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    folder = tmp_path / "kernels"
    _spec(
        folder,
        "k",
        [str(prefix / "bin" / "python"), "-m", "ipykernel_launcher"],
        {"KEEP": "x", "KMP_DUPLICATE_LIB_OK": "TRUE", "OMP_NUM_THREADS": "8"},
    )
    (kernel,) = kernels_of(prefix, installed_kernels((folder,)))
    settings = {"MKL_THREADING_LAYER": "GNU", "OMP_NUM_THREADS": "2", "KMP_DUPLICATE_LIB_OK": None, "ODD": ODD}
    assert kernel.differences(settings) == (
        "KMP_DUPLICATE_LIB_OK=TRUE (envkit's activation unsets it)",
        "no MKL_THREADING_LAYER=GNU",
        f"no ODD={ODD}",
        "OMP_NUM_THREADS=8 (envkit's activation: 2)",
    )
    written = json.loads(kernel.with_settings(settings))
    assert written["env"] == {"KEEP": "x", "OMP_NUM_THREADS": "2", "MKL_THREADING_LAYER": "GNU", "ODD": "a $$HOME b $$$$ c"}
    assert written["argv"] == [str(prefix / "bin" / "python"), "-m", "ipykernel_launcher"] and written["display_name"] == "k"
    assert unescaped(escaped(ODD)) == ODD
    (folder / "k" / "kernel.json").write_text(kernel.with_settings(settings))
    assert kernels_of(prefix, installed_kernels((folder,)))[0].differences(settings) == ()


def _tools_site() -> str:
    """The site-packages of the test tools' venv, where ipykernel and jupyter_client are."""
    python = tool_exe("python")
    return subprocess.run(
        [str(python), "-c", "import ipykernel, os; print(os.path.dirname(os.path.dirname(ipykernel.__file__)))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()


KERNEL_RUN = """
import sys
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name=sys.argv[1], startup_timeout=120)
try:
    out = []
    kc.execute_interactive(sys.argv[2], output_hook=lambda m: out.append(m["content"].get("text", "")) if m["msg_type"] == "stream" else None, timeout=300)
    print("".join(out).strip())
finally:
    kc.stop_channels()
    km.shutdown_kernel(now=True)
"""


def _in_kernel(name: str, code: str, env: dict[str, str]) -> Any:
    """The JSON that `code` prints, run in kernel `name` as Jupyter's own client starts it."""
    proc = subprocess.run(
        [str(tool_exe("python")), "-c", KERNEL_RUN, name, code], capture_output=True, text=True, env=env, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _kernel_sees(name: str, names: list[str], env: dict[str, str]) -> dict[str, str | None]:
    """What the kernel's process has of `names`."""
    seen: dict[str, str | None] = _in_kernel(name, f"import json, os; print(json.dumps({{n: os.environ.get(n) for n in {names!r}}}))", env)
    return seen


def _install_kernel(prefix: Path, name: str, env: dict[str, str]) -> None:
    """The kernelspec ipykernel itself writes for the env's python (`ipykernel install --user`)."""
    installed = subprocess.run(
        [str(prefix / "bin" / "python"), "-m", "ipykernel", "install", "--user", "--name", name],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr


def test_a_kernel_ipykernel_installed_gets_the_settings_from_audit_fix(tmp_path: Path, isolated: Path) -> None:
    """ipykernel installs the kernel; Jupyter's client starts it, with the server's environment and
    no activation. Before the fix the env's startup files fill in what the server lacks, and what
    the server has (another env's settings, in the shell it was started from) wins; after it the
    kernel's own env gives each of the env's values exactly, `$` included, and the audit has
    nothing more to say."""
    recipe, prefix = python_env(
        tmp_path,
        "nb",
        f"{{mkl_threading_layer: gnu, omp_num_threads: 2, env: {{ODD: {json.dumps(ODD)}, KMP_DUPLICATE_LIB_OK: {{unset: true}}}}}}",
    )
    env = {
        **os.environ,
        "PYTHONPATH": _tools_site(),
        "KMP_DUPLICATE_LIB_OK": "TRUE",
        "MKL_THREADING_LAYER": "INTEL",
        "OMP_NUM_THREADS": "8",
    }
    _install_kernel(prefix, "nb-kernel", env)
    spec = isolated / ".local" / "share" / "jupyter" / "kernels" / "nb-kernel" / "kernel.json"
    before = json.loads(spec.read_text())
    assert before["argv"][0] == str(prefix / "bin" / "python")

    names = ["MKL_THREADING_LAYER", "OMP_NUM_THREADS", "ODD", "KMP_DUPLICATE_LIB_OK"]
    assert _kernel_sees("nb-kernel", names, env) == {
        "MKL_THREADING_LAYER": "INTEL",
        "OMP_NUM_THREADS": "8",
        "ODD": ODD,  # from the startup files: the server has none
        "KMP_DUPLICATE_LIB_OK": "TRUE",
    }
    audit = run_envkit("audit", "-p", str(prefix), "--json")
    found = [f for a in json.loads(audit.stdout)["data"]["audits"] for f in a["findings"] if f["rule_id"] == "EK036"]
    assert len(found) == 1 and str(spec) in found[0]["evidence"] and "no MKL_THREADING_LAYER=GNU" in found[0]["evidence"], audit.stdout

    fixed = run_envkit("audit", "-p", str(prefix), "--fix", "--yes")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert f"+++ b{spec}" in fixed.stdout
    after = json.loads(spec.read_text())
    assert {k: v for k, v in after.items() if k != "env"} == {k: v for k, v in before.items() if k != "env"}
    assert _kernel_sees("nb-kernel", names, env) == {
        "MKL_THREADING_LAYER": "GNU",
        "OMP_NUM_THREADS": "2",
        "ODD": ODD,
        "KMP_DUPLICATE_LIB_OK": "TRUE",
    }
    again = run_envkit("audit", "-p", str(prefix), "--json")
    assert not [f for a in json.loads(again.stdout)["data"]["audits"] for f in a["findings"] if f["rule_id"] == "EK036"], again.stdout
    assert "EK036" not in {f.rule_id for f in findings_for(read_inventory(prefix))}

    # a sync that changes the settings gives the kernel the new ones, and takes out what envkit
    # wrote for a setting the recipe no longer has (what the user put there stays)
    spec.write_text(spec.read_text().replace('"env": {', '"env": {\n  "MINE": "kept",'))
    recipe.write_text(
        recipe.read_text().replace("omp_num_threads: 2", "omp_num_threads: 3").replace(f"ODD: {json.dumps(ODD)}", "ODD2: '$$'")
    )
    synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert f"wrote the env's settings into Jupyter kernel {spec}" in synced.stdout
    assert _kernel_sees("nb-kernel", [*names, "ODD2", "MINE"], env) == {
        "MKL_THREADING_LAYER": "GNU",
        "OMP_NUM_THREADS": "3",
        "ODD": None,
        "KMP_DUPLICATE_LIB_OK": "TRUE",
        "ODD2": "$$",
        "MINE": "kept",
    }

    # so does a create over the env (one the user may not write: tests/test_shared_env.py), and it
    # takes out what the env it replaces wrote for a setting the new recipe has not
    spec.write_text(spec.read_text().replace('"3"', '"1"'))
    spec.chmod(0o444)
    recipe.write_text(recipe.read_text().replace("ODD2: '$$', ", ""))
    remade = run_envkit("create", str(recipe), "-p", str(prefix), "--force", "--yes", "--no-probe", "--json")
    assert json.loads(remade.stdout)["data"]["created"]["kernels"] == [str(spec)], remade.stdout
    assert json.loads(spec.read_text())["env"]["OMP_NUM_THREADS"] == "3" and spec.stat().st_mode & 0o777 == 0o444
    assert "ODD2" not in json.loads(spec.read_text())["env"] and json.loads(spec.read_text())["env"]["MINE"] == "kept"

    # removed, the env leaves its kernel to its user, named with the command that removes it
    removed = run_envkit("remove", "-p", str(prefix), "--yes")
    assert removed.returncode == 0, removed.stderr
    assert f"Jupyter kernel 'nb-kernel' ({spec}) starts the removed env's python: jupyter kernelspec remove nb-kernel" in removed.stdout
    gone = subprocess.run(
        [str(tool_exe("jupyter")), "kernelspec", "remove", "-y", "nb-kernel"], capture_output=True, text=True, timeout=120, check=False
    )
    assert gone.returncode == 0 and not spec.exists(), gone.stderr


def test_a_kernel_gets_the_threading_values_the_startup_files_carry_and_loses_them_with_them(tmp_path: Path, isolated: Path) -> None:
    """A threading value the env's activation sets outside envkit's settings (here an activate.d
    script of one's own) goes into the kernel with the fix that carries it (EK037), follows a
    change, and is taken out of the kernel once activation no longer sets it."""
    _, prefix = python_env(tmp_path, "nbc", "{mkl_threading_layer: gnu}")
    own = prefix / "etc" / "conda" / "activate.d" / "env_vars.sh"
    own.write_text("export OMP_NUM_THREADS=4\n")
    env = {**os.environ, "PYTHONPATH": _tools_site(), "OMP_NUM_THREADS": "8"}  # the server's: it wins over the startup files
    _install_kernel(prefix, "nbc-kernel", env)
    names = ["MKL_THREADING_LAYER", "OMP_NUM_THREADS"]
    assert _kernel_sees("nbc-kernel", names, env) == {"MKL_THREADING_LAYER": "GNU", "OMP_NUM_THREADS": "8"}

    def fix() -> set[str]:
        audit = json.loads(run_envkit("audit", "-p", str(prefix), "--json").stdout)
        fixed = run_envkit("audit", "-p", str(prefix), "--fix", "--yes")
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr
        return {f["rule_id"] for a in audit["data"]["audits"] for f in a["findings"]} & {"EK036", "EK037"}

    assert fix() == {"EK036", "EK037"}
    assert _kernel_sees("nbc-kernel", names, env) == {"MKL_THREADING_LAYER": "GNU", "OMP_NUM_THREADS": "4"}
    own.write_text("export OMP_NUM_THREADS=6\n")
    assert fix() == {"EK037"}  # the kernel holds what was carried; the fix carries the new value to both
    assert _kernel_sees("nbc-kernel", names, env)["OMP_NUM_THREADS"] == "6"
    own.unlink()
    assert fix() == {"EK037"}
    assert _kernel_sees("nbc-kernel", names, env) == {"MKL_THREADING_LAYER": "GNU", "OMP_NUM_THREADS": "8"}
    assert not {"EK036", "EK037"} & {f.rule_id for f in findings_for(read_inventory(prefix))}


def test_the_seed_crash_comes_back_in_a_notebook_until_the_kernel_has_the_settings(seed_env: Path, isolated: Path) -> None:
    """The env has MKL_THREADING_LAYER=GNU at activation and in its startup files, and a DDP-style
    child started from its Jupyter kernel still crashes where the server's environment has INTEL:
    Jupyter runs no activation, and the startup files keep a value the process has. A server gets
    INTEL from a shell with another env's settings, or by importing mkl-service itself, which writes
    INTEL into its own environment for every kernel it starts. Once audit --fix has written the
    setting into the kernelspec (and nothing into the env), the same child runs."""
    env = {**os.environ, "PYTHONPATH": _tools_site(), "MKL_THREADING_LAYER": "INTEL"}
    _install_kernel(seed_env, "seed", env)
    crashed = _in_kernel("seed", SEED_SCENARIO, env)
    assert crashed["rc"] != 0 and "MKL_THREADING_LAYER=INTEL is incompatible with libgomp" in crashed["stderr"], crashed
    record = (seed_env / "etc" / "envkit" / "record.json").read_bytes()
    fixed = run_envkit("audit", "-p", str(seed_env), "--fix", "--yes", "--json")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    (plan,) = json.loads(fixed.stdout)["data"]["fixes"]
    assert plan["reasons"] == ["EK036: write the env's activation settings into its Jupyter kernels"], plan
    assert (seed_env / "etc" / "envkit" / "record.json").read_bytes() == record  # the env itself was right
    ran = _in_kernel("seed", SEED_SCENARIO, env)
    assert ran["rc"] == 0, ran
