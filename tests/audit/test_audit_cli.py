"""`envkit audit` from the command line: exit codes, the versioned JSON contract, --all, --fix."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from envkit.audit.rules import RULES
from tests.conftest import run_envkit

FINDING_KEYS = {"rule_id", "slug", "severity", "title", "evidence", "fix", "fixable", "forced"}


def audit_json(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, object]]:
    proc = run_envkit("audit", *args, "--json", env=env)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_json_contract_and_error_exit(raw_payload_env: Path) -> None:
    code, doc = audit_json(str(raw_payload_env))
    assert code == 1
    assert set(doc) == {"envkit_json", "envkit_version", "command", "ok", "exit_code", "data", "messages", "errors", "hint"}
    assert (doc["envkit_json"], doc["command"], doc["ok"], doc["exit_code"]) == (1, "audit", False, 1)
    data = doc["data"]
    assert isinstance(data, dict) and set(data) == {"audits", "min_severity", "fixes", "applied", "searched"}
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
