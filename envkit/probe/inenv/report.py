"""What checks return and how children report: one JSON record per check, tagged stdout lines."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

Check = dict[str, Any]

# Lines that name a known toolchain failure; shown first so evidence is the cause, not a traceback.
SIGNATURES = (
    "MKL_THREADING_LAYER",
    "undefined symbol",
    "OMP: Error",
    "Intel MKL FATAL",
    "GLIBCXX_",
    "OpenBLAS Warning",
    "driver on your system is too old",
)


def check(  # noqa: PLR0917 - every check builds one, positionally, in the order of the report
    cid: str, title: str, status: str, evidence: str = "", remedy: str = "", data: Any = None, seconds: Any = None
) -> Check:
    out: Check = {"id": cid, "title": title, "status": status, "evidence": evidence, "remedy": remedy, "data": data or {}}
    if seconds is not None:
        out["seconds"] = seconds
    return out


def excerpt(text: str | None, limit: int = 800) -> str:
    text = (text or "").strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    known: list[str] = []
    for ln in lines:
        if any(sig in ln for sig in SIGNATURES) and ln.strip() not in known:
            known.append(ln.strip())
    if known:
        return "\n".join(known[:4])[-limit:]
    keep = [ln for ln in lines if "Error" in ln or "error" in ln]
    chosen = "\n".join((keep or lines)[-6:])
    return chosen[-limit:]


def report(tag: str, value: Any) -> None:
    """One write per line: a line shorter than PIPE_BUF cannot be split by other writers of the same
    pipe (the DDP ranks write to it while the observations run in a thread)."""
    sys.stdout.write("ENVKIT-" + tag + ":" + json.dumps(value) + "\n")
    sys.stdout.flush()


def parse_sections(stdout: str | None) -> dict[str, Any]:
    """Children report as `ENVKIT-<TAG>:<json>` lines; anything else on stdout is ignored."""
    sections: dict[str, Any] = {}
    for line in (stdout or "").splitlines():
        if line.startswith("ENVKIT-") and ":" in line:
            tag, _, payload = line.partition(":")
            with contextlib.suppress(ValueError):
                sections[tag[len("ENVKIT-") :]] = json.loads(payload)
    return sections
