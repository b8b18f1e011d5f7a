"""The one probe check that runs without the env's activation: the env's python started as a job
script, a console script or a shebang starts it, to see that the startup files give it the
settings (envkit.activation.startup)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from envkit.activation.startup import MODULE
from envkit.probe.model import CheckResult

CHECK_ID = "unactivated"
TITLE = "a python started without activation gets the settings"
# each value as the UTF-8 text of its bytes, whatever the locale the python runs under
SHOW = (
    "import json, os, sys; "
    "print(json.dumps({n: None if os.getenv(n) is None else os.fsencode(os.getenv(n)).decode('utf-8', 'replace') for n in sys.argv[1:]}))"
)


def check_unactivated(python: Path, expected: dict[str, str], timeout: float = 60) -> CheckResult:
    """`expected`: the variables the env's activation sets that the startup files give (envkit's
    settings, and the threading values of conda's env vars and other activate.d scripts). They
    are taken out of the environment envkit runs in (the shell may have activated the env, or set
    them itself, which the audit judges), so that what the python has comes from the env alone."""
    if not expected:
        return CheckResult(CHECK_ID, TITLE, "skip", "the env's activation sets no variable", "", {})
    env = {k: v for k, v in os.environ.items() if k not in expected and not k.startswith("CONDA_")}
    try:
        proc = subprocess.run([str(python), "-c", SHOW, *expected], capture_output=True, text=True, env=env, timeout=timeout, check=False)
        seen = json.loads(proc.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return CheckResult(CHECK_ID, TITLE, "fail", f"{python} did not start: {exc}", "reinstall python into the env", {})
    wrong = {name: seen.get(name) for name, value in expected.items() if seen.get(name) != value}
    if not wrong:
        shown = ", ".join(f"{name}={value}" for name, value in expected.items())
        return CheckResult(CHECK_ID, TITLE, "pass", f"{shown}, from the startup files (site-packages/{MODULE}.*)", "", {"seen": seen})
    evidence = "; ".join(f"{name} is {'unset' if got is None else repr(got)}, not {expected[name]!r}" for name, got in wrong.items())
    return CheckResult(
        CHECK_ID,
        TITLE,
        "warn",
        f"{evidence}: a job script's `ENV/bin/python`, a console script or an IDE runs without the env's settings",
        "envkit audit --fix writes the startup files into the env's site-packages (EK031), with the threading values the rest of "
        "the activation sets (EK037)",
        {"seen": seen},
    )
