"""Safe fixes only: write or repair envkit's activation scripts. Packages are never touched; for
package-level findings the report carries the exact command to run."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from envkit import __version__
from envkit.activation.writer import ActivationFile, ops_from_json, ops_to_json, remove_stale, render_files, write_files
from envkit.audit.engine import Finding
from envkit.audit.rules import RULES_BY_ID
from envkit.fsutil import read_exact
from envkit.recipe.model import EnvOp
from envkit.record import read_record, write_record


@dataclass(frozen=True)
class FixPlan:
    prefix: Path
    recipe_name: str
    ops: tuple[EnvOp, ...]
    files: tuple[ActivationFile, ...]
    diff: str
    reasons: tuple[str, ...]

    @property
    def changes(self) -> bool:
        return bool(self.diff)


def _with(ops: list[EnvOp], op: EnvOp) -> list[EnvOp]:
    return [o for o in ops if o.name != op.name] + [op]


# A rule's `safe_fix` names one of these: the settings it changes, and what it says it does.
# Rewriting the scripts needs no change of settings: every plan renders them from the ops.
SAFE_FIXES: dict[str, tuple[Callable[[list[EnvOp]], list[EnvOp]], str]] = {
    "threading-layer-gnu": (lambda ops: _with(ops, EnvOp("MKL_THREADING_LAYER", "set", value="GNU")), "export MKL_THREADING_LAYER=GNU"),
    "rewrite-activation": (lambda ops: ops, "rewrite activation scripts from conda-meta/envkit.json"),
}


def plan_fix(prefix: Path, findings: list[Finding]) -> FixPlan:
    record = read_record(prefix)
    ops = list(ops_from_json(record["activation"]["ops"])) if record else []
    name = record["recipe"]["name"] if record else "audit"
    reasons = []
    for finding in findings:
        safe_fix = RULES_BY_ID[finding.rule_id].safe_fix if finding.rule_id in RULES_BY_ID else None
        if safe_fix is None:
            continue
        change, says = SAFE_FIXES[safe_fix]
        ops = change(ops)
        reasons.append(f"{finding.rule_id}: {says}")
    files = render_files(prefix, name, tuple(ops)) if ops else []
    diff_parts = []
    for f in files:
        old = read_exact(f.path) or ""
        if old != f.text:
            rel = str(f.path.relative_to(prefix))
            diff_parts.append("".join(difflib.unified_diff(old.splitlines(True), f.text.splitlines(True), f"a/{rel}", f"b/{rel}")))
    return FixPlan(prefix, name, tuple(ops), tuple(files), "".join(diff_parts), tuple(dict.fromkeys(reasons)))


def apply_fix(plan: FixPlan) -> list[Path]:
    if not plan.changes:
        return []
    changed = write_files(list(plan.files))
    remove_stale(plan.prefix, list(plan.files))
    record: dict[str, Any] = read_record(plan.prefix) or {
        "envkit_version": None,
        "created": None,
        "recipe": {"name": plan.recipe_name, "source": "audit --fix", "path": None, "commit": None},
        "probe": None,
        "healthy": None,
    }
    record["activation"] = {"ops": ops_to_json(plan.ops), "files": [str(f.path.relative_to(plan.prefix)) for f in plan.files]}
    record["updated"] = datetime.now(UTC).isoformat(timespec="seconds")
    record["envkit_version"] = __version__
    write_record(plan.prefix, record)
    return changed
