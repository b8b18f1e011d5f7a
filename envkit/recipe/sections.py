"""The nested sections of a recipe, validated: toolchain, threading (and its env operations), probe."""

from __future__ import annotations

import re
from typing import Any

from envkit.core.names import VAR_RE
from envkit.recipe.checker import MODULE_RE, Checker, lowered
from envkit.recipe.fields import EXPECT_KEYS, FIELDS, default
from envkit.recipe.model import (
    BLAS_CHOICES,
    LAYER_CHOICES,
    OPENMP_CHOICES,
    TORCH_SOURCES,
    TORCH_VARIANTS,
    EnvAction,
    EnvOp,
)
from envkit.recipe.reserved import why_reserved
from envkit.recipe.yamlsource import PathKey, YamlDocument


# radon cc 26: one branch per toolchain field, pytorch's five sub-fields among them
def toolchain_section(c: Checker, value: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tc = c.mapping(("toolchain",), value, FIELDS["toolchain"])
    if tc is None:
        return out
    if "blas" in tc and (blas := c.choice(("toolchain", "blas"), tc["blas"], BLAS_CHOICES)):
        out["blas"] = blas
    if "mkl" in tc and tc["mkl"] is None:
        out["mkl"] = None  # null clears a value inherited through extends
    elif "mkl" in tc and (mkl := c.version_spec(("toolchain", "mkl"), tc["mkl"])) is not None:
        out["mkl"] = mkl
    if "openmp" in tc and (omp := c.choice(("toolchain", "openmp"), tc["openmp"], OPENMP_CHOICES)):
        out["openmp"] = omp
    if "pytorch" in tc:
        path: PathKey = ("toolchain", "pytorch")
        pt = c.mapping(path, tc["pytorch"], FIELDS["toolchain.pytorch"])
        if pt is not None:
            torch: dict[str, Any] = {}
            if "version" in pt and pt["version"] is None:
                torch["version"] = None
            elif "version" in pt and (ver := c.version_spec((*path, "version"), pt["version"])) is not None:
                torch["version"] = ver
            if "variant" in pt and (variant := c.choice((*path, "variant"), pt["variant"], TORCH_VARIANTS)):
                torch["variant"] = variant
            majors_minors = (
                ("cuda", 'a CUDA major.minor such as "12.4"'),
                ("cuda_arch", 'a compute capability major.minor such as "9.0" (H100, H200)'),
            )
            for key, what in majors_minors:
                if key in pt and pt[key] is None:
                    torch[key] = None  # null clears a value inherited through extends
                elif key in pt and (text := c.string((*path, key), pt[key])) is not None:
                    if re.match(r"^\d+\.\d+$", text):
                        torch[key] = text
                    else:
                        c.expect((*path, key), what, text)
            if "source" in pt and (source := c.choice((*path, "source"), pt["source"], TORCH_SOURCES)):
                torch["source"] = source
            out["pytorch"] = torch
    return out


def threading_section(c: Checker, doc: YamlDocument, value: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    th = c.mapping(("threading",), value, FIELDS["threading"])
    if th is None:
        return out
    if "mkl_threading_layer" in th:
        layer = c.choice(("threading", "mkl_threading_layer"), lowered(th["mkl_threading_layer"]), LAYER_CHOICES)
        if layer:
            out["mkl_threading_layer"] = layer
    for key in ("omp_num_threads", "mkl_num_threads", "openblas_num_threads"):
        if key in th:
            if th[key] is None:
                out[key] = None
            else:
                count = c.count(("threading", key), th[key])
                if count is not None:
                    out[key] = count
    if "env" in th:
        env = th["env"]
        if not isinstance(env, dict):
            c.expect(("threading", "env"), "a mapping of variable names to operations", env)
        else:
            ops: dict[str, EnvOp] = {}
            for name, spec in env.items():
                op = _env_op(c, doc, ("threading", "env", name), str(name), spec)
                if op is not None:
                    ops[op.name] = op
            out["env"] = ops
    return out


def _env_value(c: Checker, path: PathKey, value: object, *, integers: bool = True) -> str | None:
    """A variable's value is text. An integer is taken for `set` (OMP_NUM_THREADS: 4); a float
    never (YAML reads 1.10 as 1.1), nor a number for a path entry (append: [1, 2] is not a path)."""
    if isinstance(value, str):
        return value
    if integers and type(value) is int:
        return str(value)
    what = "a string" if integers else "a string (a path entry)"
    c.expect(path, f"{what}; quote numbers, booleans and empty values", value)
    return None


# radon cc 30: the four variable operations and their shorthands, each with its own field errors
def _env_op(c: Checker, doc: YamlDocument, path: PathKey, name: str, spec: object) -> EnvOp | None:
    if not VAR_RE.match(name):
        c.fail(path, f"invalid variable name {name!r}: must match [A-Za-z_][A-Za-z0-9_]*")
        return None
    reserved = why_reserved(name)
    if reserved:
        c.fail(path, f"'{name}' cannot be set by activation: it is {reserved}; pick another name")
        return None
    origin = doc.where(path)
    if not isinstance(spec, dict):
        value = _env_value(c, path, spec)
        return EnvOp(name, "set", value=value, origin=origin) if value is not None else None
    actions = [key for key in ("set", "unset", "prepend", "append") if key in spec]
    if c.mapping(path, spec, FIELDS["threading.env.*"]) is None:
        return None
    if len(actions) != 1:
        c.fail(path, f"expected exactly one of set|unset|prepend|append, found {len(actions)}")
        return None
    action = actions[0]
    separator = str(default("threading.env.*.separator"))
    if "separator" in spec:
        sep = spec["separator"]
        if not isinstance(sep, str) or len(sep) != 1 or sep.isalnum() or sep in "\n\r\0":
            c.expect((*path, "separator"), "a single punctuation character such as ':' or ';'", sep)
            return None
        if sep == "\\":  # tcsh's `:s` modifier, which removes an entry before it is added again, reads it as an escape
            c.fail((*path, "separator"), "a backslash cannot separate entries (csh and tcsh read it as an escape); use ':' or ';'")
            return None
        if action not in ("prepend", "append"):
            c.fail((*path, "separator"), "separator only applies to prepend/append")
        separator = sep
    if action == "set":
        value = _env_value(c, (*path, "set"), spec["set"])
        return EnvOp(name, "set", value=value, origin=origin) if value is not None else None
    if action == "unset":
        if spec["unset"] is not True:
            c.expect((*path, "unset"), "true", spec["unset"])
            return None
        return EnvOp(name, "unset", origin=origin)
    if not isinstance(spec[action], list):
        c.expect((*path, action), "a list of path entries (e.g. [/opt/x/lib])", spec[action])
        return None
    entries = c.str_list((*path, action), spec[action], lambda p, v: _env_value(c, p, v, integers=False))
    if entries is None or len(entries) != len(spec[action]):
        return None
    if not entries:
        c.fail((*path, action), "expected at least one entry")
        return None
    for index, entry in enumerate(entries):
        if entry == "" or separator in entry or "\n" in entry or "\0" in entry:
            c.fail((*path, action, index), f"path entries must be non-empty and contain neither {separator!r} nor a newline")
            return None
    list_action: EnvAction = "prepend" if action == "prepend" else "append"
    return EnvOp(name, list_action, entries=tuple(entries), separator=separator, origin=origin)


# radon cc 29: one branch per probe field (imports, orders, ddp, expect, timeout), each with its own errors
def probe_section(c: Checker, value: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pr = c.mapping(("probe",), value, FIELDS["probe"])
    if pr is None:
        return out

    def _module(path: PathKey, v: object) -> str | None:
        if not isinstance(v, str) or not MODULE_RE.match(v):
            c.expect(path, "a Python module name", v)
            return None
        return v

    if "imports" in pr:
        mods = c.str_list(("probe", "imports"), pr["imports"], _module)
        if mods is not None:
            out["imports"] = mods
    if "import_orders" in pr:
        orders = pr["import_orders"]
        if not isinstance(orders, list):
            c.expect(("probe", "import_orders"), "a list of module lists", orders)
        else:
            checked = []
            for index, order in enumerate(orders):
                if not isinstance(order, list) or len(order) < 2:
                    c.expect(("probe", "import_orders", index), "a list of at least two module names", order)
                    continue
                mods = c.str_list(("probe", "import_orders", index), order, _module)
                if mods is not None and len(mods) == len(order):
                    checked.append(tuple(mods))
            out["import_orders"] = checked
    if "ddp" in pr:
        ddp = pr["ddp"]
        if isinstance(ddp, bool):
            out["ddp"] = ddp
        else:
            dd = c.mapping(("probe", "ddp"), ddp, FIELDS["probe.ddp"])
            if dd is not None:
                if "enabled" in dd:
                    if isinstance(dd["enabled"], bool):
                        out["ddp"] = dd["enabled"]
                    else:
                        c.expect(("probe", "ddp", "enabled"), "true or false", dd["enabled"])
                if "nproc" in dd and (n := c.integer(("probe", "ddp", "nproc"), dd["nproc"], 1, 64, "an integer from 1 to 64")):
                    out["nproc"] = n
    if "expect" in pr:
        ex = c.mapping(("probe", "expect"), pr["expect"], EXPECT_KEYS)
        if ex is not None:
            expect: dict[str, Any] = {}
            if "blas" in ex and (b := c.choice(("probe", "expect", "blas"), ex["blas"], BLAS_CHOICES)):
                expect["blas"] = b
            if "mkl_threading_layer" in ex:
                layer = c.choice(("probe", "expect", "mkl_threading_layer"), lowered(ex["mkl_threading_layer"]), LAYER_CHOICES[:-1])
                if layer:
                    expect["mkl_threading_layer"] = layer
            for key in ("openmp_runtimes", "torch_threads"):
                if key in ex and (n := c.integer(("probe", "expect", key), ex[key], 0, 1 << 20, "a non-negative integer")) is not None:
                    expect[key] = n
            out["expect"] = expect
    if "timeout" in pr and (t := c.integer(("probe", "timeout"), pr["timeout"], 5, 3600, "seconds, an integer from 5 to 3600")):
        out["timeout"] = t
    return out
