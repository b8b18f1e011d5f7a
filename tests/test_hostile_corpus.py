"""Every command over the hostile-input corpus (tests/hostile/, its README says what is there): no
traceback, no hang, no write outside the scratch directory, no canary file (no code ran).

Each run gets the same scratch HOME, working directory and TMPDIR; the corpus's payloads all
`touch` a file in CANARY. The tree around the scratch directory is listed before and after: a
write outside it is a failure too. Commands that change envs run only on names and on prefixes
inside the scratch directory: nothing here may be pointed at the machine's own folders to remove."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import run_envkit
from tests.support.tiny import tiny_channel, tiny_recipe

CORPUS = Path(__file__).parent / "hostile"
TIMEOUT = 120


@dataclass(frozen=True)
class Scene:
    root: Path
    scratch: Path
    canary: Path
    channel: Path
    recipe: Path  # a valid recipe, for the lock and condarc cases
    fills: dict[str, str]

    def fill(self, text: str) -> str:
        for key, value in self.fills.items():
            text = text.replace(key, value)
        return text

    def env(self) -> dict[str, str]:
        return dict(
            os.environ,
            HOME=str(self.scratch / "home"),
            TMPDIR=str(self.scratch / "tmp"),
            XDG_CACHE_HOME=str(self.scratch / "cache"),
            XDG_CONFIG_HOME=str(self.scratch / "config"),
            CONDA_ENVS_PATH=str(self.scratch / "envs"),
            ENVKIT_PKGS_DIR=str(self.scratch / "pkgs"),
        )


def _listing(root: Path, skip: Path) -> dict[str, float]:
    out = {}
    for here, dirs, files in os.walk(root):
        if Path(here) == skip:
            dirs[:] = []
            continue
        for name in files:
            path = Path(here) / name
            out[str(path)] = path.lstat().st_mtime
    return out


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    root = tmp_path_factory.mktemp("hostile")
    scratch, canary = root / "scratch", root / "canary"
    for folder in (scratch / "home", scratch / "tmp", scratch / "envs", scratch / "work", canary):
        folder.mkdir(parents=True)
    (scratch / "a-file").write_text("not an env\n")
    channel = tiny_channel(root)
    recipe = tiny_recipe(root, channel)
    repo = root / "repo"
    subprocess.run(["git", "init", "--quiet", "--bare", str(repo)], check=True)
    fills = {"@CANARY@": str(canary), "@CHANNEL@": channel.as_uri(), "@CHANNEL_PATH@": str(channel), "@SCRATCH@": str(scratch)}
    fills["@REPO@"] = str(repo)
    scene = Scene(root, scratch, canary, channel, recipe, fills)
    fresh = run_envkit("lock", str(recipe), "--platform", "linux-64", env=scene.env())
    assert fresh.returncode == 0, fresh.stderr
    text = recipe.with_suffix(".lock").read_text()
    for name in ("helper", "tool"):
        record = text[text.index(f"- conda: {channel}/linux-64/{name}-1.0-0.tar.bz2\n  subdir") :]
        fills[f"@SHA256_{name}@"] = re.search(r"sha256: (\w+)", record).group(1)  # type: ignore[union-attr]
        fills[f"@MD5_{name}@"] = re.search(r"md5: (\w+)", record).group(1)  # type: ignore[union-attr]
    fills["@RECIPE_DIGEST@"] = re.search(r'"recipe_digest": "(\w+)"', text).group(1)  # type: ignore[union-attr]
    before = _listing(root, scratch)
    yield scene
    assert _listing(root, scratch) == before, "a command wrote outside the scratch directory"


def _run(scene: Scene, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "envkit", *args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=scene.env(),
            cwd=cwd or scene.scratch / "work",
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"envkit {' '.join(args)!r} hung (over {TIMEOUT} s)")
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, (args, proc.stderr)
    assert proc.returncode not in (70, -11, -6), (args, proc.returncode, proc.stderr)  # an internal error, a crash
    assert "\x1b" not in proc.stdout + proc.stderr, f"a control sequence reached the terminal: {args}"
    canaries = sorted(p.name for p in scene.canary.iterdir())
    canaries += sorted(p.name for p in (scene.scratch / "home").glob(".PWNED*"))  # payloads that cannot name a path (`cd; touch .PWNED`)
    assert not canaries, f"code ran: {canaries} after envkit {args}"
    return proc


def _activate_in_bash(scene: Scene, prefix: Path) -> None:
    scripts = sorted((prefix / "etc" / "conda" / "activate.d").glob("*.sh"))
    lines = ["set -eu", *(f". '{s}'" for s in scripts), "env > /dev/null"]
    subprocess.run(["bash", "--norc", "-c", "\n".join(lines)], env=scene.env(), capture_output=True, timeout=60, check=False)
    assert not list(scene.canary.iterdir()), "code ran at activation"


def _ids(folder: str) -> list[str]:
    return sorted(p.name for p in (CORPUS / folder).iterdir())


@pytest.mark.parametrize("name", _ids("recipes"))
def test_a_hostile_recipe(scene: Scene, name: str) -> None:
    path = scene.scratch / "work" / name
    path.write_text(scene.fill((CORPUS / "recipes" / name).read_text(encoding="utf-8")), encoding="utf-8")
    prefix = scene.scratch / "envs" / f"made-{path.stem}"
    for args in (
        ("recipes", "validate", str(path)),
        ("recipes", "check", str(path)),
        ("recipes", "show", str(path)),
        ("recipes", "show", "--resolved", str(path)),
        ("lock", str(path), "--dry-run"),
        ("create", str(path), "-p", str(prefix), "--dry-run"),
        ("create", str(path), "-p", str(prefix), "--yes", "--no-probe"),
    ):
        _run(scene, *args)
    made = (prefix / "conda-meta").is_dir()
    if made:  # a recipe envkit accepted: everything over its env
        _activate_in_bash(scene, prefix)
        for args in (
            ("activation", "show", "-p", str(prefix), "--shell", "zsh"),
            ("run", "-p", str(prefix), "--", "true"),
            ("audit", "-p", str(prefix)),
            ("export", "-p", str(prefix), "--format", "environment-yml"),
            ("toolchain", "-p", str(prefix)),
            ("sync", "-p", str(prefix), "--dry-run"),
            ("remove", "-p", str(prefix), "--yes"),
        ):
            _run(scene, *args)
    if name.startswith(("ps0", "histfilesize", "conda-prefix", "ld-preload", "backslash", "huge-integer", "yaml-python", "nul-byte")):
        assert not made, f"{name} made an env: it must be refused"


@pytest.mark.parametrize("name", _ids("locks"))
def test_a_hostile_lock(scene: Scene, name: str) -> None:
    folder = scene.scratch / "work" / f"lock-{name}"
    folder.mkdir()
    recipe = folder / "tiny.yaml"
    recipe.write_text(scene.recipe.read_text())
    lock = folder / "tiny.lock"
    lock.write_text(scene.fill((CORPUS / "locks" / name).read_text(encoding="utf-8")), encoding="utf-8")
    prefix = scene.scratch / "envs" / f"locked-{Path(name).stem}"
    for args in (
        ("recipes", "check", str(recipe)),
        ("export", "--lock", str(lock), "--format", "environment-yml"),
        ("export", "--lock", str(lock), "--format", "explicit"),
        ("create", str(recipe), "--locked", "-p", str(prefix), "--dry-run"),
        ("create", str(recipe), "--locked", "-p", str(prefix), "--yes", "--no-probe"),
    ):
        _run(scene, *args, cwd=folder)
    made = (prefix / "conda-meta").is_dir()
    if made:
        _activate_in_bash(scene, prefix)
        _run(scene, "remove", "-p", str(prefix), "--yes")
    assert not made, f"{name} made an env: it must be refused"


@pytest.mark.parametrize("name", _ids("condarc"))
def test_a_hostile_condarc(scene: Scene, name: str) -> None:
    condarc = scene.scratch / "home" / ".condarc"
    condarc.write_text(scene.fill((CORPUS / "condarc" / name).read_text(encoding="utf-8")), encoding="utf-8")
    try:
        for args in (
            ("create", str(scene.recipe), "-p", str(scene.scratch / "envs" / "rc"), "--dry-run"),
            ("list",),
            ("audit", "--all"),
            ("lock", str(scene.recipe), "--dry-run"),
        ):
            _run(scene, *args)
    finally:
        condarc.unlink()


def _lines(name: str, scene: Scene) -> list[str]:
    return [scene.fill(line) for line in (CORPUS / name).read_text(encoding="utf-8").splitlines() if line]


def _reads(flag: str, target: str, scene: Scene) -> list[tuple[str, ...]]:
    """Every command that takes an env, given it by name (-n) or by prefix (-p)."""
    return [
        ("create", str(scene.recipe), flag, target, "--dry-run"),
        ("audit", flag, target),
        ("sync", flag, target, "--dry-run"),
        ("run", flag, target, "--", "true"),
        ("export", flag, target, "--format", "explicit"),
        ("activation", "show", flag, target),
        ("probe", flag, target),
        ("toolchain", flag, target),
    ]


def test_hostile_env_names(scene: Scene) -> None:
    for name in _lines("names.txt", scene):
        for args in (*_reads("-n", name, scene), ("remove", "-n", name, "--yes")):
            _run(scene, *args)


def test_hostile_prefixes(scene: Scene) -> None:
    for path in _lines("paths.txt", scene):
        for args in _reads("-p", path, scene):
            _run(scene, *args)
        if path.startswith(str(scene.scratch)) and ".." not in path:  # never a machine's own folder to remove
            _run(scene, "remove", "-p", path, "--yes")
