"""The one rule for names envkit gives out and accepts: recipes, recipe sources, envs. Kept apart
from the recipe model so the quick commands can check a name without loading it."""

from __future__ import annotations

import re

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")

# what conda refuses in an env's name, and so in the folder of an env it makes
# (conda.base.constants.PREFIX_NAME_DISALLOWED_CHARS)
CONDA_NAME_REFUSES = frozenset("/ :#")
