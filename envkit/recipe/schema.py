"""Validate one recipe file into a layer of checked values, collecting every problem at once.

A layer is a dict holding only the fields the file sets; merging layers (extends) happens later
with an explicit rule per field, see merge.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import rattler

from envkit.core.credentials import credentials_in, where_credentials_go
from envkit.core.errors import Location, Problem
from envkit.core.names import NAME_RE, VAR_RE, is_relative_path
from envkit.recipe.model import (
    BLAS_CHOICES,
    KNOWN_PLATFORMS,
    LAYER_CHOICES,
    OPENMP_CHOICES,
    SCHEMA_VERSION,
    TORCH_SOURCES,
    TORCH_VARIANTS,
    EnvAction,
    EnvOp,
    Spec,
)
from envkit.recipe.reserved import why_reserved
from envkit.recipe.yamlsource import PathKey, YamlDocument, dotted

MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
VERSIONISH_RE = re.compile(r"^[0-9][0-9A-Za-z.*_+!-]*$")

Layer = dict[str, Any]


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "mapping"}.get(
        type(value), type(value).__name__
    )


def _layer(value: object) -> object:
    """MKL reads MKL_THREADING_LAYER without regard to case; so does the recipe (GNU as in the variable)."""
    return value.lower() if isinstance(value, str) else value


def _found(value: object) -> str:
    text = repr(value) if isinstance(value, str | int | float | bool) else _type_name(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Checker:
    def __init__(self, doc: YamlDocument, label: PathKey = (), problems: list[Problem] | None = None) -> None:
        self.doc = doc
        self.label = label  # where `doc` sits in the file (per_platform.osx-arm64), for messages
        self.problems: list[Problem] = problems if problems is not None else []

    def within(self, path: PathKey, value: object) -> _Checker:
        """A checker for one sub-mapping (a per_platform entry): paths relative to it, problems
        shared, positions and messages those of the whole file."""
        n = len(path)
        positions = {p[n:]: loc for p, loc in self.doc.positions.items() if p[:n] == path}
        positions.setdefault((), self.doc.where(path))
        numbers = {p[n:]: text for p, text in self.doc.numbers.items() if p[:n] == path}
        return _Checker(YamlDocument(self.doc.file, value, positions, numbers), (*self.label, *path), self.problems)

    def fail(self, path: PathKey, message: str) -> None:
        self.problems.append(Problem(self.doc.where(path), dotted((*self.label, *path)), message))

    def expect(self, path: PathKey, expected: str, value: object) -> None:
        self.fail(path, f"expected {expected}, found {_found(value)}")

    def mapping(self, path: PathKey, value: object, allowed: tuple[str, ...]) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.expect(path, "a mapping", value)
            return None
        for key in value:
            if key not in allowed:
                import difflib  # a suggestion: only for a name that is wrong

                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else f" (allowed: {', '.join(allowed)})"
                self.fail((*path, key), f"unknown key '{key}'{hint}")
        return value

    def spec_text(self, path: PathKey, value: object) -> str | None:
        """A package requirement: text only. A number in a package list is a slip (`- 1.26` under
        numpy, or 3.10 that YAML reads as 3.1), never a package name."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            self.fail(
                path, f'expected a requirement string, found number {value!r} (a version belongs in its package\'s spec: "numpy 1.26")'
            )
            return None
        return self.string(path, value)

    def string(self, path: PathKey, value: object) -> str | None:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            self.expect(path, "a string", value)
            return None
        if isinstance(value, float) and path[-1] in ("python", "mkl", "version", "cuda", "cuda_arch"):
            # 3.10 read as a float becomes 3.1: refuse rather than silently change the meaning.
            written = self.doc.numbers.get(path, repr(value))
            read = "" if written == repr(value) else f", which YAML reads as {value!r}"
            self.fail(path, f'expected a quoted string, found number {written}{read} (write it as "{written}")')
            return None
        return str(value)

    def choice(self, path: PathKey, value: object, choices: tuple[str, ...]) -> str | None:
        if not isinstance(value, str) or value not in choices:
            import difflib  # a suggestion: only for a name that is wrong

            close = difflib.get_close_matches(str(value), choices, n=1) if isinstance(value, str) else []
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            self.fail(path, f"expected one of {'|'.join(choices)}, found {_found(value)}{hint}")
            return None
        return value

    def integer(self, path: PathKey, value: object, low: int, high: int, expected: str) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.expect(path, expected, value)
            return None
        return value

    def version_spec(self, path: PathKey, value: object) -> str | None:
        """A conda version spec such as "<2024.1" or "2.5.*"."""
        text = self.string(path, value)
        if text is None:
            return None
        try:
            rattler.VersionSpec(text)
        except Exception as exc:  # rattler raises its own exception types
            self.fail(path, f"invalid version spec {text!r}: {_first_line(exc)}")
            return None
        return text

    def str_list(self, path: PathKey, value: object, item: Callable[[PathKey, object], Any]) -> list[Any] | None:
        if isinstance(value, str):
            value = [value]
            single = True
        else:
            single = False
        if not isinstance(value, list):
            self.expect(path, "a list", value)
            return None
        out = []
        for index, entry in enumerate(value):
            checked = item(path if single else (*path, index), entry)
            if checked is not None:
                out.append(checked)
        return out

    def count(self, path: PathKey, value: object) -> int | str | None:
        if value == "physical-cores":
            return "physical-cores"
        return self.integer(path, value, 1, 4096, "a positive integer or 'physical-cores'")


def spec_name(match: rattler.MatchSpec) -> str:
    """The package a MatchSpec names ("" or a pattern when it names none exactly)."""
    return getattr(match.name, "normalized", None) or str(match.name)


def conda_spec(text: str) -> Spec:
    """Parse a conda MatchSpec the lenient way users write them and return its strict form."""
    match = rattler.MatchSpec(text, strict=False)
    name = spec_name(match)
    if not name or any(ch in name for ch in "*?[]"):
        raise ValueError("a package spec must name one package exactly")
    normalized = str(match)
    rattler.MatchSpec(normalized, strict=True)
    return Spec(text=text, name=name, normalized=normalized)


def pip_spec(text: str) -> Spec:
    """Raises packaging's InvalidRequirement (a ValueError) for a bad one."""
    from packaging.requirements import Requirement  # costs ~50 ms: loaded for recipes with pip lists only
    from packaging.utils import canonicalize_name

    req = Requirement(text)
    return Spec(text=text, name=canonicalize_name(req.name), normalized=str(req))


TOP_KEYS = (
    "envkit",
    "name",
    "description",
    "extends",
    "channels",
    "platforms",
    "python",
    "packages",
    "pip",
    "toolchain",
    "threading",
    "probe",
    "force",
    "per_platform",
)
# what a per_platform entry may change for its platform
PLATFORM_KEYS = ("python", "packages", "pip", "toolchain", "threading")
EXPECT_KEYS = ("blas", "openmp_runtimes", "mkl_threading_layer", "torch_threads")
# every mapping of a recipe and the keys it takes, by dotted path (`*`: any name); the validators
# below take their keys from here, and docs/reference/recipe.md is generated from it
FIELDS: dict[str, tuple[str, ...]] = {
    "": TOP_KEYS,
    "per_platform.*": PLATFORM_KEYS,
    "toolchain": ("blas", "mkl", "openmp", "pytorch"),
    "toolchain.pytorch": ("version", "variant", "cuda", "cuda_arch", "source"),
    "threading": ("mkl_threading_layer", "omp_num_threads", "mkl_num_threads", "openblas_num_threads", "env"),
    "threading.env.*": ("set", "unset", "prepend", "append", "separator"),
    "probe": ("imports", "import_orders", "ddp", "expect", "timeout"),
    "probe.ddp": ("enabled", "nproc"),
    "probe.expect": EXPECT_KEYS,
}


def validate_layer(doc: YamlDocument) -> tuple[Layer, list[Problem]]:
    """Check every field of one file; return what is valid plus every problem found."""
    c = _Checker(doc)
    layer: Layer = {}
    root = c.mapping((), doc.data, TOP_KEYS)
    if root is None:
        return layer, c.problems
    if "envkit" not in root:
        c.fail((), f"missing 'envkit: {SCHEMA_VERSION}' (the recipe schema version)")
    elif type(root["envkit"]) is not int or root["envkit"] != SCHEMA_VERSION:  # 1.0 and true are not 1
        c.fail(("envkit",), f"unsupported schema version {_found(root['envkit'])}; this envkit reads version {SCHEMA_VERSION}")
    if "name" not in root:
        c.fail((), "missing 'name'")
    else:
        name = root["name"]
        if not isinstance(name, str) or not NAME_RE.match(name):
            c.expect(("name",), "a lowercase identifier ([a-z0-9][a-z0-9_-]*)", name)
        else:
            layer["name"] = name
    if "description" in root:
        desc = root["description"]
        if isinstance(desc, str):
            layer["description"] = desc.strip()
        else:
            c.expect(("description",), "a string", desc)
    if "extends" in root:

        def _parent(path: PathKey, value: object) -> str | None:
            if not isinstance(value, str) or not NAME_RE.match(value):
                c.expect(path, "a recipe name", value)
                return None
            return value

        parents = c.str_list(("extends",), root["extends"], _parent)
        if parents is not None:
            layer["extends"] = parents
    if "channels" in root:

        def _channel(path: PathKey, value: object) -> str | None:
            if not isinstance(value, str) or not value.strip() or any(ch.isspace() for ch in value):
                c.expect(path, "a channel name or URL", value)
                return None
            if held := credentials_in(value):
                c.fail(
                    path,
                    f"the channel URL holds {held}, which every lock, record and export of this recipe would publish; {where_credentials_go(value)}",
                )
                return None
            if is_relative_path(value):  # rattler took './ch' for the channel named 'ch' on anaconda.org
                c.fail(
                    path,
                    f"'{value}' is a path relative to the working directory or a home folder, so it names another "
                    "channel on each machine; give a channel name, a URL or an absolute path",
                )
                return None
            return value.rstrip("/")

        channels = c.str_list(("channels",), root["channels"], _channel)
        if channels is not None:
            layer["channels"] = channels
    if "platforms" in root:
        platforms = c.str_list(("platforms",), root["platforms"], lambda p, v: c.choice(p, v, KNOWN_PLATFORMS))
        if platforms is not None:
            _each_platform_once(c, root["platforms"])
            layer["platforms"] = platforms
    _platform_fields(c, root, layer)
    if "probe" in root:
        layer["probe"] = _probe(c, root["probe"])
    if "per_platform" in root:
        layer["per_platform"] = _per_platform(c, root["per_platform"])
    if "force" in root:

        def _rule(path: PathKey, value: object) -> str | None:
            if not isinstance(value, str) or not re.match(r"^[A-Z]{2,4}\d{3}$", value):
                c.expect(path, "a consistency rule id such as RC004", value)
                return None
            return value

        forced = c.str_list(("force",), root["force"], _rule)
        if forced is not None:
            layer["force"] = forced
    layer["origins"] = _origins(doc, layer)
    return layer, c.problems


def _platform_fields(c: _Checker, root: dict[str, Any], layer: Layer) -> None:
    """The fields a per_platform entry may also set: python, packages, pip, toolchain, threading."""
    doc = c.doc
    if "python" in root:
        py = c.string(("python",), root["python"])
        if py is not None:
            try:
                python_spec(py)
                layer["python"] = py
            except Exception as exc:  # rattler raises its own exception types
                c.fail(("python",), f"invalid python version {py!r}: {_first_line(exc)}")
    if "packages" in root:

        def _conda(path: PathKey, value: object) -> Spec | None:
            text = c.spec_text(path, value)
            if text is None:
                return None
            try:
                spec = conda_spec(text)
            except Exception as exc:
                c.fail(path, f"invalid conda spec {text!r}: {_first_line(exc)}")
                return None
            return Spec(spec.text, spec.name, spec.normalized, doc.where(path))

        packages = c.str_list(("packages",), root["packages"], _conda)
        if packages is not None:
            _no_duplicate_names(c, ("packages",), packages)
            layer["packages"] = packages
    if "pip" in root:

        def _pip(path: PathKey, value: object) -> Spec | None:
            text = c.spec_text(path, value)
            if text is None:
                return None
            try:
                spec = pip_spec(text)
            except ValueError as exc:  # packaging's InvalidRequirement
                c.fail(path, f"invalid PEP 508 requirement {text!r}: {_first_line(exc)}")
                return None
            return Spec(spec.text, spec.name, spec.normalized, doc.where(path))

        pips = c.str_list(("pip",), root["pip"], _pip)
        if pips is not None:
            _no_duplicate_names(c, ("pip",), pips)
            layer["pip"] = pips
    if "toolchain" in root:
        layer["toolchain"] = _toolchain(c, root["toolchain"])
    if "threading" in root:
        layer["threading"] = _threading(c, doc, root["threading"])


def _per_platform(c: _Checker, value: object) -> dict[str, Layer]:
    out: dict[str, Layer] = {}
    entries = c.mapping(("per_platform",), value, KNOWN_PLATFORMS)
    for platform, entry in (entries or {}).items():
        if platform not in KNOWN_PLATFORMS:
            continue
        sub = c.within(("per_platform", platform), entry)
        fields = sub.mapping((), entry, PLATFORM_KEYS)
        if fields is None:
            continue
        layer: Layer = {}
        _platform_fields(sub, fields, layer)
        layer["origins"] = _origins(sub.doc, layer)
        out[platform] = layer
    return out


# Fields whose value becomes a spec or a setting: errors and solver hints point at their line.
ORIGIN_FIELDS: tuple[PathKey, ...] = (
    ("name",),
    ("python",),
    ("channels",),
    ("platforms",),
    ("toolchain", "blas"),
    ("toolchain", "mkl"),
    ("toolchain", "openmp"),
    ("toolchain", "pytorch"),
    ("toolchain", "pytorch", "version"),
    ("toolchain", "pytorch", "variant"),
    ("toolchain", "pytorch", "cuda"),
    ("toolchain", "pytorch", "cuda_arch"),
    ("toolchain", "pytorch", "source"),
    ("threading", "mkl_threading_layer"),
    ("threading", "omp_num_threads"),
    ("threading", "mkl_num_threads"),
    ("threading", "openblas_num_threads"),
)


def _origins(doc: YamlDocument, layer: Layer) -> dict[str, Location]:
    out = {}
    for path in ORIGIN_FIELDS:
        value: Any = layer
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None and path in doc.positions:
            out[dotted(path)] = doc.positions[path]
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def python_spec(py: str) -> str:
    text = f"python={py}" if VERSIONISH_RE.match(py) else f"python {py}"
    return str(rattler.MatchSpec(text, strict=False))


def _no_duplicate_names(c: _Checker, path: PathKey, specs: list[Spec]) -> None:
    seen: dict[str, int] = {}
    for index, spec in enumerate(specs):
        if spec.name in seen:
            c.fail((*path, index), f"'{spec.name}' is listed twice (also item {seen[spec.name]}); keep one spec per package")
        seen[spec.name] = index


def _each_platform_once(c: _Checker, value: object) -> None:
    """A platform listed twice is locked and checked twice, and an empty list reads as "none" while
    envkit would take it as "the machine it runs on" (what leaving the key out says): both refused."""
    if value == []:
        c.fail(("platforms",), "an empty list; name the platforms the recipe is for, or leave 'platforms' out for the machine it runs on")
    seen: dict[str, int] = {}
    for index, entry in enumerate(value if isinstance(value, list) else []):
        if isinstance(entry, str) and entry in seen:
            c.fail(("platforms", index), f"'{entry}' is listed twice (also item {seen[entry]}); list each platform once")
        seen.setdefault(str(entry), index)


def _toolchain(c: _Checker, value: object) -> dict[str, Any]:
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


def _threading(c: _Checker, doc: YamlDocument, value: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    th = c.mapping(("threading",), value, FIELDS["threading"])
    if th is None:
        return out
    if "mkl_threading_layer" in th:
        layer = c.choice(("threading", "mkl_threading_layer"), _layer(th["mkl_threading_layer"]), LAYER_CHOICES)
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


def _env_value(c: _Checker, path: PathKey, value: object, *, integers: bool = True) -> str | None:
    """A variable's value is text. An integer is taken for `set` (OMP_NUM_THREADS: 4); a float
    never (YAML reads 1.10 as 1.1), nor a number for a path entry (append: [1, 2] is not a path)."""
    if isinstance(value, str):
        return value
    if integers and type(value) is int:
        return str(value)
    what = "a string" if integers else "a string (a path entry)"
    c.expect(path, f"{what}; quote numbers, booleans and empty values", value)
    return None


def _env_op(c: _Checker, doc: YamlDocument, path: PathKey, name: str, spec: object) -> EnvOp | None:
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
    separator = ":"
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


def _probe(c: _Checker, value: object) -> dict[str, Any]:
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
                layer = c.choice(("probe", "expect", "mkl_threading_layer"), _layer(ex["mkl_threading_layer"]), LAYER_CHOICES[:-1])
                if layer:
                    expect["mkl_threading_layer"] = layer
            for key in ("openmp_runtimes", "torch_threads"):
                if key in ex and (n := c.integer(("probe", "expect", key), ex[key], 0, 1 << 20, "a non-negative integer")) is not None:
                    expect[key] = n
            out["expect"] = expect
    if "timeout" in pr and (t := c.integer(("probe", "timeout"), pr["timeout"], 5, 3600, "seconds, an integer from 5 to 3600")):
        out["timeout"] = t
    return out
