"""`envkit audit` from the command line: exit codes, the versioned JSON contract, --all, --fix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from envkit.audit.rules import RULES
from envkit.solve import backend
from tests.conftest import run_envkit
from tests.support.terminal import converse

FINDING_KEYS = {"rule_id", "slug", "severity", "title", "evidence", "fix", "fixable", "forced"}


def audit_json(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    proc = run_envkit("audit", *args, "--json", env=env)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_json_contract_and_error_exit(raw_payload_env: Path) -> None:
    code, doc = audit_json(str(raw_payload_env))
    assert code == 1
    assert set(doc) == {"envkit_json", "envkit_version", "command", "ok", "exit_code", "data", "messages", "errors", "hint"}
    assert (doc["envkit_json"], doc["command"], doc["ok"], doc["exit_code"]) == (1, "audit", False, 1)
    data = doc["data"]
    assert (
        isinstance(data, dict)
        and set(data) == {"audits", "min_severity", "fail_on", "fixes", "applied", "searched", "hidden"}
        and data["fail_on"] == "error"
    )
    audit = data["audits"][0]
    assert set(audit) == {"prefix", "findings", "envkit_managed", "packages", "error"}
    assert all(set(f) == FINDING_KEYS for f in audit["findings"])
    ek001 = next(f for f in audit["findings"] if f["rule_id"] == "EK001")
    assert ek001["severity"] == "error" and ek001["fixable"] is True and "mkl-service" in ek001["evidence"]


def test_fix_then_probe_proves_it(raw_payload_env: Path, tmp_path: Path) -> None:
    """The user story: an existing env crashes under DDP; audit --fix writes the setting; the probe proves it."""
    prefix = tmp_path / "copy"
    shutil.copytree(raw_payload_env, prefix, symlinks=True)
    proc = run_envkit("audit", str(prefix), "--fix", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "EK001: export MKL_THREADING_LAYER=GNU" in proc.stdout
    assert "MKL_THREADING_LAYER='GNU'" in (prefix / "etc" / "conda" / "activate.d" / "envkit-audit.sh").read_text()
    again = run_envkit("audit", str(prefix), "--fix", "--yes", "--json")
    doc = json.loads(again.stdout)
    assert again.returncode == 0 and doc["data"]["applied"] == [] and doc["data"]["fixes"] == []
    probe = json.loads(run_envkit("probe", "-p", str(prefix), "--json").stdout)
    seed = next(c for c in probe["data"]["checks"] if c["id"] == "ddp-seed")
    assert seed["status"] == "pass"


def test_drift_is_found_and_repaired(seed_env: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "seed-copy"
    shutil.copytree(seed_env, prefix, symlinks=True)
    # a copy keeps matching scripts; a deleted one is drift
    (prefix / "etc" / "conda" / "activate.d" / "envkit-seedenv.fish").unlink()
    code, doc = audit_json(str(prefix))
    drift = [f for f in doc["data"]["audits"][0]["findings"] if f["rule_id"] == "EK014"]
    assert code == 1 and any("envkit-seedenv.fish is missing" in f["evidence"] for f in drift)
    fixed = run_envkit("audit", str(prefix), "--fix", "--yes")
    assert fixed.returncode == 0, fixed.stdout
    assert "EK014" not in run_envkit("audit", str(prefix)).stdout


def test_scripts_an_older_envkit_wrote_are_told_from_edited_ones(seed_env: Path, tmp_path: Path) -> None:
    """The fish scripts envkit wrote before it ended them with `true` left status 4 (fish's `set`
    passes an earlier `set -e` failure through), so `conda activate ENV; and train` never trained.
    Such a script, untouched since (its digest is the record's), is EK031's: a warning with the
    same fix; a script edited by hand stays EK014's error."""
    from envkit.activation.shells import FISH_ZERO_STATUS
    from envkit.activation.writer import text_sha256

    prefix = tmp_path / "older"
    shutil.copytree(seed_env, prefix, symlinks=True)
    rel = "etc/conda/activate.d/envkit-seedenv.fish"
    script = prefix / rel
    tail = "".join(f"{line}\n" for line in FISH_ZERO_STATUS)
    older = script.read_text().removesuffix(tail)
    assert older != script.read_text()
    script.write_text(older)
    record_file = prefix / "etc" / "envkit" / "record.json"
    record = json.loads(record_file.read_text())
    record["activation"]["sha256"][rel] = text_sha256(older)  # as that envkit recorded it
    record_file.write_text(json.dumps(record))

    def fish_status() -> str:
        fish = shutil.which("fish")
        assert fish, "fish is not installed: .ci/run installs it"
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
        proc = subprocess.run(
            [fish, "--no-config", "-c", f"source '{script}'; echo $status"], env=env, capture_output=True, text=True, check=False
        )
        return proc.stdout.strip()

    assert fish_status() == "4"
    code, doc = audit_json(str(prefix))
    found = {f["rule_id"]: f for f in doc["data"]["audits"][0]["findings"]}
    assert code == 0 and "EK014" not in found, doc
    assert found["EK031"]["severity"] == "warning" and found["EK031"]["fixable"]
    assert f"{rel} is as an older envkit wrote it" in found["EK031"]["evidence"]

    assert run_envkit("audit", str(prefix), "--fix", "--yes").returncode == 0
    assert fish_status() == "0"
    code, doc = audit_json(str(prefix))
    assert not {"EK014", "EK031"} & {f["rule_id"] for f in doc["data"]["audits"][0]["findings"]}

    script.write_text(script.read_text() + "set -gx OMP_NUM_THREADS 64\n")  # by hand
    code, doc = audit_json(str(prefix))
    ids = {f["rule_id"] for f in doc["data"]["audits"][0]["findings"]}
    assert code == 1 and "EK014" in ids and "EK031" not in ids


def test_all_envs_summary_and_min_severity(seed_env: Path, raw_payload_env: Path, isolated: Path) -> None:
    registry = isolated / ".conda" / "environments.txt"
    registry.parent.mkdir(parents=True)
    registry.write_text(f"{seed_env}\n{raw_payload_env}\n/does/not/exist\n")
    code, doc = audit_json("--all", "--min-severity", "error")
    audits = {a["prefix"]: a for a in doc["data"]["audits"]}
    assert set(audits) == {str(seed_env), str(raw_payload_env)} and code == 1
    assert all(f["severity"] == "error" for a in audits.values() for f in a["findings"])
    assert audits[str(seed_env)]["findings"] == [] and audits[str(seed_env)]["envkit_managed"] is True
    human = run_envkit("audit", "--all")
    assert "errors" in human.stdout and str(raw_payload_env) in human.stdout


def test_active_env_and_bad_input(seed_env: Path, tmp_path: Path) -> None:
    env = dict(os.environ, CONDA_PREFIX=str(seed_env))
    code, doc = audit_json("--min-severity", "warning", env=env)
    assert code == 0 and doc["data"]["audits"][0]["prefix"] == str(seed_env)
    none = run_envkit("audit")
    assert none.returncode == 2 and "no env given and none is active" in none.stderr
    notenv = run_envkit("audit", str(tmp_path))
    assert notenv.returncode == 2 and "is not a conda env" in notenv.stderr
    code, doc = audit_json("--explain", "EK999")
    assert code == 2 and doc["errors"] == ["unknown rule 'EK999'"]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_explain_every_rule(rule: object) -> None:
    proc = run_envkit("audit", "--explain", rule.id)  # type: ignore[attr-defined]
    assert proc.returncode == 0
    for part in (rule.id, rule.title, "Why", "Fix", rule.sources[0]):  # type: ignore[attr-defined]
        assert part in proc.stdout
    assert run_envkit("audit", "--explain", rule.slug).returncode == 0  # type: ignore[attr-defined]


def test_probe_findings_are_merged(raw_payload_env: Path) -> None:
    code, doc = audit_json(str(raw_payload_env), "--probe", "--min-severity", "error")
    ids = {f["rule_id"] for f in doc["data"]["audits"][0]["findings"]}
    assert code == 1 and {"EK001", "PROBE:ddp-seed", "PROBE:ddp-gloo"} <= ids


def mkl_service_env(prefix: Path, replica: dict[str, Path]) -> Path:
    """conda-forge numpy + mkl-service on LLVM OpenMP, no threading layer: EK001, fixable. Metadata only, quick."""
    specs = ["python 3.12.*", "numpy", "mkl-service", "libblas * *mkl", "_openmp_mutex * *_llvm"]
    records = backend.solve([replica["conda-forge"].as_uri()], specs, "linux-64", backend.virtual_packages("linux-64"))
    backend.install(records, prefix, prefix.parent / "pkgs", specs, None)
    return prefix


def test_readme_fix_command_by_name(replica: dict[str, Path], tmp_path: Path) -> None:
    """The README's `envkit audit -n old-env --fix`, with -y for a non-interactive run."""
    prefix = mkl_service_env(tmp_path / "envs" / "old-env", replica)
    proc = run_envkit("audit", "-n", "old-env", "--fix", "-y")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MKL_THREADING_LAYER='GNU'" in (prefix / "etc" / "conda" / "activate.d" / "envkit-audit.sh").read_text()


def test_fix_off_a_terminal_shows_the_diff_and_writes_nothing_without_yes(replica: dict[str, Path], tmp_path: Path) -> None:
    prefix = mkl_service_env(tmp_path / "envs" / "old-env", replica)
    proc = run_envkit("audit", "-p", str(prefix), "--fix")
    assert proc.returncode == 1
    assert "+export MKL_THREADING_LAYER='GNU'" in proc.stdout and "+++ b/etc/conda/activate.d/envkit-audit.sh" in proc.stdout
    assert "fixes not applied: no terminal to confirm on: re-run with -y" in proc.stdout
    assert not (prefix / "etc" / "conda").exists()
    doc = json.loads(run_envkit("audit", "-p", str(prefix), "--fix", "--json").stdout)
    assert doc["data"]["applied"] == [] and "+export MKL_THREADING_LAYER='GNU'" in doc["data"]["fixes"][0]["diff"]
    assert not (prefix / "etc" / "conda").exists()


def test_fix_on_a_terminal_lists_the_findings_then_the_diff_then_asks(replica: dict[str, Path], tmp_path: Path) -> None:
    prefix = mkl_service_env(tmp_path / "envs" / "old-env", replica)
    code, screen = converse([sys.executable, "-m", "envkit", "audit", "-p", str(prefix), "--fix"], b"y", b"Apply these changes? [y/N]")
    assert code == 0, screen
    finding, diff, question, wrote = (
        screen.index(s) for s in ("error EK001", "+export MKL_THREADING_LAYER", "Apply these changes?", "wrote ")
    )
    assert finding < diff < question < wrote
    assert (prefix / "etc" / "conda" / "activate.d" / "envkit-audit.sh").is_file()
    code, screen = converse([sys.executable, "-m", "envkit", "audit", "-p", str(prefix), "--fix"], b"n", b"Apply these changes? [y/N]")
    assert code == 0 and "Apply these changes?" not in screen  # nothing left to fix: no question


def test_a_fix_answered_after_the_env_changed_or_while_it_is_locked_writes_nothing(replica: dict[str, Path], tmp_path: Path) -> None:
    """The diff waits for an answer; meanwhile another envkit changes the env (here a second fix;
    a sync would do the same) or holds its lock. The fix answered then would write settings planned
    on what is gone: it is not applied, and says why (exit 2)."""
    prefix = mkl_service_env(tmp_path / "envs" / "old-env", replica)
    script = prefix / "etc" / "conda" / "activate.d" / "envkit-audit.sh"
    ask = [sys.executable, "-m", "envkit", "audit", "-p", str(prefix), "--fix"]

    def change_meanwhile() -> None:
        assert run_envkit("audit", "-p", str(prefix), "--fix", "--yes").returncode == 0
        script.write_text(script.read_text() + "# the other fix, edited since\n")

    code, screen = converse(ask, b"y", b"Apply these changes? [y/N]", while_asked=change_meanwhile)
    assert code == 2 and f"fixes not applied: {prefix} changed after it was audited (run envkit audit --fix again)" in screen, screen
    assert script.read_text().endswith("# the other fix, edited since\n")

    script.write_text(script.read_text().replace("MKL_THREADING_LAYER", "MKL_THREADING_LAYER_X"))  # EK014: to fix again
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import time; from pathlib import Path; from envkit.core.fsutil import exclusive_lock; from envkit.install.transaction import lock_for\n"
         f"with exclusive_lock(lock_for(Path({str(prefix)!r})), 'x'):\n    print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        edited = script.read_text()
        code, screen = converse(ask, b"y", b"Apply these changes? [y/N]")
        assert code == 2 and "is locked by another envkit process" in screen, screen
        assert script.read_text() == edited
    finally:
        holder.kill()
        holder.wait()


def test_all_includes_the_base_env_of_the_conda_in_use(replica: dict[str, Path], tmp_path: Path) -> None:
    base = mkl_service_env(tmp_path / "miniconda", replica)
    (base / "bin").mkdir(exist_ok=True)
    (base / "bin" / "conda").write_text("#!/bin/sh\n")
    env = dict(os.environ, CONDA_EXE=str(base / "bin" / "conda"))
    code, doc = audit_json("--all", env=env)
    assert code == 1 and str(base) in [a["prefix"] for a in doc["data"]["audits"]]  # its EK001 counts
    by_name = run_envkit("audit", "-n", "base", "--json", env=env)
    assert json.loads(by_name.stdout)["data"]["audits"][0]["prefix"] == str(base)


def test_private_records_in_a_shared_env_are_found_and_opened(tmp_path: Path) -> None:
    """An env rattler made (records 0600, prefix-dev/pixi#4284) where others can reach it: EK030,
    and --fix gives the records the read bits the directories give. Out of others' reach: nothing."""
    from tests.support.tiny import tiny_channel

    channel = tiny_channel(tmp_path)
    records = backend.solve([channel.as_uri()], ["tool"], "linux-64", backend.virtual_packages("linux-64"))
    shared = Path(tempfile.mkdtemp(prefix="envkit-shared-"))
    try:
        shared.chmod(0o755)
        for where in (shared / "team", shared / "group", tmp_path / "mine"):  # tmp_path: pytest's own dirs are 0700
            backend.install(records, where, tmp_path / "pkgs", ["tool"], None)
        (shared / "group" / "conda-meta").chmod(0o750)  # its group may look in, others may not
        modes = {p.name: p.stat().st_mode & 0o777 for p in (shared / "team" / "conda-meta").glob("*.json")}
        assert set(modes.values()) == {0o600}, "rattler no longer writes records 0600: EK030 has nothing to find"

        code, doc = audit_json(str(shared / "team"))
        ek030 = [f for f in doc["data"]["audits"][0]["findings"] if f["rule_id"] == "EK030"]
        assert code == 0 and len(ek030) == 1 and ek030[0]["fixable"] is True, doc
        assert ek030[0]["evidence"].startswith("2 package record(s) that only their owner can read, in an env its group and other users")
        _, doc = audit_json(str(tmp_path / "mine"))
        assert all(f["rule_id"] != "EK030" for f in doc["data"]["audits"][0]["findings"])

        for prefix, mode in ((shared / "team", 0o644), (shared / "group", 0o640)):
            fixed = run_envkit("audit", str(prefix), "--fix", "--yes")
            assert fixed.returncode == 0 and ("chmod go+r" if mode == 0o644 else "chmod g+r") in fixed.stdout, fixed.stdout
            assert {p.stat().st_mode & 0o777 for p in (prefix / "conda-meta").glob("*.json")} == {mode}
            _, doc = audit_json(str(prefix))
            assert all(f["rule_id"] != "EK030" for f in doc["data"]["audits"][0]["findings"])
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_fix_with_nothing_it_can_apply_says_so(tmp_path: Path) -> None:
    """KMP_DUPLICATE_LIB_OK set with `conda env config vars` (EK005): its fix is the user's (which
    runtime to drop), so --fix plans nothing; it used to print the findings alone, which read as
    done. It now says that none has a fix envkit applies itself, and the exit code stays 1."""
    prefix = tmp_path / "plain"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "state").write_text(json.dumps({"env_vars": {"KMP_DUPLICATE_LIB_OK": "TRUE"}}))
    proc = run_envkit("audit", "-p", str(prefix), "--fix", "--yes")
    assert proc.returncode == 1 and "error EK005" in proc.stdout
    assert proc.stdout.rstrip().endswith(
        "--fix: none of these findings has a fix envkit applies itself; each one's fix line says what to do"
    )
    assert json.loads((prefix / "conda-meta" / "state").read_text()) == {"env_vars": {"KMP_DUPLICATE_LIB_OK": "TRUE"}}
    assert "--fix:" not in run_envkit("audit", "-p", str(prefix)).stdout  # only when a fix was asked for


def test_fix_rewrites_the_scripts_of_an_env_with_nothing_to_set(tmp_path: Path) -> None:
    """An env whose recipe sets no threading variable still has its activation scripts (create and
    sync write them). --fix planned none for it, so it deleted every one and said it rewrote them;
    the next audit found them all missing, and so on."""
    from tests.conftest import python_env

    _, prefix = python_env(tmp_path, "quiet", "{}")
    record = json.loads((prefix / "etc" / "envkit" / "record.json").read_text())
    assert record["activation"]["ops"] == []
    scripts = sorted(record["activation"]["files"])
    assert len(scripts) == 10 and all((prefix / rel).is_file() for rel in scripts)
    (prefix / "etc" / "conda" / "activate.d" / "envkit-quiet.fish").unlink()
    code, doc = audit_json("-p", str(prefix))
    assert code == 1 and "EK014" in {f["rule_id"] for f in doc["data"]["audits"][0]["findings"]}

    fixed = run_envkit("audit", "-p", str(prefix), "--fix", "--yes")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "delete " not in fixed.stdout
    assert [rel for rel in scripts if not (prefix / rel).is_file()] == []
    code, doc = audit_json("-p", str(prefix))
    assert code == 0 and not {"EK014", "EK031"} & {f["rule_id"] for f in doc["data"]["audits"][0]["findings"]}, doc
