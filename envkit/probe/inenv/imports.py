"""import:MOD and import-order:A,B: each in a fresh process."""

from __future__ import annotations

import importlib.util

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
