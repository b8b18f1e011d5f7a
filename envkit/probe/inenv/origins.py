"""Child: where this python finds the toolchain's modules (check "origin"), found, not imported:
a child, like the user's own runs, sees PYTHONPATH, the user site and .pth files."""

import importlib.util
import json
import os
import site
import sys

modules = {}
for _mod in sys.argv[1:]:
    try:
        _spec = importlib.util.find_spec(_mod)
    except Exception:  # noqa: S112 - a module that cannot even be found is the import checks' to tell
        continue
    if _spec is not None and _spec.origin and _spec.origin not in ("built-in", "frozen"):
        _folder = os.path.dirname(_spec.origin)
        modules[_mod] = {"origin": _spec.origin, "home": os.path.dirname(_folder) if _spec.submodule_search_locations else _folder}
print("ENVKIT-JSON:" + json.dumps({"prefix": sys.prefix, "user_site": site.getusersitepackages(), "modules": modules}))
