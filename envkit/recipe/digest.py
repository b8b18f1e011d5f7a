"""Two fingerprints of a recipe, for locks and for sync.

- resolved: what the recipe compiles to (channels, platforms, conda and pip specs, activation),
  after `extends`. Editing a parent changes it; a comment or a reordered key does not. A lock
  records it, so a lock made before the recipe (or a parent) changed is known to be stale.
- sources: the bytes of every file in the `extends` chain. It needs nothing but the standard
  library to compute, so `envkit sync` can tell "nothing changed" without parsing YAML or loading
  the solver; when it differs, the resolved digest decides.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from envkit.core.digests import sha256

if TYPE_CHECKING:
    from envkit.recipe.model import Recipe


def resolved_digest(recipe: Recipe) -> str:
    """The recipe as it resolves on every platform it declares (this machine's when it declares
    none): extends merged, per_platform entries applied, compiled. Any change a lock would see
    changes it; the machine that computes it does not."""
    from envkit.recipe.compile import compile_recipe  # not on the quick no-op sync path

    compiled = {}
    for platform in recipe.platforms or (None,):
        c = compile_recipe(recipe, platform)
        compiled[c.platform if platform else "native"] = {
            "conda": [s.spec for s in c.conda_specs],
            "pip": list(c.pip_specs),
            "activation": list(c.activation.as_json()),
        }
    canonical = {"name": recipe.name, "channels": list(recipe.channels), "platforms": list(recipe.platforms), "compiled": compiled}
    return sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()


def sources_digest(chain: Sequence[str]) -> str | None:
    """None when a file of the chain is gone: the recipe has to be loaded to know more."""
    digest = sha256()
    for path in chain:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        digest.update(path.encode() + b"\0" + sha256(data).digest())
    return digest.hexdigest()
