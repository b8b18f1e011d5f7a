"""What activation must do, independent of any shell: the settings a recipe compiles to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envkit.core.cpus import PHYSICAL_CORES, physical_cores
from envkit.recipe.model import EnvOp


@dataclass(frozen=True)
class Setting:
    """One variable change plus why envkit makes it; `computed` values are resolved at write time."""

    op: EnvOp
    reason: str
    computed: str | None = None


@dataclass(frozen=True)
class ActivationSettings:
    """What activation sets, in the order it sets it: the recipe's threading policy and env entries."""

    settings: tuple[Setting, ...]

    def names(self) -> tuple[str, ...]:
        return tuple(s.op.name for s in self.settings)

    def as_json(self) -> tuple[dict[str, Any], ...]:
        """As locks and the recipe digest keep them: "computed" values stay unresolved, to be worked
        out on the machine that installs."""
        return tuple(
            {
                "name": s.op.name,
                "action": s.op.action,
                "value": s.op.value,
                "entries": list(s.op.entries),
                "separator": s.op.separator,
                "computed": s.computed,
            }
            for s in self.settings
        )


def resolve(settings: ActivationSettings, cores: int | None = None) -> tuple[EnvOp, ...]:
    """Concrete operations, with computed values filled in once, here, not at activation time."""
    out = []
    for setting in settings.settings:
        if setting.computed == PHYSICAL_CORES:
            n = cores if cores is not None else physical_cores()
            out.append(EnvOp(setting.op.name, "set", value=str(n), origin=setting.op.origin, computed=PHYSICAL_CORES))
        else:
            out.append(setting.op)
    return tuple(out)
