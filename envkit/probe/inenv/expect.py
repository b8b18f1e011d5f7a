"""expect: the recipe's probe.expect (blas, openmp_runtimes, mkl_threading_layer, torch_threads)
against what the runtimes check saw."""

from __future__ import annotations

from typing import Any

from .report import Check, check


def check_expect(cfg: dict[str, Any], runtimes_result: Check) -> Check:
    expect = cfg.get("expect") or {}
    if not expect:
        return check("expect", "recipe expectations", "skip", "the recipe states no probe.expect")
    summary = runtimes_result.get("data") or {}
    if runtimes_result["status"] == "skip":
        return check("expect", "recipe expectations", "skip", "needs the runtime inventory: " + runtimes_result["evidence"])
    if runtimes_result["status"] == "fail" and not summary.get("libraries"):
        return check("expect", "recipe expectations", "fail", "the runtime inventory failed", "fix the runtimes check first")
    problems: list[str] = []
    seen: list[str] = []
    if "blas" in expect:
        have = summary.get("blas", [])
        seen.append("blas={}".format(",".join(have)))
        if have != [expect["blas"]]:
            problems.append("blas: expected {}, loaded {}".format(expect["blas"], ",".join(have) or "none"))
    if "openmp_runtimes" in expect:
        seen.append("openmp_runtimes={}".format(summary.get("openmp_runtimes")))
        if summary.get("openmp_runtimes") != expect["openmp_runtimes"]:
            problems.append(
                "openmp_runtimes: expected {}, found {} ({})".format(
                    expect["openmp_runtimes"], summary.get("openmp_runtimes"), ",".join(summary.get("openmp_apis", []))
                )
            )
    if "mkl_threading_layer" in expect:
        seen.append("mkl_threading_layer={}".format(summary.get("mkl_threading_layer")))
        if summary.get("mkl_threading_layer") != expect["mkl_threading_layer"]:
            problems.append(
                "mkl_threading_layer: expected {}, MKL reports {}".format(expect["mkl_threading_layer"], summary.get("mkl_threading_layer"))
            )
    if "torch_threads" in expect:
        seen.append("torch_threads={}".format(summary.get("torch_threads")))
        if summary.get("torch_threads") != expect["torch_threads"]:
            problems.append("torch_threads: expected {}, got {}".format(expect["torch_threads"], summary.get("torch_threads")))
    if problems:
        return check(
            "expect",
            "recipe expectations",
            "fail",
            "; ".join(problems),
            "the env does not match its recipe; recreate it or fix the recipe",
            {"expect": expect},
        )
    return check("expect", "recipe expectations", "pass", ", ".join(seen), "", {"expect": expect})
