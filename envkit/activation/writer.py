"""Write and read envkit's activation files in a prefix; files envkit did not write are never touched."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from envkit.activation import FILE_PREFIX, SCRIPTS_FORMAT
from envkit.activation.shells import GENERATORS, ScriptContext
from envkit.activation.startup import NAMES as STARTUP_NAMES
from envkit.activation.startup import carried_name, drop_leftovers, site_dir, startup_texts
from envkit.core.digests import sha256
from envkit.core.errors import UsageError
from envkit.core.fsutil import atomic_write_text, read_exact, write_staged
from envkit.core.names import NAME_RE, VAR_RE
from envkit.prefix.envrecord import JSON, ActivationSection, EnvRecord
from envkit.recipe.model import EnvOp

MARK = "envkit-settings-sha256:"


TAG_RE = re.compile(r"_ENVKIT_([0-9a-f]{8})_ACTIVE")


def prefix_tag(prefix: Path) -> str:
    """A new env's tag: unique per prefix, so stacked envs keep separate saved state."""
    return sha256(str(prefix.resolve()).encode()).hexdigest()[:8]


def _script_json(op: EnvOp) -> dict[str, JSON]:
    """What of an operation the scripts hold."""
    return {"name": op.name, "action": op.action, "value": op.value, "entries": list(op.entries), "separator": op.separator}


def ops_digest(ops: tuple[EnvOp, ...]) -> str:
    return sha256(json.dumps([_script_json(op) for op in ops], sort_keys=True).encode()).hexdigest()


def ops_to_json(ops: tuple[EnvOp, ...]) -> list[JSON]:
    """As the record keeps them; `computed` only where a value was worked out (exports say so)."""
    return [{**_script_json(op), **({"computed": op.computed} if op.computed else {})} for op in ops]


def ops_from_json(data: object) -> tuple[EnvOp, ...]:
    """The record's operations, checked: a record edited or damaged by hand is refused in one line."""
    bad = "in etc/envkit/record.json is not one envkit writes"
    if not isinstance(data, list):
        raise UsageError(f"activation operations {bad}", hint="recreate the env")
    out = []
    for item in data:
        if not isinstance(item, dict):
            raise UsageError(f"activation operation {item!r} {bad}", hint="recreate the env")
        entries = item.get("entries") or []
        action = item.get("action")
        name = item.get("name")
        # a name that is no variable name would be shell text in the scripts (a record edited by hand)
        if (
            not isinstance(name, str)
            or not VAR_RE.match(name)
            or not isinstance(entries, list)
            or action not in ("set", "unset", "prepend", "append")
        ):
            raise UsageError(f"activation operation {item!r} {bad}", hint="recreate the env")
        out.append(
            EnvOp(
                name=name,
                action=action,
                value=str(item.get("value", "")),
                entries=tuple(str(e) for e in entries),
                separator=str(item.get("separator", ":")),
                computed=item["computed"] if isinstance(item.get("computed"), str) else None,
            )
        )
    return tuple(out)


Carried = tuple[tuple[str, str], ...]  # (name, value) pairs the startup files carry beside envkit's settings


def carried_from_json(data: object) -> Carried:
    """The record's carried values (see envkit.activation.startup), checked like its operations."""
    if data is None:
        return ()
    if not isinstance(data, dict) or not all(
        isinstance(name, str) and carried_name(name) and isinstance(value, str) for name, value in data.items()
    ):
        raise UsageError(
            f"the carried activation values {data!r} in etc/envkit/record.json: that set is not one envkit writes",
            hint="recreate the env",
        )
    return tuple(data.items())


def carried_beside(ops: tuple[EnvOp, ...], carried: Carried) -> Carried:
    """The carried values the startup files give beside `ops`: not those of a name envkit's
    settings set, as its activation script runs after conda's env vars and its value wins there."""
    own = {op.name for op in ops}
    return tuple((name, value) for name, value in carried if name not in own)


FIX_NAME = "audit"  # the scripts' name where `envkit audit --fix` gave settings to an env envkit did not make


@dataclass(frozen=True)
class ActivationFile:
    """One script as it is to be on disk: the audit compares the file there with `text`."""

    path: Path
    text: str


def render_files(
    prefix: Path,
    recipe_name: str,
    ops: tuple[EnvOp, ...],
    suffixes: tuple[str, ...] = tuple(GENERATORS),
    *,
    tag: str | None = None,
    startup: bool = True,
    carried: Carried = (),
) -> list[ActivationFile]:
    """The exact files envkit would write for these operations: each shell's scripts, and the
    startup files in the env's site-packages (envkit.activation.startup) where it has a python,
    with the `carried` values too. Values carried alone need no scripts: conda's activation sets
    them already. The text depends on the recipe name, the operations, the carried values and the
    tag only, so an env that is moved or copied still matches."""
    ctx = ScriptContext(
        tag=tag or prefix_tag(prefix),
        header=(
            f"Written by envkit for recipe '{recipe_name}'. Do not edit:"
            if recipe_name != FIX_NAME
            else "Written by `envkit audit --fix` (the env has no envkit recipe). Do not edit:",
            "`envkit audit --fix` rewrites this file from etc/envkit/record.json.",
            f"{MARK} {ops_digest(ops)}",
        ),
    )
    files = []
    for suffix in suffixes if ops or not carried else ():
        pair = GENERATORS[suffix](ctx, ops)
        name = f"{FILE_PREFIX}{recipe_name}.{suffix}"
        files.append(ActivationFile(prefix / "etc" / "conda" / "activate.d" / name, pair.activate))
        files.append(ActivationFile(prefix / "etc" / "conda" / "deactivate.d" / name, pair.deactivate))
    site = site_dir(prefix) if startup else None
    if site is not None:
        files.extend(ActivationFile(site / name, text) for name, text in startup_texts(ctx.header, ops, carried).items())
    return files


def write_files(files: list[ActivationFile], *, staged: bool = False) -> list[Path]:
    """Replace each file atomically (`staged`: into a staging env, written straight, see
    envkit.core.fsutil.write_staged); returns the paths that changed."""
    changed = []
    for f in files:
        if read_exact(f.path) != f.text:
            (write_staged if staged else atomic_write_text)(f.path, f.text, mode=0o644)
            changed.append(f.path)
    return changed


def remove_stale(prefix: Path, keep: list[ActivationFile]) -> list[Path]:
    """Drop envkit files this env no longer uses: scripts for recipes it was made from before
    (only files named envkit-*), and startup files for settings that set nothing now, or in the
    site-packages of a python the env no longer has (a sync from 3.11 to 3.12 leaves that folder)."""
    keep_paths = {f.path for f in keep}
    candidates: list[Path] = []
    for sub in ("activate.d", "deactivate.d"):
        folder = prefix / "etc" / "conda" / sub
        if folder.is_dir():
            candidates.extend(path for path in folder.iterdir() if path.name.startswith(FILE_PREFIX))
    for pattern in ("lib/python3*/site-packages", "Lib/site-packages"):
        for site in prefix.glob(pattern):
            candidates.extend(path for path in (site / name for name in STARTUP_NAMES) if path.is_file())
    removed = []
    for path in candidates:
        if path not in keep_paths and MARK in (read_exact(path) or ""):
            path.unlink()
            removed.append(path)
    live = site_dir(prefix)
    for site in {path.parent for path in removed if path.name in STARTUP_NAMES}:
        drop_leftovers(site, folders=site != live)
    return removed


@dataclass(frozen=True)
class RecordedActivation:
    """The activation an env's record asks for: enough to render its files again exactly."""

    recipe_name: str
    ops: tuple[EnvOp, ...]
    tag: str
    carried: Carried = ()  # what else the startup files give a python started without activation (EK037)

    def files(self, prefix: Path, suffixes: tuple[str, ...] = tuple(GENERATORS), *, startup: bool = True) -> list[ActivationFile]:
        return render_files(prefix, self.recipe_name, self.ops, suffixes, tag=self.tag, startup=startup, carried=self.carried)


def recorded_activation(prefix: Path, record: EnvRecord) -> RecordedActivation:
    """The tag is the record's (version 2); a version-1 record has none, so it is read back from the
    env's own sh script, and only an env without one gets a tag from its current path."""
    activation, recipe = record.activation, record.recipe
    if activation is None or recipe is None:
        raise UsageError("the activation or recipe section of etc/envkit/record.json is not one envkit writes", hint="recreate the env")
    name = recipe.name or FIX_NAME
    if not NAME_RE.match(name):  # it names the scripts: `../x` would write them outside the env
        raise UsageError(f"the recipe name {name!r} in etc/envkit/record.json is not one envkit writes", hint="recreate the env")
    ops = ops_from_json(activation.ops or [])
    tag = activation.tag
    if not (tag is not None and re.fullmatch(r"[0-9a-f]{8}", tag)):
        script = read_exact(prefix / "etc" / "conda" / "activate.d" / f"{FILE_PREFIX}{name}.sh") or ""
        found = TAG_RE.search(script)
        tag = found.group(1) if found else prefix_tag(prefix)
    return RecordedActivation(name, ops, tag, carried_from_json(activation.carried))


def tag_sharers(prefix: Path, tag: str) -> tuple[Path, ...]:
    """The other envs conda knows whose envkit activation keeps its saved state under `tag` too.
    `conda create --clone` copies envkit's scripts and record as they are, tag included. Once their
    settings differ, the one stacked on the other (conda activate --stack) finds the other's saved
    state, saves nothing, and its deactivate unsets a variable only it sets instead of putting back
    the value from before. Looked for only where the tag is not this path's own (a copy, or an env
    moved or renamed), so an env that never moved costs nothing."""
    if tag == prefix_tag(prefix):
        return ()
    from envkit.core.errors import EnvkitError
    from envkit.prefix.envs import all_envs  # the registry and the envs dirs: read for a moved env only
    from envkit.prefix.leftovers import real_prefix
    from envkit.prefix.record import read_record

    here = real_prefix(prefix)
    try:
        known = all_envs()
    except EnvkitError:  # an unreadable registry: nothing to compare with
        return ()
    out = []
    for other in known:
        if real_prefix(other) == here:
            continue
        try:
            record = read_record(other)
            theirs = recorded_activation(other, record).tag if record else None
        except EnvkitError:  # another env's damaged or private record is its own audit's business
            continue
        if theirs == tag:
            out.append(other)
    return tuple(out)


def own_tag(prefix: Path, tag: str) -> str:
    """`tag`, unless another env shares it (tag_sharers): then this path's own, for the scripts a
    sync writes, whose settings may now differ from the other env's. A tag shared by envs with the
    same settings does no harm: conda runs the outer env's activation again when the inner one is
    deactivated."""
    return prefix_tag(prefix) if tag_sharers(prefix, tag) else tag


def text_sha256(text: str) -> str:
    """The digest of a file written by atomic_write_text (UTF-8, line endings as given)."""
    return sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def activation_section(activation: RecordedActivation, prefix: Path, files: list[ActivationFile]) -> ActivationSection:
    """The record's `activation` section."""
    return ActivationSection(
        ops=ops_to_json(activation.ops),
        carried=dict(activation.carried) if activation.carried else None,
        tag=activation.tag,
        format=SCRIPTS_FORMAT,
        files=tuple(str(f.path.relative_to(prefix)) for f in files),
        # what the files held when written: a no-op sync compares these without rendering anything
        sha256={str(f.path.relative_to(prefix)): text_sha256(f.text) for f in files},
    )
