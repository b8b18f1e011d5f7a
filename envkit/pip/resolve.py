"""The recipe's pip list, resolved for a target platform and Python without installing anything:
`pip install --dry-run --report` with the target's tags gives exact versions, URLs and sha256
hashes. pip runs under envkit's own interpreter, with the user's pip settings (PIP_INDEX_URL,
PIP_FIND_LINKS, PIP_NO_INDEX, pip.conf) applied.

What the conda solution already provides (numpy, torch as conda's pytorch, ...) is dropped from
the result: in the env, pip sees those as installed and installs only the rest.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envkit.core.errors import SolveError
from envkit.pip.install import PIP_ENVIRONMENT, constraints_text, keeping
from envkit.pip.pinned import LockedPip
from envkit.prefix.pipurls import exact_url, vcs_parts

# conda package names whose PyPI distribution has another name
CONDA_TO_PYPI = {"pytorch": "torch", "pytorch-cpu": "torch", "pytorch-gpu": "torch", "py-opencv": "opencv-python", "pillow": "pillow"}


# pip evaluates environment markers (`colorama; platform_system == "Windows"`, `tomli;
# python_version < "3.11"`) for the machine it runs on, whatever --platform and --python-version
# say: a win-64 lock made on linux would hold linux's wheels and lack windows' own. pip reads the
# marker environment from its vendored packaging's `default_environment()` at each evaluation
# (pip 23 to 26 alike), so this runs pip with that function giving the target's; a pip without it
# fails the lock rather than resolve for the wrong machine.
PIP_FOR_TARGET = """
import json, sys
target = json.loads(sys.argv.pop(1))
try:
    from pip._vendor.packaging import markers
    markers.default_environment
except (ImportError, AttributeError) as exc:
    sys.exit(f"this pip cannot resolve for another platform's environment markers ({exc}): upgrade pip, or lock on that platform")
markers.default_environment = lambda: dict(target)
from pip._internal.cli.main import main
sys.exit(main())
"""

# (os_name, sys_platform, platform_system) by conda platform's OS, and platform_machine by platform
MARKER_SYSTEMS = {"linux": ("posix", "linux", "Linux"), "osx": ("posix", "darwin", "Darwin"), "win": ("nt", "win32", "Windows")}
MARKER_MACHINES = {
    "linux-64": "x86_64",
    "linux-aarch64": "aarch64",
    "linux-ppc64le": "ppc64le",
    "osx-64": "x86_64",
    "osx-arm64": "arm64",
    "win-64": "AMD64",
    "win-arm64": "ARM64",
}


def marker_environment(platform: str, python: str) -> dict[str, str]:
    """PEP 508's marker environment of CPython `python` (the locked version, X.Y.Z) on `platform`.
    Kernel release and version are left empty: a lock holds for the team's machines, not one."""
    os_name, sys_platform, system = MARKER_SYSTEMS[platform.split("-", 1)[0]]
    full = python if python.count(".") >= 2 else f"{python}.0"
    return {
        "implementation_name": "cpython",
        "implementation_version": full,
        "os_name": os_name,
        "platform_machine": MARKER_MACHINES.get(platform, platform.split("-", 1)[1]),
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": system,
        "platform_version": "",
        "python_full_version": full,
        "python_version": ".".join(full.split(".")[:2]),
        "sys_platform": sys_platform,
    }


def platform_tags(platform: str, glibc: str | None = None, osx: str | None = None) -> list[str]:
    """The wheel platform tags a platform accepts, newest last (pip wants them spelled out)."""
    if platform.startswith("linux-"):
        arch = {"linux-64": "x86_64", "linux-aarch64": "aarch64", "linux-ppc64le": "ppc64le"}.get(platform, "x86_64")
        top = int((glibc or "2.17").split(".")[1])
        tags = [f"manylinux_2_{minor}_{arch}" for minor in range(17, max(top, 17) + 1)]
        return [f"manylinux2014_{arch}", *tags, f"linux_{arch}"]
    if platform.startswith("osx-"):
        arch = "arm64" if platform == "osx-arm64" else "x86_64"
        lowest = 11 if arch == "arm64" else 10
        highest = int((osx or "14.0").split(".")[0])
        versions = ([(10, m) for m in range(9, 16)] if arch == "x86_64" else []) + [(v, 0) for v in range(11, highest + 1)]
        return [f"macosx_{a}_{b}_{arch}" for a, b in versions if a >= lowest or arch == "x86_64"]
    if platform.startswith("win-"):
        return ["win_amd64"] if platform == "win-64" else ["win_arm64"]
    return []


@dataclass(frozen=True)
class PipJob:
    """One platform's pip list to resolve: `python` is the conda solution's (X.Y...), `conda_names`
    what that solution installs, `keep` the versions of the lock being replaced."""

    specs: tuple[str, ...]
    platform: str
    python: str
    conda_names: frozenset[str]
    virtual: dict[str, str]
    keep: tuple[tuple[str, str], ...] = ()


PIP_TIMEOUT = 1800  # seconds: a pip that takes longer is stuck (an index that stopped answering mid-transfer)


class PipStopped(Exception):
    """A pip run not started, or killed, because the lock is being stopped."""


class PipRuns:
    """The pip processes a lock has running, each in a session of its own, so that stopping the
    lock stops them all and what they started (git, a build backend): they run in threads, where
    neither Ctrl-C nor a SIGTERM sent to envkit alone arrives (envkit.core.interrupts)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._running: set[subprocess.Popen[str]] = set()
        self._stopped = False

    def run(self, args: list[str], env: dict[str, str]) -> tuple[int, str]:
        """(pip's exit status, its output)."""
        with self._guard:
            if self._stopped:
                raise PipStopped
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
            self._running.add(proc)
        try:
            out, _ = proc.communicate(timeout=PIP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._kill(proc)
            return -1, f"pip did not finish in {PIP_TIMEOUT // 60} minutes"
        except BaseException:
            self._kill(proc)
            raise
        finally:
            with self._guard:
                self._running.discard(proc)
        if self._stopped:
            raise PipStopped
        return proc.returncode, out or ""

    def stop(self) -> None:
        with self._guard:
            self._stopped = True
            running = list(self._running)
        for proc in running:
            self._kill(proc)

    @staticmethod
    def _kill(proc: subprocess.Popen[str]) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def resolve_each(jobs: list[PipJob]) -> list[tuple[LockedPip, ...]]:
    """Each platform's pip list at once: every one is a pip of its own, which spends its time on
    indexes and unpacking metadata, so three platforms take about as long as the slowest. The
    first to fail stops the rest, and its error is the one raised; an interrupt stops them all."""
    runs = PipRuns()
    if len(jobs) <= 1:
        return [resolve(job, runs) for job in jobs]
    with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="envkit-pip") as pool:
        futures = [pool.submit(resolve, job, runs) for job in jobs]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
        except BaseException:
            runs.stop()
            raise
        failed = [e for f in futures if f.done() and (e := f.exception()) is not None]
        if failed:
            runs.stop()
            wait(futures)
            raise next((e for e in failed if not isinstance(e, PipStopped)), failed[0])
        return [f.result() for f in futures]


def resolve(job: PipJob, runs: PipRuns) -> tuple[LockedPip, ...]:
    """Exact pip packages for the job's specs on its platform with CPython `python` (X.Y), at the
    versions `keep` names (the lock being replaced) where the specs allow them: a pin a spec itself
    rules out is let go; pip's constraints are hard, so where the rest cannot all hold, the pins
    pip names in its conflict are let go (one with no file for a new python, one a new
    requirement needs newer), then those of all that the new requirements need, and only where
    even that fails does pip resolve afresh."""
    specs, platform, python, virtual = job.specs, job.platform, job.python, job.virtual
    if not specs:
        return ()
    keep = still_allowed(specs, job.keep)
    major, minor = python.split(".")[:2]
    tags = platform_tags(platform, virtual.get("__glibc"), virtual.get("__osx"))
    provided = {canonicalize_name(CONDA_TO_PYPI.get(n, n)) for n in job.conda_names}
    with tempfile.TemporaryDirectory(prefix="envkit-pip-") as tmp:
        cmd = [
            sys.executable, "-c", PIP_FOR_TARGET, json.dumps(marker_environment(platform, python)),
            "install", "--dry-run", "--ignore-installed",  # not --quiet: it hides the conflict's causes
            "--target", str(Path(tmp) / "target"),  # pip takes --platform only with --target; a dry run writes nothing
            "--only-binary=:all:", "--implementation", "cp", "--python-version", f"{major}.{minor}",
            "--abi", f"cp{major}{minor}", "--abi", "abi3", "--abi", "none",
            *(arg for tag in tags for arg in ("--platform", tag)), "--platform", "any",
        ]  # fmt: skip
        found = keeping(keep, lambda pins: _dry_run(runs, cmd, specs, Path(tmp), pins)) if keep else None
        if found is None:
            fresh, output = _dry_run(runs, cmd, specs, Path(tmp), ())
            if fresh is None:
                why = ([line.strip() for line in output.splitlines() if line.strip()][-1:] or ["no output"])[0]
                raise SolveError(f"pip could not resolve {', '.join(specs)} for {platform}, Python {major}.{minor}: {why}")
            released = needed_by_new(specs, keep, fresh)
            narrower = tuple(pin for pin in keep if canonicalize_name(pin[0]) not in released)
            found = (_dry_run(runs, cmd, specs, Path(tmp), narrower)[0] if released and narrower else None) or fresh
    out = []
    for item in found:
        meta, info = item["metadata"], item["download_info"]
        name = canonicalize_name(meta["name"])
        if name in provided and not item.get("requested"):
            continue
        out.append(LockedPip(str(name), str(meta["version"]), exact_url(info)))
    return tuple(sorted(out, key=lambda p: p.name))


def _dry_run(
    runs: PipRuns, cmd: list[str], specs: tuple[str, ...], tmp: Path, keep: tuple[tuple[str, str], ...]
) -> tuple[list[dict[str, Any]] | None, str]:
    """pip's report of what `cmd` would install with `keep` as constraints, or None and pip's
    output where it fails."""
    report, constraints = tmp / "report.json", tmp / "keep.txt"
    report.unlink(missing_ok=True)
    args = [*cmd, "--report", str(report)]
    if keep:
        constraints.write_text(constraints_text(keep))
        args += ["--constraint", str(constraints)]
    args += ["--", *specs]  # a spec is never an option
    status, output = runs.run(args, {**os.environ, **PIP_ENVIRONMENT})
    if status != 0:
        return None, output
    return list(json.loads(report.read_text()).get("install", [])), ""


def needed_by_new(specs: tuple[str, ...], keep: tuple[tuple[str, str], ...], fresh: list[dict[str, Any]]) -> set[str]:
    """The names a fresh resolve's new requirements (specs naming no pinned package) need, all the
    way down, by what each package there requires (a requirement behind an extra counts only where
    the spec asks for that extra): the pins among them are what held the new requirement back."""
    pinned = {canonicalize_name(name) for name, _ in keep}
    requires: dict[str, list[Requirement]] = {}
    for item in fresh:
        reqs = []
        for text in item["metadata"].get("requires_dist") or []:
            with contextlib.suppress(InvalidRequirement):
                reqs.append(Requirement(text))
        requires[canonicalize_name(item["metadata"]["name"])] = reqs
    todo: list[tuple[str, frozenset[str]]] = []
    for spec in specs:
        with contextlib.suppress(InvalidRequirement):
            req = Requirement(spec)
            if canonicalize_name(req.name) not in pinned:
                todo.append((canonicalize_name(req.name), frozenset(canonicalize_name(e) for e in req.extras)))
    seen: set[str] = set()
    while todo:
        name, extras = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for req in requires.get(name, []):
            marker = str(req.marker or "").lower()  # packaging writes `extra == "name"`, the name normalized
            if 'extra == "' in marker and not any(f'extra == "{extra}"' in marker for extra in extras):
                continue
            todo.append((canonicalize_name(req.name), frozenset(canonicalize_name(e) for e in req.extras)))
    return seen


def still_allowed(specs: tuple[str, ...], keep: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The pins no spec rules out by name and version: a teammate who narrows one requirement
    (`mpmath <2`) moves that package only, where handing pip the old pin with it would fail and
    move every package. A spec that names a URL (`name @ url`) rules out every pin of its name."""
    ruled: dict[str, list[Requirement | None]] = {}
    for spec in specs:
        try:
            req = Requirement(spec)
        except InvalidRequirement:  # a path or an option: pip reads it, and says what is wrong
            continue
        ruled.setdefault(canonicalize_name(req.name), []).append(None if req.url else req)
    out = []
    for name, version in keep:
        reqs = ruled.get(canonicalize_name(name), [])
        try:
            fits = all(req is not None and req.specifier.contains(Version(version), prereleases=True) for req in reqs)
        except InvalidVersion:
            fits = False
        if fits:
            out.append((name, version))
    return tuple(out)


def at_locked_commits(specs: tuple[str, ...], locked: tuple[LockedPip, ...]) -> tuple[str, ...]:
    """`specs` with each VCS reference (`name @ git+URL@main`) taken at the commit the lock being
    replaced holds for it from that same repository: a re-lock does not move a branch's head any
    more than it moves a wheel to its index's newest version (`--update NAME` does)."""
    commits = {canonicalize_name(p.name): p.url for p in locked if vcs_source(p.url) is not None}
    out = []
    for spec in specs:
        try:
            req = Requirement(spec)
        except InvalidRequirement:
            out.append(spec)
            continue
        held = commits.get(canonicalize_name(req.name))
        source = vcs_source(req.url) if req.url else None
        if held and source is not None and source == vcs_source(held):
            extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
            marker = f" ; {req.marker}" if req.marker else ""
            out.append(f"{req.name}{extras} @ {held}{marker}")
        else:
            out.append(spec)
    return tuple(out)


def vcs_source(url: str) -> tuple[str, str] | None:
    """A VCS URL's repository and subdirectory, its revision left out (`git+URL@REV#subdirectory=S`
    -> ("git+URL", "S")); None for any other URL."""
    parts = vcs_parts(url)
    return (parts[0], parts[2]) if parts else None


def direct_references(specs: tuple[str, ...]) -> dict[str, tuple[str, str, bool]]:
    """The specs that name a URL (`name @ URL`), by canonical name: each spec, its URL, and whether
    that is a VCS reference (`git+URL@REF`, which moves with its branch) rather than a file or a
    folder (which is its own pin)."""
    out = {}
    for spec in specs:
        with contextlib.suppress(InvalidRequirement):
            req = Requirement(spec)
            if req.url:
                out[str(canonicalize_name(req.name))] = (spec, req.url, vcs_source(req.url) is not None)
    return out
