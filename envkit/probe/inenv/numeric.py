"""Numeric sanity: matmul and solve against a pure-Python reference, numpy against torch. Observed
in a child (one that already imported numpy/torch when it can share that cost)."""

from __future__ import annotations

import random
from typing import Any

from .report import Check, check, excerpt

TITLE = "numeric sanity (matmul, solve, numpy vs torch)"


def observe() -> dict[str, float]:
    import numpy as np

    rng = random.Random(7)  # noqa: S311 - test data, not secrets: the same matrices on every run
    n = 24
    a = [[rng.uniform(-1, 1) + (n if i == j else 0) for j in range(n)] for i in range(n)]
    b = [[rng.uniform(-1, 1) for j in range(n)] for i in range(n)]
    ref = [[sum(a[i][k] * b[k][j] for k in range(n)) for j in range(n)] for i in range(n)]
    out: dict[str, float] = {}
    matrix_a, matrix_b = np.array(a), np.array(b)
    product = matrix_a @ matrix_b
    out["numpy_matmul_err"] = float(np.max(np.abs(product - np.array(ref))))
    x = np.linalg.solve(matrix_a, matrix_b[:, 0])
    out["numpy_solve_residual"] = float(np.max(np.abs(matrix_a @ x - matrix_b[:, 0])))
    try:
        import torch
    except ImportError:
        return out
    theirs = torch.tensor(a, dtype=torch.float64) @ torch.tensor(b, dtype=torch.float64)
    out["torch_vs_numpy_err"] = float(np.max(np.abs(theirs.numpy() - product)))
    return out


def classify(data: dict[str, float]) -> tuple[str, str, str]:
    """(status, evidence, remedy): every error below 1e-8 passes."""
    bad = {k: v for k, v in data.items() if not v <= 1e-8}  # NaN fails too
    evidence = ", ".join(f"{k}={v:.2e}" for k, v in sorted(data.items()))
    if bad:
        return "fail", evidence, "BLAS returns wrong results: mixed BLAS copies or a bad MKL_INTERFACE_LAYER are the usual causes"
    return "pass", evidence, ""


def check_numeric(observed: dict[str, Any]) -> Check:
    """From the NUMERIC section of an observation (see observe.py)."""
    data = observed.get("data")
    if observed["returncode"] != 0 or not data:
        error = (observed.get("sections") or {}).get("ERR-NUMERIC")
        ev = f"the numeric check raised {error}" if error else ("timed out" if observed.get("timeout") else excerpt(observed["stderr"]))
        return check("numeric", TITLE, "fail", ev, "fix the import failure first", seconds=observed["seconds"])
    status, evidence, remedy = classify(data)
    return check("numeric", TITLE, status, evidence, remedy, data, observed["seconds"])
