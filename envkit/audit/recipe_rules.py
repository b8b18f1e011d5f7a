"""A recipe against the recipe rules (envkit.audit.rules.recipe), on each platform it declares:
the findings to show, and the errors that stop a create, lock or sync unless the recipe forces them."""

from __future__ import annotations

from dataclasses import dataclass, replace

import rattler

from envkit.audit.catalog import ConsistencyRule, Severity
from envkit.audit.rules import RECIPE_RULES as RULES
from envkit.audit.rules import RECIPE_RULES_BY_ID as RULES_BY_ID
from envkit.audit.rules import RULES_BY_ID as AUDIT_RULES  # force: may also accept an audit rule's risk (plan audit)
from envkit.core.errors import Location, Problem, RecipeError
from envkit.recipe.model import Recipe
from envkit.recipe.platforms import platform_problems, undeclared

__all__ = ["RULES", "RULES_BY_ID", "ConsistencyFinding", "ConsistencyRule", "check_recipe", "plan_warnings", "require_consistent"]


@dataclass(frozen=True)
class ConsistencyFinding:
    """A recipe rule a recipe breaks; `forced` when the recipe's `force:` lets it through."""

    rule: ConsistencyRule
    message: str
    forced: bool

    @property
    def severity(self) -> Severity:
        return "warning" if self.forced else self.rule.severity


def _platforms(recipe: Recipe) -> tuple[str, ...]:
    """The platforms the recipe declares; one that declares none is for the machine it runs on."""
    return recipe.platforms or (str(rattler.Subdir.current()),)


def platform_views(recipe: Recipe) -> list[Recipe]:
    """The recipe as each declared platform sees it (per_platform entries applied), platforms that
    see the same recipe grouped, each view declaring just its own platforms."""
    groups: dict[int, tuple[Recipe, list[str]]] = {}
    for platform in _platforms(recipe):
        view = recipe.for_platform(platform)
        groups.setdefault(id(view), (view, []))[1].append(platform)
    return [replace(view, platforms=tuple(platforms)) for view, platforms in groups.values()]


def check_recipe(recipe: Recipe) -> list[ConsistencyFinding]:
    """Every rule on each platform's view of the recipe (per_platform entries applied)."""
    findings: list[ConsistencyFinding] = []
    for view in platform_views(recipe):
        for rule in RULES:
            message = rule.check(view)
            if message and all((f.rule.id, f.message) != (rule.id, message) for f in findings):
                findings.append(ConsistencyFinding(rule, message, forced=rule.id in recipe.force))
    return findings


def require_consistent(recipe: Recipe, used_on: str | None = None) -> list[ConsistencyFinding]:
    """Raise for unforced errors (one line each); return every finding for display. `used_on`: the
    platform a create or sync runs for, whose toolchain must exist even if the recipe omits it."""
    unknown = [rid for rid in recipe.force if rid not in RULES_BY_ID and rid not in AUDIT_RULES]
    loc = Location(recipe.origin.path, 1, 1)
    if unknown:
        raise RecipeError(
            [Problem(loc, "force", f"unknown rule id '{rid}' (recipe rules are RC001..., audit rules EK001...)") for rid in unknown]
        )
    unbuilt = platform_problems(recipe, used_on)
    if unbuilt:  # a toolchain that does not exist there: not a risk to accept with force:
        raise RecipeError(unbuilt)
    findings = check_recipe(recipe)
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        raise RecipeError(
            [Problem(loc, f.rule.id, f"{f.message} [{f.rule.source}; add '{f.rule.id}' to force: to accept the risk]") for f in errors]
        )
    return findings


def plan_warnings(recipe: Recipe, platform: str) -> tuple[str, ...]:
    """The recipe checked for the platform a create or sync runs for (errors raise), and the
    warnings its plan shows: the consistency rules', and one when the recipe is not for it."""
    found = [f"{f.rule.id}: {f.message}" for f in require_consistent(recipe, platform)]
    return tuple(found + [w for w in [undeclared(recipe, platform)] if w])
