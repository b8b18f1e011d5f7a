"""The env record as typed data: what etc/envkit/record.json holds, read once at the edge.

`EnvRecord.from_json` takes what any envkit wrote (version 1 records, from before activation kept
its tag, included) and what a hand or a damaged disk left: a part that is not what envkit writes
is taken as absent (None), so a command that does not need that part still runs and one that does
says so. The activation's operations and carried values stay JSON here: they become shell text,
so envkit.activation.writer checks them where scripts are made and refuses a bad one in one line.
`to_json` writes the current version; keys a later envkit added are kept as they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, TypeAlias

from envkit.solve.packages import PlannedPackage

if TYPE_CHECKING:  # the record is read without YAML or the solver (a no-op sync)
    from envkit.recipe.model import Recipe

JSON: TypeAlias = "str | int | float | bool | list[JSON] | dict[str, JSON] | None"
JSONObject: TypeAlias = "dict[str, JSON]"

RECORD_VERSION = 2
READABLE_VERSIONS = (1, 2)
# the source of a record `audit --fix` wrote for an env envkit did not make: activation settings
# alone, no recipe and no package list
FIX_SOURCE = "audit --fix"


def _str(value: JSON | object) -> str | None:
    return value if isinstance(value, str) else None


def _strs(value: JSON | object) -> tuple[str, ...] | None:
    """A list of strings, or None where it is not one (an entry of another kind spoils it)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return tuple(str(v) for v in value)


def _flag(value: JSON | object) -> bool:
    return value is True


@dataclass(frozen=True)
class RecipeRef:
    """Where the env's recipe came from, and the fingerprints sync compares (envkit.recipe.digest)."""

    name: str | None = None
    source: str | None = None  # "file", "team:NAME", "shipped", or FIX_SOURCE
    path: str | None = None
    commit: str | None = None
    chain: tuple[str, ...] | None = None  # the files `extends` read, in order
    sources_digest: str | None = None
    resolved_digest: str | None = None

    @classmethod
    def from_json(cls, data: JSON) -> RecipeRef | None:
        if not isinstance(data, dict):
            return None
        return cls(
            _str(data.get("name")),
            _str(data.get("source")),
            _str(data.get("path")),
            _str(data.get("commit")),
            _strs(data.get("chain")),
            _str(data.get("sources_digest")),
            _str(data.get("resolved_digest")),
        )

    @classmethod
    def of(cls, recipe: Recipe) -> RecipeRef:
        """A loaded recipe's origin and fingerprints, as create and sync record them."""
        from envkit.recipe.digest import resolved_digest, sources_digest

        o = recipe.origin
        return cls(recipe.name, o.source, o.path, o.commit, tuple(recipe.chain), sources_digest(recipe.chain), resolved_digest(recipe))

    def to_json(self) -> JSONObject:
        out: JSONObject = {"name": self.name, "source": self.source, "path": self.path, "commit": self.commit}
        if self.chain is not None:
            out["chain"] = list(self.chain)
        if self.sources_digest is not None or self.resolved_digest is not None:
            out["sources_digest"], out["resolved_digest"] = self.sources_digest, self.resolved_digest
        return out


@dataclass(frozen=True)
class LockRef:
    """The lock file an env was installed from, as it was then."""

    path: str | None
    digest: str | None
    frozen: bool = False  # installed as it was, though maybe stale (--frozen)
    stale: bool = False  # its recipe had changed since it was locked: `envkit list` says so

    @classmethod
    def from_json(cls, data: JSON) -> LockRef | None:
        if not isinstance(data, dict):
            return None
        return cls(_str(data.get("path")), _str(data.get("digest")), _flag(data.get("frozen")), _flag(data.get("stale")))

    def to_json(self) -> JSONObject:
        return {"path": self.path, "digest": self.digest, "frozen": self.frozen, "stale": self.stale}


@dataclass(frozen=True)
class Provenance:
    """The record's recipe and lock entries, as create and sync write them."""

    recipe: RecipeRef
    lock: LockRef | None = None


@dataclass(frozen=True)
class RecordedSpec:
    """A spec the env was solved for: the env's request to conda."""

    spec: str
    reason: str | None = None
    origin: str | None = None

    def to_json(self) -> JSONObject:
        return {"spec": self.spec, "reason": self.reason, "origin": self.origin}


@dataclass(frozen=True)
class RecordedChannel:
    name: str
    url: str  # as this machine reached it (a mirror's, where one was used)


@dataclass(frozen=True)
class InstalledWheel:
    """A pip wheel envkit installed, and the URL that brings exactly it back ("" for an index's)."""

    name: str
    version: str
    url: str = ""

    @classmethod
    def from_report(cls, entry: Mapping[str, str]) -> InstalledWheel:
        """From pip's report as envkit.pip.install reads it (name, version, url)."""
        return cls(entry["name"], entry["version"], entry.get("url") or "")

    def as_report(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "url": self.url}

    def to_json(self) -> JSONObject:
        return {"name": self.name, "version": self.version, "url": self.url}


@dataclass(frozen=True)
class ActivationSection:
    """What envkit's activation scripts hold, and the digests a no-op sync compares them by."""

    ops: JSON = None  # checked where scripts are made (envkit.activation.writer.ops_from_json)
    carried: JSON = None  # checked likewise (carried_from_json)
    tag: str | None = None  # absent in version 1: read back from the env's sh script
    format: int | None = None  # envkit.activation.SCRIPTS_FORMAT of the files written
    files: tuple[str, ...] | None = None  # relative to the prefix
    sha256: Mapping[str, str] | None = None  # file -> digest of what was written

    @classmethod
    def from_json(cls, data: JSON) -> ActivationSection | None:
        if not isinstance(data, dict):
            return None
        form = data.get("format")
        digests = data.get("sha256")
        return cls(
            data.get("ops"),
            data.get("carried"),
            _str(data.get("tag")),
            form if isinstance(form, int) and not isinstance(form, bool) else None,
            _strs(data.get("files")),
            {str(k): v for k, v in digests.items() if isinstance(v, str)} if isinstance(digests, dict) else None,
        )

    def to_json(self) -> JSONObject:
        out: JSONObject = {"ops": self.ops}
        if self.carried is not None:
            out["carried"] = self.carried
        out["tag"], out["format"] = self.tag, self.format
        if self.files is not None:
            out["files"] = list(self.files)
        if self.sha256 is not None:
            out["sha256"] = dict(self.sha256)
        return out

    def set_values(self) -> list[tuple[str, str]]:
        """(name, value) of each `set` operation, unchecked: for comparing, never for scripts."""
        ops = self.ops if isinstance(self.ops, list) else []
        return [(str(op.get("name")), str(op.get("value", ""))) for op in ops if isinstance(op, dict) and op.get("action") == "set"]

    def computed(self) -> list[tuple[str, str, str]]:
        """(name, how, value) of each operation whose value was worked out where the scripts were written."""
        ops = self.ops if isinstance(self.ops, list) else []
        return [
            (str(op.get("name")), str(op["computed"]), str(op.get("value"))) for op in ops if isinstance(op, dict) and op.get("computed")
        ]


def _package(data: JSON) -> PlannedPackage | None:
    if not isinstance(data, dict):
        return None
    name, version, build = _str(data.get("name")), _str(data.get("version")), _str(data.get("build"))
    if name is None or version is None or build is None:
        return None
    role = data.get("role")
    return PlannedPackage(
        name,
        version,
        build,
        str(data.get("channel") or ""),
        str(data.get("subdir") or ""),
        str(data.get("url") or ""),
        _str(data.get("sha256")),
        role if isinstance(role, str) else None,
        _strs(data.get("depends")) or (),
    )


def _specs(data: JSON) -> tuple[RecordedSpec, ...] | None:
    if not isinstance(data, list):
        return None
    return tuple(
        RecordedSpec(str(s["spec"]), _str(s.get("reason")), _str(s.get("origin"))) for s in data if isinstance(s, dict) and "spec" in s
    )


def _wheels(data: JSON) -> tuple[InstalledWheel, ...]:
    if not isinstance(data, list):
        return ()
    return tuple(
        InstalledWheel(str(p["name"]), str(p.get("version")), str(p.get("url") or ""))
        for p in data
        if isinstance(p, dict) and p.get("name")
    )


def _stamps(data: JSON) -> Mapping[str, tuple[int, int]] | None:
    if not isinstance(data, dict):
        return None
    out = {}
    for name, value in data.items():
        if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value)):
            return None
        out[name] = (int(value[0]), int(value[1]))  # type: ignore[arg-type]  # checked just above
    return out


_KNOWN = frozenset(
    [
        "envkit_record_version",
        "envkit_version",
        "created",
        "updated",
        "recipe",
        "platform",
        "channels",
        "specs",
        "pip",
        "virtual_packages",
        "assumed",
        "packages",
        "activation",
        "probe",
        "healthy",
        "lock",
        "pip_installed",
        "conda_meta",
    ]
)


@dataclass(frozen=True)
class EnvRecord:
    """What envkit made an env from and did to it (etc/envkit/record.json)."""

    envkit_version: str | None = None
    created: str | None = None
    updated: str | None = None
    recipe: RecipeRef | None = None
    platform: str | None = None
    channels: tuple[RecordedChannel, ...] = ()
    specs: tuple[RecordedSpec, ...] | None = None
    pip: tuple[str, ...] = ()  # the recipe's pip requirements
    virtual_packages: tuple[str, ...] = ()
    assumed: tuple[str, ...] = ()
    packages: tuple[PlannedPackage, ...] | None = None  # None: no list (an env envkit only fixed, or a damaged one)
    activation: ActivationSection | None = None
    probe: JSONObject | None = None  # the probe's verdict as it reported it (envkit.prefix.health reads it)
    healthy: bool | None = None
    lock: LockRef | None = None
    pip_installed: tuple[InstalledWheel, ...] = ()
    conda_meta: Mapping[str, tuple[int, int]] | None = None  # each package record's (size, mtime_ns)
    version: int = RECORD_VERSION  # of the file it was read from
    unknown: JSONObject = field(default_factory=dict)  # keys a later envkit wrote, written back as they were

    @classmethod
    def from_json(cls, data: JSONObject) -> EnvRecord:
        """A record of a version in READABLE_VERSIONS (the caller checked it)."""
        healthy = data.get("healthy")
        probe = data.get("probe")
        version = data.get("envkit_record_version")
        channels = data.get("channels")
        return cls(
            envkit_version=_str(data.get("envkit_version")),
            created=_str(data.get("created")),
            updated=_str(data.get("updated")),
            recipe=RecipeRef.from_json(data.get("recipe")),
            platform=_str(data.get("platform")),
            channels=tuple(
                RecordedChannel(str(c["name"]), str(c["url"])) for c in channels if isinstance(c, dict) and c.get("name") and c.get("url")
            )
            if isinstance(channels, list)
            else (),
            specs=_specs(data.get("specs")),
            pip=_strs(data.get("pip")) or (),
            virtual_packages=_strs(data.get("virtual_packages")) or (),
            assumed=_strs(data.get("assumed")) or (),
            packages=tuple(p for p in map(_package, packages) if p is not None)
            if isinstance(packages := data.get("packages"), list)
            else None,
            activation=ActivationSection.from_json(data.get("activation")),
            probe=probe if isinstance(probe, dict) else None,
            healthy=healthy if isinstance(healthy, bool) else None,
            lock=LockRef.from_json(data.get("lock")),
            pip_installed=_wheels(data.get("pip_installed")),
            conda_meta=_stamps(data.get("conda_meta")),
            version=version if isinstance(version, int) and not isinstance(version, bool) else RECORD_VERSION,
            unknown={k: v for k, v in data.items() if k not in _KNOWN},
        )

    def to_json(self) -> JSONObject:
        out: JSONObject = dict(self.unknown)
        out.update(
            {
                "envkit_record_version": RECORD_VERSION,
                "envkit_version": self.envkit_version,
                "created": self.created,
                "updated": self.updated,
                "recipe": self.recipe.to_json() if self.recipe else None,
                "platform": self.platform,
                "channels": [{"name": c.name, "url": c.url} for c in self.channels],
                "specs": [s.to_json() for s in self.specs] if self.specs is not None else None,
                "pip": list(self.pip),
                "virtual_packages": list(self.virtual_packages),
                "assumed": list(self.assumed),
                "packages": [_package_json(p) for p in self.packages] if self.packages is not None else None,
                "activation": self.activation.to_json() if self.activation else None,
                "probe": self.probe,
                "healthy": self.healthy,
                "pip_installed": [w.to_json() for w in self.pip_installed],
                "lock": self.lock.to_json() if self.lock else None,
                "conda_meta": {name: [size, mtime] for name, (size, mtime) in self.conda_meta.items()}
                if self.conda_meta is not None
                else None,
            }
        )
        return out

    @property
    def only_fixed(self) -> bool:
        """An env envkit did not make, whose activation `audit --fix` wrote."""
        return self.recipe is not None and self.recipe.source == FIX_SOURCE

    @property
    def recipe_name(self) -> str | None:
        """The recipe the env was made from; None for an env envkit only fixed."""
        return None if self.recipe is None or self.only_fixed else self.recipe.name

    def with_verdict(self, probe: JSONObject | None, healthy: bool | None, now: str) -> EnvRecord:
        return replace(self, probe=probe, healthy=healthy, updated=now)


def _package_json(package: PlannedPackage) -> JSONObject:
    out: JSONObject = {k: v for k, v in asdict(package).items() if k != "depends"}
    out["depends"] = list(package.depends)
    return out
