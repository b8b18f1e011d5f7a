"""envkit's one rule registry, each rule declared where its check is: `@rule(...)` over an env
check, `@recipe_rule(...)` over a recipe check, records the rule's id, slug, severity, title,
rationale, fix and sources beside the code that finds it (as ruff keeps a rule and its docs
together). An env check is pure: over the env's inventory, it returns evidence lines, one finding
each; a recipe check returns what is wrong with the recipe, or None. `safe_fix` names the repair `envkit audit --fix` may make
(activation settings or envkit's record, never packages); `advise` tailors the fix to the env, so
that a fix naming a package command says what else that command would take with it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from envkit.audit.inventory import Inventory
    from envkit.recipe.model import Recipe

Severity = Literal["error", "warning", "info"]
SEVERITY_ORDER: dict[str, int] = {"info": 0, "warning": 1, "error": 2}
Check = Callable[["Inventory"], list[str]]


@dataclass(frozen=True)
class Rule:
    """One catalog entry: what it checks, why it matters, how to fix it, and where that is documented."""

    id: str
    slug: str
    severity: Severity
    title: str
    rationale: str
    fix: str
    sources: tuple[str, ...]
    check: Check
    safe_fix: str | None = None  # name of the fix in audit.fix, when one exists
    advise: Callable[[Inventory], str] | None = None  # the fix for this env, when it depends on the env
    toolchain: bool = False  # about which BLAS/OpenMP/torch builds meet in the env: the toolchain map lists it as a conflict

    def fix_for(self, inv: Inventory) -> str:
        return self.advise(inv) if self.advise is not None else self.fix


@dataclass(frozen=True)
class ConsistencyRule:
    """A rule a recipe is held to before any solve: fixed in the recipe, never by envkit."""

    id: str
    slug: str
    severity: Literal["error", "warning"]
    title: str
    rationale: str
    fix: str
    sources: tuple[str, ...]
    check: Callable[[Recipe], str | None]
    safe_fix: None = None

    @property
    def source(self) -> str:
        return self.sources[0]


# in the order the family modules declare them; envkit.audit.rules orders them by id
DECLARED: list[Rule | ConsistencyRule] = []


def rule(
    id: str,
    slug: str,
    severity: Severity,
    title: str,
    *,
    rationale: str,
    fix: str,
    sources: tuple[str, ...],
    safe_fix: str | None = None,
    advise: Callable[[Inventory], str] | None = None,
    toolchain: bool = False,
) -> Callable[[Check], Check]:
    """Declare the rule whose check this decorates; the check itself is returned unchanged."""

    def declare(check: Check) -> Check:
        DECLARED.append(Rule(id, slug, severity, title, rationale, fix, sources, check, safe_fix, advise, toolchain))
        return check

    return declare


def recipe_rule(
    id: str,
    slug: str,
    severity: Literal["error", "warning"],
    title: str,
    *,
    rationale: str,
    fix: str,
    sources: tuple[str, ...],
) -> Callable[[Callable[[Recipe], str | None]], Callable[[Recipe], str | None]]:
    """Declare the recipe rule whose check this decorates; the check itself is returned unchanged."""

    def declare(check: Callable[[Recipe], str | None]) -> Callable[[Recipe], str | None]:
        DECLARED.append(ConsistencyRule(id, slug, severity, title, rationale, fix, sources, check))
        return check

    return declare
