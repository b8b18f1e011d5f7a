"""An env written out for other tools: conda's environment.yml, an @EXPLICIT list, a Dockerfile,
conda-lock's lock file.
Pure: a snapshot of the env in, text out (envkit.commands.export reads the env and writes files).

What other tools cannot express is said in the output, never dropped silently: conda's
`variables:` are literal values, so a prepend or an unset has no equivalent there; a Dockerfile's
ENV can prepend (`${VAR}`) but not unset; conda-lock's file has no place for settings at all.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from envkit import __version__
from envkit.activation.startup import carried_name
from envkit.core.digests import sha256
from envkit.core.yamltext import quoted, text
from envkit.recipe.model import EnvOp

DOCKER_BASE = "condaforge/miniforge3:latest"
DOCKER_PREFIX = "/opt/env"
# conda's Linux subdirs as the OCI platforms images are built for: the packages are that machine's
DOCKER_PLATFORMS = {
    "linux-64": "linux/amd64",
    "linux-aarch64": "linux/arm64",
    "linux-ppc64le": "linux/ppc64le",
    "linux-s390x": "linux/s390x",
    "linux-armv7l": "linux/arm/v7",
    "linux-32": "linux/386",
}


@dataclass(frozen=True)
class ExportedPackage:
    """A conda package as every export format writes it: pinned, with its URL and hashes."""

    name: str
    version: str
    build: str
    channel: str  # as the record names it
    url: str
    sha256: str | None
    md5: str | None
    dependencies: tuple[tuple[str, str], ...] = ()  # (name, version spec or ""), as conda-lock keeps them

    def explicit_line(self) -> str:
        if self.sha256:
            return f"{self.url}#sha256:{self.sha256}"
        return f"{self.url}#{self.md5}" if self.md5 else self.url


@dataclass(frozen=True)
class ExportedPip:
    """A pip wheel as the exports write it; `url` is None where pip kept no file to point at."""

    name: str
    version: str
    url: str | None  # with #sha256= when envkit installed it

    @property
    def requirement(self) -> str:
        """What pip is given: the exact file when known (PEP 508 direct reference), else name==version."""
        return f"{self.name} @ {self.url}" if self.url else f"{self.name}=={self.version}"


@dataclass(frozen=True)
class EnvSnapshot:
    """What an env has now, read once and written in any export format."""

    name: str
    prefix: str
    platform: str
    recipe: str | None
    channels: tuple[str, ...]
    packages: tuple[ExportedPackage, ...]
    pip: tuple[ExportedPip, ...]
    activation: tuple[EnvOp, ...]
    editable: tuple[ExportedPip, ...] = ()  # `pip install -e` of a local project (url: the project's): not exported

    def editable_notes(self) -> list[str]:
        """A working copy cannot travel in an export: say what was left out and how to add it."""
        return [
            f"# not kept: {p.name} {p.version}, an editable install of {p.url or 'a local project'}; pip install -e it again"
            for p in self.editable
        ]


def _docker_str(value: str) -> str:
    """A double-quoted word of a Dockerfile's ENV line that every builder reads back as `value`.
    Inside double quotes Docker's lexer (and the copies of it in buildah and kaniko) takes a
    backslash as an escape only before a backslash, a double quote or a dollar sign, keeps it
    before anything else, and expands $NAME. So not JSON, whose escapes of a tab or of a
    character beyond ASCII would arrive as written, backslash and all. A line break cannot be
    written at all (see _docker_lost)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def _breaks_line(value: str) -> bool:
    return "\n" in value or "\r" in value


def _computed_notes(env: EnvSnapshot, where: str) -> list[str]:
    """A value envkit worked out for the machine the env is on (physical-cores) is that machine's;
    an export is for others, so it says so rather than pass the number off as the recipe's."""
    return [
        f"# {op.name}={op.value} is {op.computed} of the machine this was exported from (the recipe asks for {op.computed}): {where}"
        for op in env.activation
        if op.computed and op.action == "set" and not unresolved(op)
    ]


def unresolved(op: EnvOp) -> bool:
    """A setting a lock keeps as its rule (physical-cores), worked out where the env is installed: an
    export of the lock knows no machine, so it has no number to write."""
    return op.action == "set" and bool(op.computed) and not op.value


def _unresolved_note(op: EnvOp, how: str) -> str:
    return f"# not kept: {op.name} is {op.computed} of the machine that runs the env, which the lock leaves to it: {how}"


# radon cc 27: one branch per part of conda's environment.yml (channels, deps, pip, variables), in file order
def environment_yml(env: EnvSnapshot) -> str:
    lines = [
        f"# Written by envkit export from {env.prefix}" + (f" (recipe '{env.recipe}')" if env.recipe else "") + ".",
        f"# Exact packages for {env.platform}; `variables:` keeps envkit's activation settings, so `conda env create -f` sets them too.",
        f"name: {quoted(env.name)}",
        "channels:" if env.channels else "channels: []",  # a bare key is null, which conda's reader refuses
        *(f"  - {quoted(c)}" for c in env.channels),
        "dependencies:" if env.packages or env.pip else "dependencies: []",
        *(f"  - {quoted(f'{p.name}={p.version}={p.build}')}" for p in env.packages),
    ]
    if env.pip:
        if not any(p.name == "pip" for p in env.packages):  # conda env create installs the pip section with conda's pip
            lines.append("  - pip")
        lines.append("  - pip:")
        lines += [f"      - {quoted(p.requirement)}" for p in env.pip]
    settable = [op for op in env.activation if op.action == "set" and not unresolved(op)]
    lost = [op for op in env.activation if op.action != "set"]
    if settable:
        lines.append("variables:")
        lines += [f"  {op.name}: {quoted(op.value)}" for op in settable]
    lines += _computed_notes(env, "change it to suit the machine that runs the env")
    lines += [_unresolved_note(op, f"conda env config vars set {op.name}=N in the new env") for op in env.activation if unresolved(op)]
    for op in settable:
        if "'" in (op.value or ""):
            # conda's posix activator writes export NAME='value' without escaping quotes in it
            lines.append(f"# not kept exactly: {op.name} holds a single quote, which `conda activate` drops in POSIX shells")
    for op in lost:
        what = "unsets" if op.action == "unset" else f"{op.action}s {op.separator.join(op.entries)} to"
        lines.append(f"# not kept: envkit's activation {what} {op.name}; conda's variables are literal values and cannot")
    if any(carried_name(op.name) for op in settable):
        lines.append(
            "# conda sets these at activation only: a python started without it (srun ENV/bin/python, a console script)"
            " gets the threading ones once `envkit audit -p ENV --fix` has run in the new env (EK037)"
        )
    return text(lines + env.editable_notes())


def explicit(env: EnvSnapshot) -> str:
    header = [
        f"# Written by envkit export from {env.prefix}: `conda create --file` (or micromamba) installs exactly these.",
        f"# platform: {env.platform}",
    ]
    if env.activation:
        header.append("# not kept: an explicit list has no place for activation settings; export environment-yml keeps them")
    if env.pip:
        header.append("# not kept: pip packages (" + ", ".join(f"{p.name}=={p.version}" for p in env.pip) + ")")
    header += env.editable_notes()
    return text([*header, "@EXPLICIT", *(p.explicit_line() for p in env.packages)])


def _docker_env(op: EnvOp) -> str | None:
    if op.action == "set":
        return f"{op.name}={_docker_str(op.value)}"
    # ${VAR:+...}: no separator (an empty path entry, the current directory) when VAR is unset
    joined, sep, name = _docker_str(op.separator.join(op.entries)), _docker_str(op.separator), op.name
    if op.action == "prepend":
        return f"{name}={joined}${{{name}:+{sep}${{{name}}}}}"
    if op.action == "append":
        return f"{name}=${{{name}:+${{{name}}}{sep}}}{joined}"
    return None


def _docker_lost(op: EnvOp) -> str | None:
    """Why `op` has no ENV line, or None when it has one."""
    if op.action == "unset":
        return f"envkit's activation unsets {op.name}; a Dockerfile cannot unset a variable"
    if _breaks_line(op.value or "") or any(_breaks_line(e) for e in (*op.entries, op.separator)):
        return f"{op.name} holds a line break, which an ENV line cannot; give it with docker run -e {op.name}=..."
    return None


def dockerfile(env: EnvSnapshot, base: str = DOCKER_BASE) -> str:
    """A container does not run `conda activate`, so the settings become ENV lines. FROM names the
    platform the packages are for: a builder on another (an Apple Silicon laptop, for a linux-64
    env) would otherwise start an image of its own and install binaries it cannot run. The package
    list travels inside the Dockerfile, written by a RUN step, so nothing else needs copying into
    the build; not as a heredoc, which buildah before 1.33 (podman before 4.8), Google's kaniko
    and Docker's legacy builder cannot read, and which needs a `# syntax=` image an offline
    BuildKit cannot pull."""
    listing = "@EXPLICIT", *(p.explicit_line() for p in env.packages)
    lines = [
        f"# Written by envkit export from {env.prefix}" + (f" (recipe '{env.recipe}')" if env.recipe else "") + ".",
        "# The env's exact packages, then its activation settings as ENV: containers do not run conda activate.",
        f"# The image needs conda on its PATH (envkit export --base IMAGE names another); packages for {env.platform}.",
        *_local_notes(env),  # before FROM: what a builder must be given first
        f"FROM --platform={DOCKER_PLATFORMS[env.platform]} {base}",  # a Linux env: export_env refuses others
        "RUN printf '%s\\n' \\",
        *(f"      {shlex.quote(line)} \\" for line in listing),
        "      > /tmp/envkit-explicit.txt \\",
        f" && conda create --yes --prefix {DOCKER_PREFIX} --file /tmp/envkit-explicit.txt \\",
        " && conda clean --all --yes && rm /tmp/envkit-explicit.txt",
    ]
    if env.pip:
        wheels = " ".join(shlex.quote(p.requirement) for p in env.pip)
        lines.append(f"RUN {DOCKER_PREFIX}/bin/python -m pip install --no-deps --no-cache-dir {wheels}")
    lines.append(f"ENV CONDA_PREFIX={DOCKER_PREFIX} PATH={DOCKER_PREFIX}/bin:${{PATH}}")
    lines += _computed_notes(env, "give the host's own with docker run -e NAME=N")
    for op in env.activation:
        if unresolved(op):
            lines.append(_unresolved_note(op, f"give the host's with docker run -e {op.name}=N"))
            continue
        lost = _docker_lost(op)
        lines.append(f"# not kept: {lost}" if lost else f"ENV {_docker_env(op)}")
    return text(lines)


def _local_notes(env: EnvSnapshot) -> list[str]:
    """A file:// channel or wheel is a folder of the machine the env is on: a build reads nothing
    outside its context, so `conda create` and pip would stop on a missing file, after the image
    has pulled and started. The Dockerfile says so where a builder reads first, and how to give
    the build those folders."""
    folders = sorted(
        {p.url.rsplit("/", 2)[0] for p in env.packages if p.url.startswith("file://")}
        | {p.url.split("#", 1)[0].rsplit("/", 1)[0] for p in env.pip if p.url and p.url.startswith("file://")}
    )
    if not folders:
        return []
    paths = [unquote(urlsplit(folder).path) for folder in folders]
    mounts = " ".join(f"-v {shlex.quote(path)}:{shlex.quote(path)}:ro" for path in paths)
    return [
        *(f"# files of the machine this was exported from: {folder}" for folder in folders),
        f"# a build reads none of them: give it the folders at the same paths (podman build {mounts} .),",
        "# or serve them over HTTP and change their URLs below",
    ]


def _described(op: EnvOp) -> str:
    if op.action == "set":
        return op.value or op.computed or ""  # a lock's worked-out value is its rule (physical-cores)
    return "unset" if op.action == "unset" else f"{op.action} {op.separator.join(op.entries)}"


# radon cc 21: one branch per field conda-lock's v1 format asks of a package, in its order
def conda_lock(envs: tuple[EnvSnapshot, ...]) -> str:
    """conda-lock's lock file (version 1), which `conda-lock install`, micromamba and conda (its
    conda-lockfiles plugin) install from: one env, or every platform of a lock (one snapshot
    each, from the same source). The format has no place for activation settings
    (conda/conda-lock#886): they are named under metadata.custom_metadata, which no installer
    applies, and the header says so."""
    first = envs[0]
    ops = [op for env in envs for op in env.activation]
    header = [
        f"# Written by envkit export from {first.prefix}" + (f" (recipe '{first.recipe}')" if first.recipe else "") + ".",
        "# The exact packages, for conda-lock install, micromamba and conda (its conda-lockfiles plugin).",
    ]
    if ops:
        header.append(
            "# not kept: activation settings, for which a conda-lock file has no place (they are listed under"
            " metadata.custom_metadata, which no installer applies); export environment-yml or lock keeps them"
        )
    if any(op.name == "MKL_THREADING_LAYER" for op in ops):
        header.append("# after installing, envkit audit --fix -p PREFIX writes MKL_THREADING_LAYER=GNU where mkl-service needs it")
    for env in envs:
        header += [f"# not kept: pip package {p.name}=={p.version}, installed with no file URL envkit knows" for p in env.pip if not p.url]
    header += first.editable_notes()
    # created_by: conda's reader of the format (conda-lockfiles) refuses custom metadata without it
    custom = {"created_by": f"envkit {__version__}", **({"envkit.recipe": first.recipe} if first.recipe else {})}
    for env in envs:
        custom |= {f"envkit.activation.{env.platform}.{op.name}": _described(op) for op in env.activation}
    lines = [
        *header,
        "version: 1",
        "metadata:",
        "  content_hash:",
        *(f"    {env.platform}: {quoted(_content_hash(env))}" for env in envs),
        "  channels:" if first.channels else "  channels: []",
        *(f"    - url: {quoted(c)}\n      used_env_vars: []" for c in first.channels),
        "  platforms:",
        *(f"    - {env.platform}" for env in envs),
        "  sources: []",
        "  custom_metadata:",
        *(f"    {quoted(key)}: {quoted(value)}" for key, value in custom.items()),
    ]
    entries = [line for env in envs for line in _platform_entries(env)]
    return text([*lines, "package:" if entries else "package: []", *entries])


def _content_hash(env: EnvSnapshot) -> str:
    """Of what is locked for the platform (the file has no sources for conda-lock to hash)."""
    listed = [(p.name, p.version, p.build, p.url) for p in env.packages] + [(p.name, p.version, "", p.url) for p in env.pip if p.url]
    return sha256(json.dumps(listed).encode()).hexdigest()


def _platform_entries(env: EnvSnapshot) -> list[str]:
    lines: list[str] = []
    for p in env.packages:
        hashes = {"md5": p.md5 or "", **({"sha256": p.sha256} if p.sha256 else {})}  # conda-lock requires an md5
        lines += _locked_entry(
            p.name,
            p.version,
            manager="conda",
            platform=env.platform,
            url=p.url,
            hashes=hashes,
            dependencies=dict(p.dependencies),
            build=p.build,
        )
    for w in env.pip:
        if not w.url:
            continue
        url, _, fragment = w.url.partition("#")
        if fragment.startswith("sha256="):  # the hash has a field of its own; any other fragment stays in the URL
            lines += _locked_entry(
                w.name, w.version, manager="pip", platform=env.platform, url=url, hashes={"sha256": fragment.removeprefix("sha256=")}
            )
        else:
            lines += _locked_entry(w.name, w.version, manager="pip", platform=env.platform, url=w.url, hashes={})
    return lines


def _locked_entry(
    name: str,
    version: str,
    *,
    manager: str,
    platform: str,
    url: str,
    hashes: dict[str, str],
    dependencies: dict[str, str] | None = None,
    build: str = "",
) -> list[str]:
    """One package of a conda-lock file, in conda-lock's field order."""
    return [
        f"  - name: {quoted(name)}",
        f"    version: {quoted(version)}",
        *([f"    build: {quoted(build)}"] if build else []),
        f"    manager: {manager}",
        f"    platform: {platform}",
        "    dependencies:" if dependencies else "    dependencies: {}",
        *(f"      {quoted(dep)}: {quoted(spec)}" for dep, spec in (dependencies or {}).items()),
        f"    url: {quoted(url)}",
        "    hash:" if hashes else "    hash: {}",
        *(f"      {kind}: {quoted(value)}" for kind, value in hashes.items()),
        "    category: main",
        "    optional: false",
    ]
