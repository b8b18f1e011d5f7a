"""The audit rule catalog: every family's rules, by id. Each rule is declared beside its check in
its family's module (envkit.audit.catalog.rule)."""

from __future__ import annotations

from envkit.audit.catalog import DECLARED, SEVERITY_ORDER, Rule, Severity
from envkit.audit.rules import activation, openmp, packages, records, threads  # noqa: F401 - each declares its rules

__all__ = ["RULES", "RULES_BY_ID", "SEVERITY_ORDER", "Rule", "Severity", "lookup"]

RULES: tuple[Rule, ...] = tuple(sorted(DECLARED, key=lambda r: r.id))
RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}
assert len(RULES_BY_ID) == len(RULES), "duplicate audit rule id"
assert len({r.slug for r in RULES}) == len(RULES), "duplicate audit rule slug"


def lookup(rule_id: str) -> Rule | None:
    key = rule_id.strip()
    return RULES_BY_ID.get(key.upper()) or next((r for r in RULES if r.slug == key.lower()), None)
