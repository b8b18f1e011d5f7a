"""The rule catalog: every family's rules, by id, the audit's (EK) and the recipe's (RC) alike.
Each rule is declared beside its check in its family's module (envkit.audit.catalog)."""

from __future__ import annotations

from envkit.audit.catalog import DECLARED, SEVERITY_ORDER, ConsistencyRule, Rule, Severity
from envkit.audit.rules import activation, openmp, packages, recipe, records, threads  # noqa: F401 - each declares its rules

__all__ = ["RECIPE_RULES", "RECIPE_RULES_BY_ID", "RULES", "RULES_BY_ID", "SEVERITY_ORDER", "Rule", "Severity", "lookup"]

RULES: tuple[Rule, ...] = tuple(sorted((r for r in DECLARED if isinstance(r, Rule)), key=lambda r: r.id))
RECIPE_RULES: tuple[ConsistencyRule, ...] = tuple(sorted((r for r in DECLARED if isinstance(r, ConsistencyRule)), key=lambda r: r.id))
RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}
RECIPE_RULES_BY_ID: dict[str, ConsistencyRule] = {rule.id: rule for rule in RECIPE_RULES}
assert len({r.id for r in DECLARED}) == len(DECLARED), "duplicate rule id"
# a hazard can have a rule of each kind, under one slug (EK005 and RC004 are kmp-duplicate-lib-ok)
assert all(len({r.slug for r in kind}) == len(kind) for kind in (RULES, RECIPE_RULES)), "duplicate rule slug"


def lookup(rule_id: str) -> Rule | ConsistencyRule | None:
    """A rule by its id (EK001, RC003) or its slug (the audit's rule where both kinds have one)."""
    key = rule_id.strip()
    found = RULES_BY_ID.get(key.upper()) or RECIPE_RULES_BY_ID.get(key.upper())
    either: tuple[Rule | ConsistencyRule, ...] = (*RULES, *RECIPE_RULES)
    return found or next((r for r in either if r.slug == key.lower()), None)
