"""The recipe's fields, in one table: the keys each mapping takes (the validators read them), how
`extends` combines a parent's value with a child's (envkit.recipe.merge applies it), the value a
recipe has where no file sets it (envkit.recipe.loader applies it), and whether a per_platform
entry may set it. docs/reference/recipe.md is generated from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Merge = Literal[
    "not merged",  # read from each file alone
    "never inherited",  # the child's alone
    "child wins",  # a scalar, or a value replaced whole
    "child first",  # a list: the child's order, then the parent's not yet listed
    "parent first",  # a list: the parent's, then the child's not yet listed
    "by name",  # specs keyed by package name: the child's replaces in place, new ones appended
    "key by key",  # a mapping merged deeply: the child's scalars win
    "per platform",  # each platform's entry merged over the parent's by these same rules
]


@dataclass(frozen=True)
class Field:
    path: str  # dotted, `*` for any name (a platform, a variable)
    merge: Merge = "child wins"
    default: object = None  # None: unset (the recipe says nothing; for platforms, the machine it runs on)
    per_platform: bool = False  # a per_platform entry may set it for its platform
    doc: str = ""


TABLE: tuple[Field, ...] = (
    Field("envkit", "not merged", doc="the schema version, 1"),
    Field("name", "never inherited", doc="required, the file's stem; the env's default name"),
    Field("description", default=""),
    Field("extends", "never inherited", (), doc="recipes this one builds on; a later one wins over an earlier"),
    Field("channels", "child first", doc="required, here or in a recipe it extends"),
    Field("platforms", default=(), doc="none: the machine it runs on"),
    Field("python", per_platform=True, doc="a version spec"),
    Field("packages", "by name", (), per_platform=True, doc="conda MatchSpecs"),
    Field("pip", "by name", (), per_platform=True, doc="PEP 508 requirements"),
    Field("toolchain", "key by key", per_platform=True),
    Field("toolchain.blas"),
    Field("toolchain.mkl", doc="a version spec"),
    Field("toolchain.openmp"),
    Field("toolchain.pytorch", "key by key"),
    Field("toolchain.pytorch.version"),
    Field("toolchain.pytorch.variant", default="cpu"),
    Field("toolchain.pytorch.cuda"),
    Field("toolchain.pytorch.cuda_arch"),
    Field("toolchain.pytorch.source", default="conda-forge"),
    Field("threading", "key by key", per_platform=True),
    Field("threading.mkl_threading_layer"),
    Field("threading.omp_num_threads", doc="an integer or physical-cores"),
    Field("threading.mkl_num_threads"),
    Field("threading.openblas_num_threads"),
    Field("threading.env", "key by key", (), doc="by variable name: the child's operation wins"),
    Field("threading.env.*.set"),
    Field("threading.env.*.unset"),
    Field("threading.env.*.prepend"),
    Field("threading.env.*.append"),
    Field("threading.env.*.separator", default=":"),
    Field("probe", "key by key", per_platform=True, doc="what the probe expects may differ by platform (its BLAS)"),
    Field("probe.imports", "parent first", ()),
    Field("probe.import_orders", "parent first", ()),
    Field("probe.ddp", default=True, doc="true, false, or a mapping"),
    Field("probe.ddp.enabled", default=True),
    Field("probe.ddp.nproc", default=2, doc="ranks per node, 1 to 64"),
    Field("probe.expect", default=()),
    Field("probe.expect.blas"),
    Field("probe.expect.openmp_runtimes"),
    Field("probe.expect.mkl_threading_layer"),
    Field("probe.expect.torch_threads"),
    Field("probe.timeout", default=120, doc="seconds"),
    Field(
        "require_proof",
        "parent first",
        (),
        doc="machine kinds the lock must hold a passing proof for, as `recipes check --require-proof` names them",
    ),
    Field("force", "parent first", (), doc="rule ids whose risk the recipe accepts"),
    Field("per_platform", "per platform"),
)
BY_PATH = {field.path: field for field in TABLE}


def keys_of(mapping: str) -> tuple[str, ...]:
    """The keys a mapping takes, by its dotted path ("" the top level), in the table's order."""
    depth = mapping.count(".") + 1 if mapping else 0
    return tuple(
        f.path.rsplit(".", 1)[-1] for f in TABLE if f.path.count(".") == depth and (f.path.rsplit(".", 1)[0] if depth else "") == mapping
    )


def default(path: str) -> object:
    return BY_PATH[path].default


TOP_KEYS = keys_of("")
PLATFORM_KEYS = tuple(f.path for f in TABLE if f.per_platform)  # what a per_platform entry may change
EXPECT_KEYS = keys_of("probe.expect")
# every mapping of a recipe and the keys it takes (`*`: any name)
FIELDS: dict[str, tuple[str, ...]] = {
    "": TOP_KEYS,
    "per_platform.*": PLATFORM_KEYS,
    **{m: keys_of(m) for m in ("toolchain", "toolchain.pytorch", "threading", "threading.env.*", "probe", "probe.ddp", "probe.expect")},
}
