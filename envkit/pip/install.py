"""pip inside an env, for the wheels a recipe or a lock names beyond conda: install them, put back
what pip changed since envkit installed them, and move the paths pip wrote from a staging prefix
to the final one.

A locked wheel is pinned twice: by the URL it was resolved from and by its sha256. The URL belongs
to the machine that locked it (PyPI, the office mirror, a wheelhouse on a laptop's disk); the hash
is the file itself. So a locked wheel is installed from its URL, and where that fails (another
mirror, no route to that one, a wheelhouse left behind) by name, version and hash through this
machine's own pip settings, which accept that very file and no other: what `create --locked`
does for conda channels with this machine's mirrors.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlsplit

from envkit.core.argv import is_dist_name, is_sha256
from envkit.core.errors import InstallError, SolveError
from envkit.core.notices import notify
from envkit.prefix.installed import pip_dists
from envkit.prefix.pipurls import exact_url

if TYPE_CHECKING:
    from envkit.pip.repair import PipRepair

UNREACHABLE_HINT = "make the files reachable from this machine (PIP_INDEX_URL, PIP_FIND_LINKS or pip.conf), or lock again where they are"


# What envkit's pip runs put over the user's settings. A conda env's python is no venv, so:
# - PIP_REQUIRE_VIRTUALENV, which many set to keep pip out of a system python, would refuse it,
#   where envkit installs into the env it made on purpose;
# - the user site (~/.local/lib/pythonX.Y/site-packages) is on its sys.path: pip would take a
#   wheel `pip install --user` left there as installed and put nothing into the env, which would
#   then work for that user on that machine only;
# - `user = true` in pip.conf (PIP_USER) would send the wheels to that user site, not the env,
#   and so would a target, prefix or root set for pip (PIP_TARGET, PIP_PREFIX, PIP_ROOT, or in
#   pip.conf) send them elsewhere; pip reads an empty value as none set.
# And `upgrade = true` in pip.conf would move every wheel of the list to its newest whenever the
# list changes, where envkit moves only what `--update` names (and passes --upgrade itself then).
# pip's own upgrade notice is noise in envkit's errors.
PIP_ENVIRONMENT = {
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_REQUIRE_VIRTUALENV": "0",
    "PYTHONNOUSERSITE": "1",
    "PIP_USER": "0",
    "PIP_TARGET": "",
    "PIP_PREFIX": "",
    "PIP_ROOT": "",
    "PIP_UPGRADE": "0",
    "PIP_UPGRADE_STRATEGY": "only-if-needed",
}


def by_hash(name: str, url: str, version: str | None = None) -> str | None:
    """`name==version --hash=sha256:X`, a requirement line pip fills from this machine's index with
    the file at `url#sha256=X` only; the version from the file's name where none is given. None
    where the URL names no hash or its file no version."""
    location, _, sha256 = url.partition("#sha256=")
    if not is_sha256(sha256) or not is_dist_name(name):  # a requirements file reads '-' and spaces as options
        return None
    if version is None:
        from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename

        filename = unquote(urlsplit(location).path.rsplit("/", 1)[-1])
        try:
            version = str(parse_wheel_filename(filename)[1] if filename.endswith(".whl") else parse_sdist_filename(filename)[1])
        except (InvalidWheelFilename, InvalidSdistFilename):
            return None
    return f"{name}=={version} --hash=sha256:{sha256}"


def _locked_by_hash(specs: tuple[str, ...]) -> list[str] | None:
    """The by-hash lines for locked `name @ URL#sha256=X` specs; None unless every one has one
    (pip's hash-checking mode is all or nothing)."""
    lines = []
    for spec in specs:
        name, at, url = spec.partition(" @ ")
        line = by_hash(name.strip(), url.strip()) if at else None
        if line is None:
            return None
        lines.append(line)
    return lines


def _pip(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **PIP_ENVIRONMENT}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False, env=env)


def _from_this_machine(cmd: list[str], lines: list[str], folder: Path, *, first: str, what: str, hint: str) -> None:
    """Run `cmd` (a pip install whose sources failed with `first`) again on the by-hash `lines`."""
    requirements = folder / "by-hash.txt"
    requirements.write_text("".join(f"{line}\n" for line in lines))
    again = _pip([*cmd, "--no-deps", "-r", str(requirements)])
    if again.returncode != 0:
        raise InstallError(
            f"{what}: {first}; nor did this machine's pip settings offer the same files: {pip_reason(again.stderr or again.stdout)}",
            hint=hint,
        )
    notify(
        f"pip: {len(lines)} wheel(s) could not be installed from the URLs recorded for them ({first}); "
        "the very same files (sha256-checked) came through this machine's pip settings"
    )


def pip_reason(output: str) -> str:
    """One line from pip's failure: its last `ERROR:` line (the most precise: "No matching
    distribution found for X"), first sentence only; for a hash mismatch, which file and both
    digests (pip puts those on the lines after its ERROR, and ends with "Got <hex>")."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line.removeprefix("ERROR:").strip() for line in lines if line.startswith("ERROR:")]
    if not errors:
        return lines[-1] if lines else "no output"
    reason = errors[-1].split(". ")[0].rstrip(".")
    at = next((n for n, line in enumerate(lines) if line.startswith("Expected sha256 ")), None)
    if "DO NOT MATCH THE HASHES" in reason and at and at + 1 < len(lines) and lines[at + 1].startswith("Got "):
        # "NAME @ URL#sha256=...:" (or "NAME==V from URL:"), then "Expected sha256 X", then "Got Y"
        what = lines[at - 1].rstrip(":").split("#", 1)[0]
        return f"{what}: its sha256 is {lines[at + 1].split()[-1]}, not the {lines[at].split()[-1]} its lock or requirement names"
    return reason


def pip_install(
    prefix: Path,
    specs: tuple[str, ...],
    *,
    final_prefix: Path | None = None,
    locked: bool = False,
    keep: tuple[tuple[str, str], ...] = (),
) -> list[dict[str, str]]:
    """pip into the (staging) env; with `final_prefix`, the paths pip wrote into its files (script
    shebangs) are moved to the final prefix, as rattler does for conda packages. Locked specs are
    exact URLs (with #sha256=, which pip checks), installed as they are, no resolving; by hash
    through this machine's pip settings where their URLs fail. `keep`: versions to stay at where
    they can all hold (constraints), else resolved afresh. Returns what pip installed, URL and
    hash included (its --report), for the record, exports and locks."""
    if not specs:
        return []
    python = prefix / "bin" / "python"
    if not python.exists():
        raise InstallError(f"the recipe has a pip list but {python} does not exist", hint="add python to the recipe")
    before = set(pip_dists(prefix))
    with tempfile.TemporaryDirectory(prefix="envkit-pip-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [str(python), "-m", "pip", "install", "--no-input", "--no-compile", "--report", str(report)]
        held = Path(tmp) / "keep.txt"

        def attempt(pins: tuple[tuple[str, str], ...]) -> tuple[subprocess.CompletedProcess[str] | None, str]:
            held.write_text(constraints_text(pins))
            tried = _pip([*cmd, "--constraint", str(held), "--", *specs])  # pip resolves before it installs: a failure changed nothing
            return (tried if tried.returncode == 0 else None), (tried.stdout or "") + (tried.stderr or "")

        proc = keeping(keep, attempt) if keep and not locked else None
        if proc is None:
            proc = _pip([*cmd, *(["--no-deps"] if locked else []), "--", *specs])
        if proc.returncode != 0:
            first = pip_reason(proc.stderr or proc.stdout)
            lines = _locked_by_hash(specs) if locked else None
            if lines is None:
                raise InstallError(f"pip install failed: {first}")
            _from_this_machine(cmd, lines, Path(tmp), first=first, what="pip install failed", hint=UNREACHABLE_HINT)
        installed = _reported(report)
    if final_prefix is not None and final_prefix != prefix:
        relocate_pip_files(prefix, final_prefix, [d for name, d in pip_dists(prefix).items() if name not in before])
    return installed


# how pip names a constraint in a conflict it cannot resolve ("The conflict is caused by: ...")
CONFLICT_PIN = re.compile(r"The user requested \(constraint\) ([A-Za-z0-9][A-Za-z0-9._-]*)==")
RELEASE_ROUNDS = 5  # pip runs spent letting named pins go


T = TypeVar("T")


def keeping(keep: tuple[tuple[str, str], ...], attempt: Callable[[tuple[tuple[str, str], ...]], tuple[T | None, str]]) -> T | None:
    """`attempt` with `keep` as pip constraints; where they cannot all hold, the pins pip blames in
    its conflict are let go and it is tried again, a few rounds (each let-go can bring the next
    conflict to light: a wheel with no file for a new python, one a new requirement needs newer).
    `attempt` gives its result, or None and pip's output. None where that does not settle it."""
    from packaging.utils import canonicalize_name

    for _ in range(RELEASE_ROUNDS):
        found, output = attempt(keep)
        if found is not None:
            return found
        blamed = {canonicalize_name(name) for name in CONFLICT_PIN.findall(output)}
        narrower = tuple(pin for pin in keep if canonicalize_name(pin[0]) not in blamed)
        if not narrower or narrower == keep:
            return None
        keep = narrower
    return None


def _dry_run_cmd(prefix: Path, report: Path) -> list[str]:
    """pip install in the env's python, as a dry run with its report: nothing is installed."""
    return [str(prefix / "bin" / "python"), "-m", "pip", "install", "--dry-run", "--no-input", "--quiet", "--report", str(report)]


def _reported(report: Path) -> list[dict[str, str]]:
    """What pip's --report says it installed: name, version, and the URL it took (with #sha256=)."""
    from packaging.utils import canonicalize_name  # packaging: loaded where pip runs, which is slower by far

    installed = []
    for item in json.loads(report.read_text()).get("install", []):
        url = exact_url(item.get("download_info", {}))
        installed.append({"name": canonicalize_name(item["metadata"]["name"]), "version": str(item["metadata"]["version"]), "url": url})
    return sorted(installed, key=lambda p: p["name"])


def pip_put_back(prefix: Path, repair: PipRepair) -> list[dict[str, str]]:
    """Undo what pip changed in the env since envkit installed it: uninstall what was pip-installed
    since, then reinstall the recorded wheels as they were (no resolving: --no-deps): from their
    exact URLs (pip checks the hash), by hash through this machine's pip settings where those
    fail, by name and version where the record kept no URL. Returns what pip installed, with the
    URLs it took them from, for the record."""
    python = str(prefix / "bin" / "python")
    if repair.extra:
        names = [name for name, _ in repair.extra]
        proc = _pip([python, "-m", "pip", "uninstall", "--yes", "--", *names])
        if proc.returncode != 0:
            raise InstallError(f"pip could not uninstall {', '.join(names)}: {pip_reason(proc.stderr or proc.stdout)}")
    if not repair.missing:
        return []
    wheels = ", ".join(f"{name} {version}" for name, version, _ in repair.missing)
    with tempfile.TemporaryDirectory(prefix="envkit-pip-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [python, "-m", "pip", "install", "--no-input", "--no-compile", "--report", str(report)]
        proc = _pip([*cmd, "--no-deps", "--", *(url or f"{name}=={version}" for name, version, url in repair.missing)])
        if proc.returncode != 0:
            first = pip_reason(proc.stderr or proc.stdout)
            what = f"pip could not put back {wheels} from the files envkit recorded"
            by_hand = " ".join(f"{name}=={version}" for name, version, _ in repair.missing)
            hint = (
                f"if those files are gone, install the same versions by hand: {prefix}/bin/python -m pip install {by_hand}; then sync again"
            )
            lines = [by_hash(name, url, version) if url else None for name, version, url in repair.missing]
            if None in lines:
                raise InstallError(f"{what}: {first}", hint=hint)
            _from_this_machine(cmd, [line for line in lines if line], Path(tmp), first=first, what=what, hint=hint)
        return _reported(report)


def relocate_pip_files(staging: Path, final: Path, dists: list[Any]) -> None:
    old, new = str(staging).encode(), str(final).encode()
    for dist in dists:
        record = staging / dist.dist_info / "RECORD"
        if not record.is_file():
            continue
        site = record.parent.parent
        for line in record.read_text(errors="replace").splitlines():
            path = (site / line.split(",", 1)[0]).resolve()
            if not path.is_file() or path.is_symlink() or staging.resolve() not in path.parents:
                continue
            data = path.read_bytes()
            if old in data and b"\0" not in data[:8192]:  # text files only, as conda does
                path.write_bytes(data.replace(old, new))


def pip_upgrades(
    prefix: Path, specs: tuple[str, ...], names: tuple[str, ...], hold: tuple[tuple[str, str], ...], *, eager: bool
) -> tuple[list[dict[str, str]], set[str]]:
    """What `pip install --upgrade` would install in the env to move `names` (every wheel, with
    `eager`) while the recipe's `specs` still hold and every distribution in `hold` stays at its
    version (conda's own python packages, the wheels not named): exact files with their hashes, so
    that the change a sync shows is the one it makes (installed by URL, --no-deps); and the names
    those files require (markers not weighed). A dry run."""
    python = prefix / "bin" / "python"
    if not python.exists():
        raise InstallError(f"the env has pip wheels to move but {python} does not exist", hint=f"see 'envkit audit -p {prefix}'")
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    with tempfile.TemporaryDirectory(prefix="envkit-pip-") as tmp:
        report, held = Path(tmp) / "report.json", Path(tmp) / "hold.txt"
        held.write_text(constraints_text(hold))
        cmd = [*_dry_run_cmd(prefix, report), "--upgrade", *(["--upgrade-strategy", "eager"] if eager else [])]
        cmd += ["--constraint", str(held), "--", *specs, *names]
        proc = _pip(cmd)
        if proc.returncode != 0:
            moving = ", ".join(names) if names else "the env's wheels"
            raise SolveError(
                f"pip could not move {moving} with the rest held where they are: {pip_reason(proc.stderr or proc.stdout)}",
                hint="give what must move with it an --update of its own, or --update-all",
            )
        required = set()
        for item in json.loads(report.read_text()).get("install", []):
            for text in item.get("metadata", {}).get("requires_dist") or []:
                try:
                    required.add(str(canonicalize_name(Requirement(text).name)))
                except InvalidRequirement:
                    continue
        return _reported(report), required


def constraints_text(hold: tuple[tuple[str, str], ...]) -> str:
    """A pip constraints file holding each distribution at its version; a legacy version pip cannot
    pin is left out (it stays installed all the same)."""
    from packaging.version import InvalidVersion, Version

    lines = []
    for name, version in hold:
        try:
            Version(version)
        except InvalidVersion:
            continue
        if not is_dist_name(name):  # a line of a requirements file that begins with '-' is an option
            continue
        lines.append(f"{name}=={version}\n")
    return "".join(lines)


def pip_refs(prefix: Path, refs: tuple[str, ...], hold: tuple[tuple[str, str], ...]) -> tuple[list[dict[str, str]], set[str]]:
    """Where VCS references (`name @ git+URL@main`) stand now, and what that needs: pip's
    `--upgrade` keeps a reference already installed whatever its branch's head has become, so each
    is resolved on its own, nothing installed counting; then what the version there requires is
    resolved in the env with `hold` at their versions. Returns the exact files (each reference at
    its commit, and what the env lacks for them) and the names they require. A dry run."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    asked = {canonicalize_name(req.name): req for req in map(Requirement, refs)}
    with tempfile.TemporaryDirectory(prefix="envkit-pip-") as tmp:
        report, held = Path(tmp) / "report.json", Path(tmp) / "hold.txt"
        proc = _pip([*_dry_run_cmd(prefix, report), "--ignore-installed", "--no-deps", "--", *refs])
        if proc.returncode != 0:
            raise SolveError(
                f"pip could not resolve {', '.join(refs)}: {pip_reason(proc.stderr or proc.stdout)}",
                hint="check that the repository answers and has that branch, tag or commit",
            )
        needs: list[Requirement] = []
        for item in json.loads(report.read_text()).get("install", []):
            ref = asked.get(canonicalize_name(item["metadata"]["name"]))
            extras = ref.extras if ref else set()
            for text in item["metadata"].get("requires_dist") or []:
                try:
                    req = Requirement(text)
                except InvalidRequirement:
                    continue
                if req.marker is not None:
                    if not any(req.marker.evaluate({"extra": extra}) for extra in (extras or {""})):
                        continue
                    req.marker = None  # weighed here: pip is not asked for any extra
                needs.append(req)
        found = _reported(report)
        if not needs:
            return found, set()
        held.write_text(constraints_text(hold))
        proc = _pip([*_dry_run_cmd(prefix, report), "--constraint", str(held), "--", *map(str, needs)])
        if proc.returncode != 0:
            raise SolveError(
                f"pip could not give {', '.join(asked)} what it needs now with the rest held where they are: {pip_reason(proc.stderr or proc.stdout)}",
                hint="give what must move with it an --update of its own, or --update-all",
            )
        return found + _reported(report), {str(canonicalize_name(req.name)) for req in needs}


def pip_file(prefix: Path, name: str, version: str) -> str:
    """The URL (with its sha256) of the file this machine's pip settings offer for `name==version`,
    or "" where they offer none: for a wheel installed by hand that envkit now records, so that a
    put-back, an export or a lock has the file and not only its version."""
    with tempfile.TemporaryDirectory(prefix="envkit-pip-") as tmp:
        report = Path(tmp) / "report.json"
        proc = _pip([*_dry_run_cmd(prefix, report), "--ignore-installed", "--no-deps", "--", f"{name}=={version}"])
        found = _reported(report) if proc.returncode == 0 else []
    return found[0]["url"] if found and "#sha256=" in found[0]["url"] else ""


def pip_newest(prefix: Path, names: tuple[str, ...]) -> dict[str, str]:
    """The newest version of each wheel that this machine's pip settings offer for the env's python,
    whatever is installed. pip's `--upgrade` says nothing when its index cannot be reached (it keeps
    what is installed, as if that were the newest); asked this way, no file is a failure."""
    with tempfile.TemporaryDirectory(prefix="envkit-pip-") as tmp:
        report = Path(tmp) / "report.json"
        proc = _pip([*_dry_run_cmd(prefix, report), "--ignore-installed", "--no-deps", "--", *names])
        if proc.returncode != 0:
            raise SolveError(
                f"pip found no file for {', '.join(names)} to move to: {pip_reason(proc.stderr or proc.stdout)}",
                hint="check that this machine's pip index answers (PIP_INDEX_URL, PIP_FIND_LINKS or pip.conf)",
            )
        return {p["name"]: p["version"] for p in _reported(report)}
