"""EK040: an env whose activation sets a variable a shell, conda or the loader acts on is never
"clean", whoever set it there (conda env config vars, or a record from before envkit refused it)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_envkit
from tests.support.tiny import tiny_channel, tiny_recipe


def test_conda_env_config_vars_that_a_shell_acts_on_are_an_error(tmp_path: Path) -> None:
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    prefix = tmp_path / "envs" / "tiny"
    assert run_envkit("create", str(recipe), "-p", str(prefix), "--yes", "--no-probe").returncode == 0
    clean = run_envkit("audit", "-p", str(prefix), "--json")
    assert clean.returncode == 0, clean.stdout
    state = {"env_vars": {"HISTFILESIZE": "0", "CONDA_SHLVL": "7", "PS0": "$(touch ran)", "MY_SETTING": "1"}}
    (prefix / "conda-meta" / "state").write_text(json.dumps(state))
    audit = run_envkit("audit", "-p", str(prefix), "--json")
    assert audit.returncode == 1, audit.stdout
    findings = [f for f in json.loads(audit.stdout)["data"]["audits"][0]["findings"] if f["rule_id"] == "EK040"]
    assert sorted(f["evidence"].split(":")[0] for f in findings) == [
        "conda env config vars sets CONDA_SHLVL",
        "conda env config vars sets HISTFILESIZE",
        "conda env config vars sets PS0",
    ], findings
