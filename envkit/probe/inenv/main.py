"""The probe: read a JSON config on stdin, run every check, print one JSON report on stdout.

Every `import torch` costs seconds of CPU, so observations are shared where they are the same fact:
the DDP job is started first and the rest overlaps with it; a module that begins a passing import
order was imported first in a fresh process; an order that is a prefix of the torch-first child's
imports ran in that fresh process. Failures always get a process of their own, so the report says
which part broke."""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from . import PROBE_VERSION
from .ddp import child_order, ddp_checks, observation_tags, parent_ran
from .expect import check_expect
from .gpu import TITLE as GPU_TITLE
from .gpu import check_gpu
from .imports import check_import, check_order, check_origin, importable, mkl_side
from .inventory import check_runtimes
from .numeric import TITLE as NUMERIC_TITLE
from .numeric import check_numeric
from .proc import promote_all, run_module
from .proctree import children_map, kill_tree
from .report import Check, check
from .threads import check_threads


def observed_section(tag: str, shared: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
    """One section of a shared observation, or that observation made in a process of its own."""
    if shared is None or tag not in shared.get("sections", {}):
        shared = run_module("observe", tag, timeout=timeout)
    section = shared["sections"].get(tag)
    return dict(shared, data=section, returncode=0 if section else shared["returncode"])


def inventory(cfg: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The runtime observations in a process of their own (used when the DDP-style child failed)."""
    return run_module("seed_child", json.dumps(child_order(cfg)), "{}", json.dumps(observation_tags()), timeout=timeout)


def stop_on_signal(workdir: str | None) -> None:
    """SIGTERM (envkit stopping the probe, or dying: it is the probe's parent-death signal) stops
    every check with everything it started, removes the scratch dir, and ends the probe."""

    def stop(signum: int, frame: Any) -> None:
        try:
            for kid in children_map().get(os.getpid(), []):
                kill_tree(kid)
        finally:
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)
            os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


# radon cc 28: the probe's checks in the order they must run, each guarded so one failure still reports the rest
def run_checks(cfg: dict[str, Any]) -> list[Check]:
    timeout = float(cfg.get("timeout", 120))
    imports = list(cfg.get("imports", []))
    orders = [list(o) for o in cfg.get("import_orders", [])]
    torch = importable("torch")
    with ThreadPoolExecutor(max_workers=len(imports) + len(orders) + 4) as pool:
        fut_ddp = pool.submit(ddp_checks, cfg, timeout)
        seed_order = child_order(cfg) if torch else []

        def is_prefix(o: list[str]) -> bool:
            return o == seed_order[: len(o)]

        fut_orders = {tuple(o): pool.submit(check_order, o, timeout) for o in orders if not is_prefix(o)}
        first_of: dict[str, list[str]] = {}
        for o in orders:
            first_of.setdefault(o[0], o)
        side = mkl_side() if torch else []
        fut_imports = {m: pool.submit(check_import, m, timeout) for m in imports if m not in first_of and m not in side}
        fut_origin = pool.submit(check_origin, timeout)
        seed, gloo, observed = fut_ddp.result()
        promote_all()
        order_results: dict[tuple[str, ...], Check] = {}
        for o in orders:
            key = tuple(o)
            if key in fut_orders:
                order_results[key] = fut_orders[key].result()
            elif seed["status"] == "pass":
                how = "imported in this order by the DDP-style child (ddp-seed)"
                order_results[key] = check("import-order:" + ",".join(o), "import " + " then ".join(o), "pass", how)
            else:
                order_results[key] = check_order(o, timeout)
        checks = []
        for m in imports:
            if m in fut_imports:
                checks.append(fut_imports[m].result())
            elif m in side and m not in first_of:
                if "parent_imports" in seed.get("data", {}) and seed["status"] != "skip" and parent_ran(seed, gloo):
                    where = "first" if side[0] == m else "after " + ", ".join(side[: side.index(m)])
                    checks.append(check("import:" + m, "import " + m, "pass", f"imported {where} in a fresh process by the DDP parent"))
                else:
                    checks.append(check_import(m, timeout))
            elif order_results[tuple(first_of[m])]["status"] == "pass":
                covering = order_results[tuple(first_of[m])]
                checks.append(check("import:" + m, "import " + m, "pass", "imported first in a fresh process by " + covering["id"]))
            else:
                checks.append(check_import(m, timeout))
        checks += [order_results[tuple(o)] for o in orders]
        checks.append(fut_origin.result())
        checks += [seed, gloo]
        inv = observed if observed is not None else inventory(cfg, timeout)
        healthy = inv["returncode"] == 0
        runtimes = check_runtimes(inv, seed_order or child_order(cfg))
        checks.append(runtimes)
        shared = inv if healthy else None
        if importable("numpy"):
            checks.append(check_numeric(observed_section("NUMERIC", shared, timeout)))
        else:
            checks.append(check("numeric", NUMERIC_TITLE, "skip", "numpy is not installed"))
        checks.append(check_threads(cfg, inv, gloo))
        if torch:
            checks.append(check_gpu(observed_section("GPU", shared, timeout), cfg.get("torch_build")))
        else:
            checks.append(check("gpu", GPU_TITLE, "skip", "torch is not installed"))
        checks.append(check_expect(cfg, runtimes))
    return checks


def main() -> None:
    cfg = json.loads(sys.stdin.read() or "{}")
    stop_on_signal(cfg.get("workdir"))
    started = time.monotonic()
    checks = run_checks(cfg)
    doc = {
        "envkit_probe": PROBE_VERSION,
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "prefix": sys.prefix,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "seconds": round(time.monotonic() - started, 2),
        "checks": checks,
    }
    sys.stdout.write(json.dumps(doc) + "\n")


if __name__ == "__main__":
    main()
