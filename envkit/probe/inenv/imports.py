"""import:MOD and import-order:A,B: each in a fresh process."""

from __future__ import annotations

import importlib.util
import os

from .proc import run_module
from .report import Check, check, excerpt


def importable(mod: str) -> bool:
    try:
        return importlib.util.find_spec(mod) is not None
    except Exception:
        return False


def check_import(mod: str, timeout: float) -> Check:
    r = run_module("load", mod, timeout=timeout)
    if r["returncode"] == 0:
        return check("import:" + mod, "import " + mod, "pass", seconds=r["seconds"])
    why = "timed out" if r.get("timeout") else excerpt(r["stderr"])
    remedy = "install the package or fix its dependencies; the evidence names the missing piece"
    return check("import:" + mod, "import " + mod, "fail", why, remedy, seconds=r["seconds"])


def check_order(order: list[str], timeout: float) -> Check:
    cid = "import-order:" + ",".join(order)
    r = run_module("load", *order, timeout=timeout)
    if r["returncode"] == 0:
        return check(cid, "import " + " then ".join(order), "pass", seconds=r["seconds"])
    ev = "timed out" if r.get("timeout") else excerpt(r["stderr"])
    remedy = (
        "set MKL_THREADING_LAYER=GNU in the env's activation (envkit audit --fix)" if "MKL_THREADING_LAYER" in ev else "see the evidence"
    )
    return check(cid, "import " + " then ".join(order), "fail", ev, remedy, seconds=r["seconds"])


def mkl_side() -> list[str]:
    """What a trainer's parent imports before torch: numpy, and mkl when mkl-service is there."""
    mods = ["numpy"] if importable("numpy") else []
    if importable("mkl"):
        mods.append("mkl")
    return mods


ORIGIN_TITLE = "the toolchain's modules are the env's own"
TOOLCHAIN_MODULES = ("numpy", "scipy", "torch", "mkl", "threadpoolctl")


def check_origin(timeout: float) -> Check:
    """Where the env's python finds the toolchain's modules, as the user's own runs find them: a
    `pip install --user` copy in the user site comes ahead of the env's site-packages for every env
    of that Python version, so the env the probe passed is not the one that would run."""
    r = run_module("origins", *TOOLCHAIN_MODULES, timeout=timeout)
    seen = r["data"]
    if r["returncode"] != 0 or not isinstance(seen, dict):
        return check("origin", ORIGIN_TITLE, "fail", "timed out" if r.get("timeout") else excerpt(r["stderr"]), "see the evidence")
    modules = seen["modules"]
    if not modules:
        return check("origin", ORIGIN_TITLE, "skip", "none of " + ", ".join(TOOLCHAIN_MODULES) + " is installed")
    prefix, user_site = os.path.normpath(seen["prefix"]) + os.sep, os.path.normpath(seen["user_site"]) + os.sep
    foreign = []
    for mod, where in modules.items():
        origin = os.path.normpath(where["origin"])
        if not origin.startswith(prefix):
            kind = "the user site: pip install --user" if origin.startswith(user_site) else "PYTHONPATH or a .pth file"
            foreign.append(f"{mod} from {where['home']} ({kind})")
    if foreign:
        remedy = (
            "uninstall those copies (with the env active, python -m pip uninstall NAME removes the one found first), "
            "or keep this env off the user site: PYTHONNOUSERSITE: '1' under the recipe's threading.env"
        )
        return check("origin", ORIGIN_TITLE, "fail", "; ".join(foreign) + f", not the env ({seen['prefix']})", remedy, modules)
    return check("origin", ORIGIN_TITLE, "pass", ", ".join(modules) + " from the env", seconds=r["seconds"])
