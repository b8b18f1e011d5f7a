"""`envkit export`: an env, or a lock, as other tools read it (environment.yml, @EXPLICIT,
Dockerfile, lock, conda-lock.yml).
Any conda env works; for an envkit env the activation settings and pip URLs come from its record,
for others conda's own `env config vars`. A lock gives any of its platforms, no env needed."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import rattler

from envkit.activation.writer import ops_from_json, recorded_activation
from envkit.cluster import modulefiles
from envkit.commands import Result
from envkit.commands.arguments import env_args, given, json_flag
from envkit.core.credentials import without_credentials
from envkit.core.errors import UsageError
from envkit.core.fsutil import STDOUT, output_path, write_output
from envkit.core.names import CONDA_NAME_REFUSES, CONDA_RESERVED_NAMES
from envkit.pip.pinned import LockedPip
from envkit.prefix.envrecord import EnvRecord, InstalledWheel, RecipeRef
from envkit.prefix.envs import select_env
from envkit.prefix.installed import LEGACY_RECORD, PipDist, channel_name, conda_env_vars, pip_dists, read_conda_meta
from envkit.prefix.record import read_record
from envkit.recipe.model import EnvOp
from envkit.solve import backend
from envkit.solve.channels import ResolvedChannel, rebase, to_canonical
from envkit.team import export
from envkit.team.lock import Lock, LockedPlatform, moved, read_lock, write_lock
from envkit.ui.console import Out, data_stream, escape
from envkit.ui.terminal import UI

Format = Literal["environment-yml", "explicit", "dockerfile", "lock", "conda-lock", "lmod", "modulefile"]
FORMATS: tuple[str, ...] = ("environment-yml", "explicit", "dockerfile", "lock", "conda-lock", "lmod", "modulefile")
# an environment module points at an installed env: there is none for a lock's platform
MODULE_FORMATS = ("lmod", "modulefile")
# what a format's file is usually called (a lock: ENV.lock), named when -o is a directory
USUAL_NAMES = {
    "environment-yml": "environment.yml",
    "explicit": "explicit.txt",
    "dockerfile": "Dockerfile",
    "conda-lock": "conda-lock.yml",
    "lmod": "VERSION.lua",
    "modulefile": "VERSION",
}


@dataclass(frozen=True)
class ExportOutcome:
    """An export written to `path`, or its `text` for stdout."""

    format: str
    prefix: str  # the env's, or the lock file's path
    path: str | None
    text: str | None  # when written to stdout
    platforms: tuple[str, ...] = ()  # whose packages it holds


def add_arguments(p: argparse.ArgumentParser) -> None:
    env_args(p)
    p.add_argument(
        "--lock",
        type=given,
        metavar="FILE",
        help="export this lock instead of an env: conda-lock takes every platform it holds, the others one (see --platform)",
    )
    p.add_argument(
        "--platform",
        action="append",
        default=[],
        metavar="P",
        help="with --lock: the platform to write (default: this machine's, a Dockerfile's the lock's Linux one; repeatable for conda-lock)",
    )
    p.add_argument("--format", required=True, choices=FORMATS, help=" | ".join(FORMATS))
    p.add_argument("-o", "--output", type=given, metavar="FILE", help="write to FILE, - for stdout (default: stdout)")
    p.add_argument(
        "--base",
        type=given,
        metavar="IMAGE",
        help="dockerfile: the image it starts FROM, one with conda on its PATH (default: condaforge/miniforge3:latest)",
    )
    json_flag(p)


def invoke(args: argparse.Namespace, ui: UI) -> Result[ExportOutcome]:
    if args.lock is not None:
        if args.name or args.prefix:
            raise UsageError("give either an env (-n NAME or -p PREFIX) or --lock FILE, not both")
        return export_lock(args.lock, args.format, args.output, platforms=tuple(args.platform), base=args.base)
    if args.platform:
        raise UsageError(
            f"--platform {args.platform[0]} picks a platform of a lock, and an env is of its own",
            hint="leave out --platform, or export a lock with --lock FILE",
        )
    return export_env(select_env(args.name, args.prefix), args.format, args.output, base=args.base)


def export_view(c: Out, out: ExportOutcome) -> None:
    if out.text is not None:
        data_stream(c).write(out.text)
    else:
        where = "stdout" if out.path == STDOUT else escape(out.path or "")
        c.print(f"wrote {where} ({out.format} for {', '.join(out.platforms)}) from {escape(out.prefix)}")


def _unreadable(path: Path, why: str) -> UsageError:
    return UsageError(f"{path} is not a readable package record ({why})", hint="see 'envkit audit' (EK022)")


def _conda_meta(prefix: Path) -> list[dict[str, Any]]:
    """Every package record, or none: an export that left out the one it could not read would claim
    to be the env and not be it."""
    _, bad = read_conda_meta(prefix)  # the audit's judgement of a record (EK022)
    if bad:
        raise _unreadable(prefix / bad[0].path, bad[0].reason)
    out = []
    for path in sorted((prefix / "conda-meta").glob("*.json")):
        if path.name != LEGACY_RECORD:
            out.append(json.loads(path.read_bytes()))
    return sorted(out, key=lambda d: d["name"])


# radon cc 27: gathers an env's packages, pip wheels, variables and channels, each with the fallbacks of envs envkit did not make
def snapshot(prefix: Path) -> export.EnvSnapshot:
    record = read_record(prefix)
    packages = []
    channels: list[str] = []
    for data in _conda_meta(prefix):
        url = without_credentials(str(data.get("url") or ""))
        if not url:
            raise UsageError(f"{prefix}: {data['name']} has no URL in conda-meta, so it cannot be re-installed from a list")
        channel = without_credentials(str(data.get("channel") or "").rstrip("/"))
        base = channel.rsplit("/", 1)[0] if channel.endswith("/" + str(data.get("subdir", ""))) else channel
        if base and base not in channels:
            channels.append(base)
        packages.append(
            export.ExportedPackage(
                data["name"],
                str(data["version"]),
                str(data["build"]),
                channel,
                url,
                data.get("sha256"),
                data.get("md5"),
                _dependencies(data.get("depends") or ()),
            )
        )
    channels = [c.url for c in record.channels] if record and record.channels else channels
    installed = {w.name: w for w in record.pip_installed} if record else {}
    dists = sorted(pip_dists(prefix).values(), key=lambda d: d.name)
    pip = [export.ExportedPip(d.name, d.version, _reinstall_url(d, installed.get(d.name))) for d in dists if d.managed]
    editable = [export.ExportedPip(d.name, d.version, d.editable_from) for d in dists if d.editable_from is not None]
    ops: list[EnvOp] = list(recorded_activation(prefix, record).ops) if record else []
    taken = {op.name for op in ops}
    ops += [EnvOp(name, "set", value=value) for name, value in conda_env_vars(prefix).items() if name not in taken]
    recipe = record.recipe_name if record else None
    return export.EnvSnapshot(
        name=conda_env_name(prefix.name, recipe),
        prefix=str(prefix),
        platform=(record.platform if record else None) or backend.native_platform(),
        recipe=recipe,
        channels=tuple(channel_name(c) if c.startswith("https://conda.anaconda.org/") else c for c in channels),
        packages=tuple(packages),
        pip=tuple(pip),
        activation=tuple(ops),
        editable=tuple(editable),
    )


def _dependencies(depends: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """A record's depends as (name, version spec) pairs, one per name: conda-lock's form, which
    keeps no build part. A depend rattler cannot read (an old conda's) is split as conda wrote it."""
    specs: dict[str, list[str]] = {}
    for depend in depends:
        try:
            spec = rattler.MatchSpec(str(depend))
            name, version = (spec.name.normalized if spec.name else ""), (str(spec.version) if spec.version else "")
        except Exception:
            name, _, rest = str(depend).partition(" ")
            version = rest.split(" ")[0]
        if name:
            specs.setdefault(name, []).extend([version] if version else [])
    return tuple((name, ",".join(versions)) for name, versions in sorted(specs.items()))


def _reinstall_url(dist: PipDist, recorded: InstalledWheel | None) -> str | None:
    """The wheel the env has now, not the one envkit installed: one pip moved since from an index is
    named by its version."""
    return dist.reinstall_url(recorded.url if recorded else "", recorded.version if recorded else "") or None


def conda_env_name(folder: str, recipe: str | None) -> str:
    """The `name:` of an environment.yml that `conda env create -f` accepts: the env's folder name,
    else its recipe's name (always a valid one), else the folder's name with '-' for what conda refuses."""
    if not CONDA_NAME_REFUSES & set(folder) and folder not in CONDA_RESERVED_NAMES:
        return folder
    fallback = "".join("-" if c in CONDA_NAME_REFUSES else c for c in folder)
    return recipe or (f"{fallback}-env" if fallback in CONDA_RESERVED_NAMES else fallback)


def _prefix_record(path: Path) -> Any:
    """rattler's reading of a record, stricter than conda's (a 'files' that is not a list)."""
    try:
        return rattler.PrefixRecord.from_path(path)
    except BaseException as exc:  # pyo3 panics derive from BaseException
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise _unreadable(path, str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None


def _lock_text(prefix: Path, env: export.EnvSnapshot) -> str:
    record = read_record(prefix) or EnvRecord()
    # a channel the env reached through a mirror is locked by the URL its name has everywhere, as envkit lock does
    moves = to_canonical([ResolvedChannel(c.name, c.url, "record") for c in record.channels])
    records = moved([_prefix_record(p) for p in sorted((prefix / "conda-meta").glob("*.json")) if p.name != LEGACY_RECORD], moves)
    for package in records:  # the installing machine brings its own credentials
        package.url = without_credentials(str(package.url))
        if package.channel:
            package.channel = without_credentials(str(package.channel))
    pip = tuple(LockedPip(p.name, p.version, p.url) for p in env.pip if p.url)
    activation = tuple(
        {
            "name": op.name,
            "action": op.action,
            "value": "" if op.computed else op.value,  # as envkit lock writes it: worked out where it is installed
            "entries": list(op.entries),
            "separator": op.separator,
            "computed": op.computed,
        }
        for op in env.activation
    )
    lock = Lock(
        record.recipe_name or env.name,
        (record.recipe or RecipeRef()).resolved_digest or "",
        tuple(rebase(c, moves) for c in env.channels),
        (
            LockedPlatform(
                env.platform,
                tuple(backend.describe_virtual(v) for v in backend.virtual_packages(env.platform, detect=False)),
                tuple(records),
                pip,
                activation,
            ),
        ),
    )
    fd, tmp = tempfile.mkstemp(prefix=".envkit-export-", suffix=".lock")
    os.close(fd)
    try:
        write_lock(Path(tmp), lock)
        text = Path(tmp).read_text(encoding="utf-8")
    finally:
        os.unlink(tmp)
    # YAML comments, which rattler and pixi read past: what the env has that the lock cannot pin
    unpinned = [
        f"# not kept: {p.name} {p.version}, pip-installed with no file URL envkit knows (put it in the recipe's pip list)"
        for p in env.pip
        if not p.url
    ]
    return text + "".join(f"{line}\n" for line in [*unpinned, *env.editable_notes()])


def export_env(prefix: Path, fmt: str, output: str | None, *, base: str | None = None) -> Result[ExportOutcome]:
    """`base`: the image a Dockerfile starts FROM (the default: export.DOCKER_BASE)."""
    _check_options(fmt, base)
    env = snapshot(prefix)
    if fmt == "dockerfile" and env.platform not in export.DOCKER_PLATFORMS:
        raise UsageError(
            f"{prefix} holds {env.platform} packages, and a Dockerfile builds a Linux image",
            hint="export the recipe's lock for Linux (envkit export --lock LOCK --platform linux-64 --format dockerfile; "
            "envkit lock RECIPE writes it with linux-64 among the recipe's platforms)",
        )
    text = _lock_text(prefix, env) if fmt == "lock" else _one_snapshot(fmt, env, base)
    return _written(fmt, prefix, text, output, USUAL_NAMES.get(fmt, f"{prefix.name}.lock"), platforms=(env.platform,))


def _check_options(fmt: str, base: str | None) -> None:
    if fmt not in FORMATS:
        raise UsageError(f"unknown export format {fmt!r}", hint="one of " + ", ".join(FORMATS))
    if base is not None:
        _check_base(base, fmt)


def _one_snapshot(fmt: str, env: export.EnvSnapshot, base: str | None) -> str:
    """The formats written from one snapshot alike, an env's or one platform of a lock."""
    if fmt == "environment-yml":
        return export.environment_yml(env)
    if fmt == "explicit":
        return export.explicit(env)
    if fmt == "dockerfile":
        return export.dockerfile(env, base or export.DOCKER_BASE)
    if fmt == "lmod":
        return modulefiles.lmod(env)
    if fmt == "modulefile":
        return modulefiles.tcl(env)
    return export.conda_lock((env,))


def _check_base(base: str, fmt: str) -> None:
    """An image reference is one word: a space would make the FROM line `FROM image AS stage` or
    worse, and a line break would end the instruction."""
    if fmt != "dockerfile":
        raise UsageError(f"--base {base} is the image a Dockerfile starts from; --format {fmt} has none", hint="leave out --base")
    if not base or base.startswith("-") or any(ch.isspace() or not ch.isprintable() for ch in base):
        raise UsageError(
            f"--base {base!r} is not an image reference", hint="give one word such as registry.example/team/conda:24.11 or name@sha256:..."
        )


def export_lock(
    lock_ref: str, fmt: str, output: str | None, *, platforms: tuple[str, ...] = (), base: str | None = None
) -> Result[ExportOutcome]:
    """An envkit lock for the tools that read no rattler lock (version 7): conda-lock's file with
    every platform it holds (or those given), or any other format for one platform, so a machine
    of one kind writes the environment.yml, explicit list or Dockerfile of another (a Linux image's,
    from a Mac) without making an env first."""
    _check_options(fmt, base)
    if fmt in MODULE_FORMATS:
        raise UsageError(
            f"--format {fmt} writes a module that puts an installed env on PATH, and a lock is not installed",
            hint="create the env from the lock (envkit create --locked), then export it with -n NAME or -p PREFIX",
        )
    if fmt == "lock":
        raise UsageError(f"--lock {lock_ref} is a lock already", hint="copy the file, or write another with 'envkit lock RECIPE -o FILE'")
    path = Path(lock_ref).expanduser().absolute()
    lock = read_lock(path)
    if not lock.platforms:
        raise UsageError(f"{path} locks no platform", hint="re-lock it with 'envkit lock RECIPE'")
    if fmt == "conda-lock":
        chosen = [_locked_platform(lock, path, p) for p in dict.fromkeys(platforms)] if platforms else list(lock.platforms)
        text = export.conda_lock(tuple(_locked_snapshot(lock, locked, path) for locked in chosen))
    else:
        chosen = [_one_platform(lock, path, fmt, platforms)]
        text = _one_snapshot(fmt, _locked_snapshot(lock, chosen[0], path), base)
    return _written(fmt, path, text, output, USUAL_NAMES[fmt], platforms=tuple(p.platform for p in chosen))


def _locked_platform(lock: Lock, path: Path, platform: str) -> LockedPlatform:
    locked = lock.for_platform(platform)
    if locked is None:
        raise UsageError(
            f"{path} has no {platform} (it locks {', '.join(p.platform for p in lock.platforms)})",
            hint=f"add {platform} to the recipe's platforms and lock again with 'envkit lock RECIPE', or export one the lock has",
        )
    return locked


def _one_platform(lock: Lock, path: Path, fmt: str, platforms: tuple[str, ...]) -> LockedPlatform:
    """The platform a one-platform format is written for: the one named, else this machine's where
    the lock has it (a Dockerfile's: the lock's Linux one), else the lock's only one."""
    if len(set(platforms)) > 1:
        raise UsageError(
            f"--format {fmt} is for one platform, and {', '.join(platforms)} were given",
            hint="give one --platform; conda-lock takes several",
        )
    linux = [p.platform for p in lock.platforms if p.platform in export.DOCKER_PLATFORMS]
    relock = "add linux-64 to the recipe's platforms and lock again with 'envkit lock RECIPE'"
    if fmt == "dockerfile" and platforms and platforms[0] not in export.DOCKER_PLATFORMS:
        raise UsageError(
            f"--platform {platforms[0]}: a Dockerfile builds a Linux image",
            hint=f"give one of the lock's: {', '.join(linux)}" if linux else relock,
        )
    if platforms:
        return _locked_platform(lock, path, platforms[0])
    offered = linux if fmt == "dockerfile" else [p.platform for p in lock.platforms]
    native = backend.native_platform()
    if native in offered:
        return _locked_platform(lock, path, native)
    if len(offered) == 1:
        return _locked_platform(lock, path, offered[0])
    if not offered:
        raise UsageError(f"{path} locks no Linux platform, and a Dockerfile builds a Linux image", hint=relock)
    raise UsageError(
        f"{path} locks {', '.join(offered)}, and this machine is {native}: which one is the {fmt} for?",
        hint="give it with --platform P",
    )


def _locked_snapshot(lock: Lock, locked: LockedPlatform, path: Path) -> export.EnvSnapshot:
    packages = tuple(
        export.ExportedPackage(
            record.name.normalized,
            str(record.version),
            str(record.build),
            without_credentials(str(record.channel or "")),
            without_credentials(str(record.url)),
            None if record.sha256 is None else bytes(record.sha256).hex(),
            None if record.md5 is None else bytes(record.md5).hex(),
            _dependencies(record.depends),
        )
        for record in locked.records
    )
    return export.EnvSnapshot(
        name=lock.recipe,
        prefix=str(path),
        platform=locked.platform,
        recipe=lock.recipe,
        channels=lock.channels,
        packages=packages,
        pip=tuple(export.ExportedPip(w.name, w.version, w.url) for w in locked.pip),
        activation=ops_from_json(list(locked.activation)),
    )


def _written(
    fmt: str, source: Path, text: str, output: str | None, usual_name: str, *, platforms: tuple[str, ...]
) -> Result[ExportOutcome]:
    if output is None:
        return Result("export", ExportOutcome(fmt, str(source), None, text, platforms), view=export_view)
    path = output_path(output)
    write_output(path, text, usual_name)
    return Result("export", ExportOutcome(fmt, str(source), str(path), None, platforms), view=export_view)
