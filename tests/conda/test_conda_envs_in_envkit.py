"""Envs made by the real conda, the way the seed users made theirs (python, numpy, mkl-service,
pytorch from a channel), through envkit: audited, probed, fixed, and still fully usable by conda."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import run_envkit, write_recipe
from tests.support.conda import Conda
from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_tar_bz2
from tests.support.httpchannel import auth_file, served
from tests.support.pipchannel import git_project, offline_pip_env, pip_channel
from tests.support.seed import SEED_SCENARIO
from tests.support.tiny import tiny_channel
from tests.support.wheelchannel import PY_VER, python_shim

SECRET = "tk-4a4a99ba1801"


def probe(prefix: Path) -> tuple[int, dict[str, str]]:
    proc = run_envkit("probe", "-p", str(prefix), "--json", timeout=600)
    doc = json.loads(proc.stdout)
    return proc.returncode, {c["id"]: c["status"] for c in doc["data"]["checks"]} if doc["data"] else {}


def _ddp_without_activation(prefix: Path) -> dict[str, object]:
    bare = {k: v for k, v in os.environ.items() if not k.startswith(("CONDA_", "MKL_"))}
    proc = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", SEED_SCENARIO], capture_output=True, text=True, env=bare, timeout=300, check=False
    )
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def test_the_seed_env_as_conda_made_it(conda: Conda, wheel_channel: Path, tmp_path: Path) -> None:
    prefix = conda.create(tmp_path / "seed", [wheel_channel], ["python=3.11", "pytorch=2.13.0", "numpy", "mkl-service"])

    audit = json.loads(run_envkit("audit", "-p", str(prefix), "--json").stdout)
    findings = {f["rule_id"]: f for f in audit["data"]["audits"][0]["findings"]}
    assert audit["exit_code"] == 1 and findings["EK001"]["fixable"] is True
    assert audit["data"]["audits"][0]["envkit_managed"] is False

    code, checks = probe(prefix)
    assert code == 1 and checks["ddp-seed"] == "fail" and checks["ddp-gloo"] == "fail"

    # the toolchain map of an env envkit did not make: what was asked for comes from conda's history
    mapped = run_envkit("toolchain", "-p", str(prefix), "--json")
    assert mapped.returncode == 0, mapped.stderr
    doc = json.loads(mapped.stdout)["data"]
    assert set(doc["requested"]) == {"python", "pytorch", "numpy", "mkl-service"}
    openmp = {p["name"]: p for p in doc["providers"] if p["part"] == "OpenMP runtime"}
    assert ["mkl-service", "mkl", "intel-openmp"] in openmp["intel-openmp"]["brought_by"]
    assert any(f.endswith("torch/lib/libgomp.so.1") for f in openmp["pytorch"]["files"])
    assert "EK001" in [c["rule_id"] for c in doc["conflicts"]]

    assert _ddp_without_activation(prefix)["rc"] != 0  # a job script's `srun ENV/bin/python train.py`
    fixed = run_envkit("audit", "-p", str(prefix), "--fix", "--yes")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    code, checks = probe(prefix)
    assert code == 0 and checks["ddp-seed"] == "pass" and checks["ddp-gloo"] == "pass", checks
    # the fix wrote the startup files too: the same job, with no activation, runs
    assert checks["unactivated"] == "pass" and _ddp_without_activation(prefix)["rc"] == 0

    # conda still owns the env: list, activation (with the fix), run, install and remove, doctor
    assert "mkl-service" in conda.ok("list", "-p", str(prefix))
    conda.ok("list", "--explicit", "-p", str(prefix))
    script = f'eval "$({conda.exe} shell.bash hook)"; conda activate {prefix}; printf %s "$MKL_THREADING_LAYER"'
    activated = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=conda.environ(), timeout=120, check=False)
    assert activated.stdout == "GNU", activated.stderr
    ran = conda.ok("run", "-p", str(prefix), "python", "-c", "import os; print(os.environ['MKL_THREADING_LAYER'])")
    assert ran.strip() == "GNU"
    before = {json.loads(p.read_text())["name"] for p in (prefix / "conda-meta").glob("*.json")}
    conda.ok("install", "-y", "-q", "-p", str(prefix), "--override-channels", "-c", wheel_channel.as_uri(), "threadpoolctl")
    conda.ok("remove", "-y", "-q", "-p", str(prefix), "threadpoolctl")
    assert {json.loads(p.read_text())["name"] for p in (prefix / "conda-meta").glob("*.json")} == before
    assert _ddp_without_activation(prefix)["rc"] == 0  # conda's transactions leave the startup files alone
    doctor = conda.ok("doctor", "-p", str(prefix))  # the probe's verdict (two OpenMP runtimes mapped) shows, as a warning
    assert " error: " not in doctor, doctor
    assert run_envkit("audit", "-p", str(prefix), "--min-severity", "error").returncode == 0

    # envkit fixed the env, it did not make it: no recipe 'audit', no drift from a package list it never had
    listed = run_envkit("list", "--json", env=conda.environ())
    entry = next(e for e in json.loads(listed.stdout)["data"] if e["prefix"] == str(prefix))
    assert entry["recipe"] is None and entry["source"] == "audit --fix" and entry["drift"] == [], entry
    assert "(audit --fix)" in run_envkit("list", env=conda.environ()).stdout
    exported = run_envkit("export", "-p", str(prefix), "--format", "environment-yml")
    assert exported.returncode == 0 and "recipe 'audit'" not in exported.stdout
    assert "MKL_THREADING_LAYER" in exported.stdout
    sync = run_envkit("sync", "-p", str(prefix), "--yes")
    assert sync.returncode == 2 and "was not made by envkit (audit --fix only added its activation settings)" in sync.stderr


def _audit(prefix: Path) -> dict[str, list[dict[str, object]]]:
    """Rule id -> its findings, from the audit's JSON."""
    doc = json.loads(run_envkit("audit", "-p", str(prefix), "--json").stdout)
    found: dict[str, list[dict[str, object]]] = {}
    for finding in doc["data"]["audits"][0]["findings"]:
        found.setdefault(finding["rule_id"], []).append(finding)
    return found


def test_the_forums_fix_reaches_an_activated_python_only_until_the_audit_carries_it(
    conda: Conda, wheel_channel: Path, tmp_path: Path
) -> None:
    """`conda env config vars set MKL_THREADING_LAYER=GNU` is the fix the forums give for the seed
    crash. conda sets it at activation, so the activated audit and probe pass, and a job script's
    `srun ENV/bin/python` still crashes: EK037 says so, and --fix carries the value into the
    startup files."""
    prefix = conda.create(tmp_path / "seed", [wheel_channel], ["python=3.11", "pytorch=2.13.0", "numpy", "mkl-service"])
    conda.ok("env", "config", "vars", "set", "-p", str(prefix), "MKL_THREADING_LAYER=GNU")

    found = _audit(prefix)
    assert "EK001" not in found  # activation sets GNU
    (only,) = found["EK037"]
    assert only["severity"] == "warning" and only["fixable"] is True
    assert str(only["evidence"]).startswith("MKL_THREADING_LAYER=GNU is set by conda-meta/state at activation only")
    code, checks = probe(prefix)
    assert checks["ddp-seed"] == "pass" and checks["unactivated"] == "warn", checks
    crashed = _ddp_without_activation(prefix)
    assert crashed["rc"] != 0 and "MKL_THREADING_LAYER=INTEL is incompatible with libgomp" in str(crashed["stderr"])

    fixed = run_envkit("audit", "-p", str(prefix), "--fix", "--yes")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert _ddp_without_activation(prefix)["rc"] == 0
    assert "EK037" not in _audit(prefix)
    code, checks = probe(prefix)
    assert code == 0 and checks["unactivated"] == "pass", checks
    # conda's activation is left to conda: envkit wrote no activate.d script, only the startup files
    assert not list((prefix / "etc" / "conda").glob("*/envkit-*"))
    script = f'eval "$({conda.exe} shell.bash hook)"; conda activate {prefix}; printf %s "$MKL_THREADING_LAYER"'
    activated = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=conda.environ(), timeout=120, check=False)
    assert activated.stdout == "GNU", activated.stderr
    assert "mkl-service" in conda.ok("list", "-p", str(prefix))

    # set to INTEL since (the advice some write-ups give): EK001 and EK037 both. The fix's own
    # GNU wins at activation (envkit's script runs after conda's env vars), so it is the value the
    # files give: carrying conda's INTEL there would bring the crash back without activation
    conda.ok("env", "config", "vars", "set", "-p", str(prefix), "MKL_THREADING_LAYER=INTEL")
    found = _audit(prefix)
    assert "EK001" in found and str(found["EK037"][0]["evidence"]).startswith("MKL_THREADING_LAYER is INTEL at activation")
    assert run_envkit("audit", "-p", str(prefix), "--fix", "--yes").returncode == 0
    assert not {"EK001", "EK037"} & set(_audit(prefix)) and "EK033" in _audit(prefix)
    assert _ddp_without_activation(prefix)["rc"] == 0
    activated = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=conda.environ(), timeout=120, check=False)
    assert activated.stdout == "GNU", activated.stderr


def test_carried_values_follow_condas_env_vars_and_go_when_they_do(conda: Conda, tmp_path: Path) -> None:
    """A threading value is carried, a project's own variable is not; a value set again is carried
    anew, and once none is left the startup files go, and the record the fix had written with them."""
    channel = tiny_channel(tmp_path)
    python_shim(channel)
    index_channel(channel)
    prefix = conda.create(tmp_path / "env", [channel], ["python"])
    site = prefix / "lib" / f"python{PY_VER}" / "site-packages"
    show = "import os; print(os.environ.get('OMP_NUM_THREADS'), os.environ.get('WANDB_PROJECT'))"
    bare = {k: v for k, v in os.environ.items() if not k.startswith(("CONDA_", "OMP_", "WANDB_"))}

    def direct() -> str:
        return subprocess.run([str(prefix / "bin" / "python"), "-c", show], capture_output=True, text=True, env=bare, check=True).stdout

    conda.ok("env", "config", "vars", "set", "-p", str(prefix), "OMP_NUM_THREADS=4", "WANDB_PROJECT=yolo")
    assert [str(f["evidence"]).split(" at ")[0] for f in _audit(prefix)["EK037"]] == ["OMP_NUM_THREADS=4 is set by conda-meta/state"]
    assert run_envkit("audit", "-p", str(prefix), "--fix", "--yes").returncode == 0
    assert direct() == "4 None\n"
    shown = run_envkit("activation", "show", "-p", str(prefix))
    assert shown.returncode == 2 and "conda's activation sets what envkit's startup files carry (OMP_NUM_THREADS=4)" in shown.stderr

    conda.ok("env", "config", "vars", "set", "-p", str(prefix), "OMP_NUM_THREADS=8")
    (changed,) = _audit(prefix)["EK037"]
    assert str(changed["evidence"]).startswith("OMP_NUM_THREADS is 8 at activation (conda-meta/state) but 4 for a python started")
    assert run_envkit("audit", "-p", str(prefix), "--fix", "--yes").returncode == 0
    assert direct() == "8 None\n"

    conda.ok("env", "config", "vars", "unset", "-p", str(prefix), "OMP_NUM_THREADS")
    (gone,) = _audit(prefix)["EK037"]
    assert "activation no longer sets it" in str(gone["evidence"])
    fixed = run_envkit("audit", "-p", str(prefix), "--fix", "--yes")
    assert fixed.returncode == 0 and f"delete lib/python{PY_VER}/site-packages/_envkit_settings.pth" in fixed.stdout, fixed.stdout
    assert direct() == "None None\n" and not list(site.glob("_envkit_settings*"))
    assert not (prefix / "etc" / "envkit").exists()  # envkit keeps nothing in the env now: conda's alone, as before the fix
    assert _audit(prefix).keys().isdisjoint({"EK014", "EK031", "EK037"})
    listed = json.loads(run_envkit("list", "--json", env=conda.environ()).stdout)["data"]
    assert next(e for e in listed if e["prefix"] == str(prefix))["source"] is None
    assert "python" in conda.ok("list", "-p", str(prefix))


def test_envkit_run_sets_condas_env_vars_as_conda_run_does(conda: Conda, tmp_path: Path) -> None:
    """conda activate (and conda run) set the packages' etc/conda/env_vars.d variables, then
    `conda env config vars`, which win, leaving out what `conda env config vars unset` marked
    (`***unset***`); envkit run, the probe and the audit take the same set, and an export carries
    no such marker."""
    channel = tmp_path / "channel"
    shipped = json.dumps({"KMP_DUPLICATE_LIB_OK": "TRUE", "PKG_ONLY": "from package", "BOTH": "package", "UNSET_LATER": "package"})
    write_tar_bz2(channel, PkgMeta("shipsvars", "1.0", "0"), [PkgFile("etc/conda/env_vars.d/shipsvars.json", shipped.encode())])
    index_channel(channel)
    prefix = conda.create(tmp_path / "env", [channel], ["shipsvars"])
    conda.ok("env", "config", "vars", "set", "-p", str(prefix), "BOTH=state", "STATE_ONLY=from state", "UNSET_LATER=state")
    conda.ok("env", "config", "vars", "unset", "-p", str(prefix), "UNSET_LATER")
    assert json.loads((prefix / "conda-meta" / "state").read_text())["env_vars"]["UNSET_LATER"] == "***unset***"

    names = ("KMP_DUPLICATE_LIB_OK", "PKG_ONLY", "BOTH", "UNSET_LATER", "STATE_ONLY")
    show = "; ".join(f'echo "{n}=${{{n}-<unset>}}"' for n in names)
    by_conda = conda.ok("run", "-p", str(prefix), "sh", "-c", show)
    by_envkit = run_envkit("run", "-p", str(prefix), "--", "sh", "-c", show)
    assert by_envkit.returncode == 0, by_envkit.stderr
    assert by_envkit.stdout.split() == by_conda.split()
    assert "BOTH=state" in by_conda and "UNSET_LATER=<unset>" in by_conda and "PKG_ONLY=from" in by_conda

    audit = json.loads(run_envkit("audit", "-p", str(prefix), "--json").stdout)
    hidden = [f for f in audit["data"]["audits"][0]["findings"] if "KMP_DUPLICATE_LIB_OK" in f["evidence"]]
    assert hidden and "etc/conda/env_vars.d/shipsvars.json" in hidden[0]["evidence"], audit
    exported = run_envkit("export", "-p", str(prefix), "--format", "environment-yml")
    assert exported.returncode == 0 and "***unset***" not in exported.stdout and "STATE_ONLY" in exported.stdout


def test_a_conda_made_env_exports_its_git_wheel_at_its_commit(conda: Conda, tmp_path: Path) -> None:
    """A conda env a user pip-installed their project into from git: envkit has no record of it, so
    the export named it `proj==0.1`, which `conda env create -f` then looked for on an index. pip's
    own direct_url.json says where it came from, at which commit."""
    channel, links = pip_channel(tmp_path)
    prefix = conda.create(tmp_path / "mine", [channel], ["python=3.11", "pip"])
    commit = git_project(tmp_path / "proj", "proj")
    first = commit("REV = 1\n")
    commit("REV = 2\n")
    source = f"git+file://localhost{tmp_path / 'proj'}"
    pip_env = offline_pip_env(conda.environ(), links)
    conda.ok("run", "-p", str(prefix), "python", "-m", "pip", "install", "--quiet", f"proj @ {source}@{first}", env=pip_env)
    yml = tmp_path / "environment.yml"
    assert run_envkit("export", "-p", str(prefix), "--format", "environment-yml", "-o", str(yml)).returncode == 0
    assert f'- "proj @ {source}@{first}"' in yml.read_text(), yml.read_text()
    made = tmp_path / "again"
    conda.ok("env", "create", "-q", "-p", str(made), "-f", str(yml), env=pip_env)
    assert conda.ok("run", "-p", str(made), "python", "-c", "import proj; print(proj.REV)").strip() == "1"


def test_a_conda_env_from_a_token_channel_exports_urls_another_machine_can_use(conda: Conda, tmp_path: Path) -> None:
    """conda keeps a token channel's package URLs in conda-meta with `/t/<TOKEN>/` in the token's
    place; envkit's exports copied that placeholder (conda's own `list --explicit` strips it), so
    the lists named URLs no server has. They name the channel's URLs without a token, and a
    machine with the token in its credentials store installs the exported lock."""
    channel = tiny_channel(tmp_path)
    with served(channel, token=SECRET) as url:
        prefix = conda.create(tmp_path / "made", [], ["tool"], "-c", f"{url}/t/{SECRET}")
        assert "<TOKEN>" in next((prefix / "conda-meta").glob("tool-*.json")).read_text()
        exported = {fmt: run_envkit("export", "-p", str(prefix), "--format", fmt) for fmt in ("explicit", "lock", "environment-yml")}
        assert all(e.returncode == 0 and "TOKEN" not in e.stdout and SECRET not in e.stdout for e in exported.values()), exported
        assert f"{url}/linux-64/tool-1.0-0.tar.bz2#sha256:" in exported["explicit"].stdout
        lock = tmp_path / "made.lock"
        lock.write_text(exported["lock"].stdout)
        env = {**os.environ, "RATTLER_AUTH_FILE": str(auth_file(tmp_path / "auth.json", token=SECRET))}
        recipe = write_recipe(tmp_path / "r", "made", f"envkit: 1\nname: made\nchannels: [{url}]\npackages: [tool]\n")
        args = ("create", str(recipe), "--lock", str(lock), "--frozen", "-p", str(tmp_path / "again"), "--yes", "--no-probe")
        again = run_envkit(*args, env=env)
        assert again.returncode == 0, again.stderr
        assert (tmp_path / "again" / "share" / "tool" / "version.txt").is_file()
