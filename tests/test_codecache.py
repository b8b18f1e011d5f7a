"""envkit.codecache: the compiled dataclass methods kept between runs. Every case starts new
interpreters, as the cache is one process's, installed by envkit's own entry; XDG_CACHE_HOME puts
the cache in the test's own folder."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_envkit
from tests.support.conda import conda_exe
from tests.support.wheelchannel import cpython

ROOT = Path(__file__).resolve().parent.parent

# What `envkit lock` creates before it solves: envkit's classes and rattler's.
LOCK_IMPORTS = """
import json, sys
from envkit import codecache
cache = codecache.install()
import envkit.cli, envkit.commands.lock
count = lambda groups: sum(len(texts) for texts in groups.values())
said = {"path": codecache.cache_path(), "used": count(cache.used), "new": count(cache.new), "modules": sorted(cache.new)}
codecache.save()
print(json.dumps(said))
"""

# Classes that use what dataclasses generates: defaults, factories, InitVar, __post_init__,
# ordering, frozen, slots, keyword-only fields; under `from __future__ import annotations`, which
# the generated methods must not inherit (their annotations are objects, not strings).
CLASSES = """
from __future__ import annotations

import dataclasses
from dataclasses import InitVar, dataclass, field
from typing import ClassVar


@dataclass(frozen=True, order=True)
class Pin:
    name: str
    version: str = "0"
    builds: tuple[str, ...] = ()
    kind: ClassVar[str] = "conda"


@dataclass
class Plan:
    pins: list[Pin] = field(default_factory=list)
    scale: InitVar[int] = 1
    total: int = field(init=False, default=0)

    def __post_init__(self, scale: int) -> None:
        self.total = len(self.pins) * scale


@dataclass(frozen=True, slots=True, kw_only=True)
class Slot:
    a: int
    b: str = "x"
"""

DESCRIBE = """
import dataclasses, inspect, json, sys
sys.path.insert(0, sys.argv[1])
from envkit import codecache
if sys.argv[2] == "cached":
    cache = codecache.install()
import classes
from classes import Pin, Plan, Slot

def code(fn):
    c = fn.__code__
    return [c.co_code.hex(), repr(c.co_consts), c.co_names, c.co_varnames, c.co_flags]

p, q = Pin("torch", "2.13", ("cpu",)), Pin("mkl")
try:
    p.name = "other"
    frozen = "set"
except dataclasses.FrozenInstanceError as exc:
    frozen = f"{type(exc).__name__}: {exc}"
said = {
    "repr": [repr(p), repr(Plan([p, q], scale=3)), repr(Slot(a=1))],
    "eq": [p == Pin("torch", "2.13", ("cpu",)), p == q, hash(p) == hash(Pin("torch", "2.13", ("cpu",)))],
    "order": [repr(x) for x in sorted([p, q])],
    "frozen": frozen,
    "signatures": [str(inspect.signature(c)) for c in (Pin, Plan, Slot)],
    "annotations": [repr(c.__init__.__annotations__) for c in (Pin, Plan, Slot)],
    "code": {f"{c.__name__}.{m}": code(getattr(c, m)) for c in (Pin, Plan, Slot) for m in ("__init__", "__repr__", "__eq__") },
}
if sys.argv[2] == "cached":
    said["cache"] = {"used": len(cache.used.get("classes", ())), "new": len(cache.new.get("classes", {}))}
    codecache.save()
print(json.dumps(said))
"""


def _python(code: str, *args: str, cache: Path, python: Path | str = sys.executable, **env: str) -> Any:
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environ.update({"PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(cache), **env})
    proc = subprocess.run([str(python), "-c", code, *args], capture_output=True, text=True, env=environ, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_second_start_compiles_no_method_the_first_compiled(tmp_path: Path) -> None:
    first = _python(LOCK_IMPORTS, cache=tmp_path / "cache")
    assert first["used"] == 0 and first["new"] > 100  # envkit's and rattler's classes: hundreds of methods
    assert {"envkit.errors", "envkit.lock", "rattler.repo_data.gateway"} <= set(first["modules"])
    path = Path(first["path"])
    assert path.parent == tmp_path / "cache" / "envkit" / "methods" and path.is_file()
    second = _python(LOCK_IMPORTS, cache=tmp_path / "cache")
    assert (second["new"], second["used"]) == (0, first["new"])


def test_the_cached_methods_are_the_ones_python_compiles(tmp_path: Path) -> None:
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "classes.py").write_text(CLASSES)
    plain = _python(DESCRIBE, str(tmp_path / "mod"), "plain", cache=tmp_path / "cache")
    cold = _python(DESCRIBE, str(tmp_path / "mod"), "cached", cache=tmp_path / "cache")
    warm = _python(DESCRIBE, str(tmp_path / "mod"), "cached", cache=tmp_path / "cache")
    cold_cache, warm_cache = cold.pop("cache"), warm.pop("cache")
    assert cold_cache["new"] >= 9 and warm_cache == {"used": cold_cache["new"], "new": 0}
    assert plain == cold == warm
    # the field types, as the class's module wrote them: a future flag inherited by the compile
    # would give the names of the generated code's locals ('_type_a') instead
    assert plain["annotations"][2] == "{'a': 'int', 'b': 'str', 'return': None}"


def test_envkit_itself_writes_the_cache_once_and_then_reads_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    assert run_envkit("audit", "--explain", "EK001", env=env).returncode == 0
    (path,) = (tmp_path / "cache" / "envkit" / "methods").glob("*.bin")
    written = path.read_bytes()
    assert run_envkit("audit", "--explain", "EK001", env=env).returncode == 0
    assert path.read_bytes() == written  # nothing new to compile, nothing rewritten
    assert not list(path.parent.glob("*.tmp"))


def test_no_cache_is_written_where_python_writes_no_bytecode(tmp_path: Path) -> None:
    said = _python(LOCK_IMPORTS, cache=tmp_path / "cache", PYTHONDONTWRITEBYTECODE="1")
    assert said["new"] > 100 and not Path(said["path"]).exists()


def test_a_cache_that_cannot_be_written_fails_nothing(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_CACHE_HOME"] = str(blocked)  # every folder under it is impossible to make
    proc = run_envkit("audit", "--explain", "EK001", "--json", env=env)
    assert proc.returncode == 0 and proc.stderr == "" and json.loads(proc.stdout)["ok"] is True


def _groups(data: bytes, start: bytes) -> dict[str, bytes]:
    groups: dict[str, bytes] = marshal.loads(data[len(start) :])
    return groups


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda data, start: data[: len(data) // 2], id="torn"),
        pytest.param(lambda data, start: start[:-5] + b"\x00\x00\r\n" + data[len(start) - 1 :], id="another-python"),
        pytest.param(lambda data, start: start + marshal.dumps(["a", "list"]), id="not-a-dict"),
        pytest.param(lambda data, start: start + marshal.dumps(dict.fromkeys(_groups(data, start), 1)), id="groups-not-bytes"),
        pytest.param(
            lambda data, start: (
                start + marshal.dumps({m: marshal.dumps(dict.fromkeys(marshal.loads(g), "pass")) for m, g in _groups(data, start).items()})
            ),
            id="not-code",
        ),
        pytest.param(lambda data, start: start + marshal.dumps(dict.fromkeys(_groups(data, start), b"\x00torn")), id="torn-groups"),
    ],
)
def test_a_torn_or_foreign_cache_is_ignored_and_replaced(tmp_path: Path, spoil: Callable[[bytes, bytes], bytes]) -> None:
    first = _python(LOCK_IMPORTS, cache=tmp_path / "cache")
    path = Path(first["path"])
    data = path.read_bytes()
    path.write_bytes(spoil(data, data[: len(b"envkit dataclass methods 2\n") + 5]))  # the format line, magic, -O level
    again = _python(LOCK_IMPORTS, cache=tmp_path / "cache")
    assert (again["used"], again["new"]) == (0, first["new"])  # read nothing from it
    assert _python(LOCK_IMPORTS, cache=tmp_path / "cache")["used"] == first["new"]  # replaced by a good one


NOBODY = 65534


def _root() -> None:
    if os.geteuid() != 0:
        pytest.fail("this test gives files to another user: run it as root (tools/test.sh runs the suite as root)")


def _give_away(path: Path) -> None:
    _root()
    os.chown(path, NOBODY, NOBODY)


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(_give_away, id="another-users"),
        pytest.param(lambda path: path.chmod(0o620), id="group-writable"),
        pytest.param(lambda path: path.chmod(0o602), id="world-writable"),
    ],
)
def test_a_cache_file_someone_else_could_have_written_is_not_run(tmp_path: Path, spoil: Callable[[Path], object]) -> None:
    """The file is code: a root run whose HOME is still a user's (sudo) must not run what that
    user, or anyone, could have put there."""
    first = _python(LOCK_IMPORTS, cache=tmp_path / "cache")
    path = Path(first["path"])
    assert path.stat().st_mode & 0o777 == 0o600
    spoil(path)
    again = _python(LOCK_IMPORTS, cache=tmp_path / "cache")
    assert (again["used"], again["new"]) == (0, first["new"])
    assert path.stat().st_uid == os.geteuid() and path.stat().st_mode & 0o777 == 0o600  # replaced by this user's own


def test_a_run_as_root_writes_no_cache_into_a_users_home(tmp_path: Path) -> None:
    _root()
    home = tmp_path / "users-home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    said = _python(LOCK_IMPORTS, cache=home / ".cache")  # no .cache yet: root would make it, and it would be root's
    assert said["new"] > 100 and os.listdir(home) == []
    (home / ".cache" / "envkit" / "methods").mkdir(parents=True)
    for folder in (home / ".cache", home / ".cache" / "envkit", home / ".cache" / "envkit" / "methods"):
        os.chown(folder, NOBODY, NOBODY)
    _python(LOCK_IMPORTS, cache=home / ".cache")
    assert os.listdir(home / ".cache" / "envkit" / "methods") == []


def test_a_module_whose_classes_changed_keeps_only_its_new_texts(tmp_path: Path) -> None:
    """An edit to a class (a new envkit) must not leave the old version's code in the file for good."""
    (tmp_path / "mod").mkdir()
    module = tmp_path / "mod" / "classes.py"
    texts = (
        "import json, sys\nsys.path.insert(0, sys.argv[1])\nfrom envkit import codecache\ncodecache.install()\nimport classes\n"
        "codecache.save()\nprint(json.dumps(sorted(codecache.codes_of(codecache.read_groups(codecache.cache_path())['classes']))))"
    )
    module.write_text(CLASSES)
    before = _python(texts, str(tmp_path / "mod"), cache=tmp_path / "cache")
    module.write_text(CLASSES.replace('    version: str = "0"\n', '    version: str = "0"\n    channel: str = "conda-forge"\n'))
    after = _python(texts, str(tmp_path / "mod"), cache=tmp_path / "cache")
    fresh = _python(texts, str(tmp_path / "mod"), cache=tmp_path / "fresh")  # the same classes, cached from nothing
    assert after == fresh and after != before
    assert any("channel" in text for text in after) and set(before) & set(after)  # Plan's and Slot's stayed


def test_a_save_takes_away_the_files_of_installs_unwritten_for_a_month(tmp_path: Path) -> None:
    folder = tmp_path / "cache" / "envkit" / "methods"
    folder.mkdir(parents=True)
    month_ago = time.time() - 31 * 86400
    gone_venv, killed_save, other_install = (
        folder / "cpython-311-0badc0de.bin",
        folder / "x.bin.123.tmp",
        folder / "cpython-311-0000beef.bin",
    )
    for path in (gone_venv, killed_save, other_install):
        path.write_bytes(b"x")
    for path in (gone_venv, killed_save):
        os.utime(path, (month_ago, month_ago))
    said = _python(LOCK_IMPORTS, cache=tmp_path / "cache")  # compiles, so it saves
    assert sorted(p.name for p in folder.iterdir()) == sorted([Path(said["path"]).name, other_install.name])


def test_the_cache_execs_as_exec_does_without_namespaces(tmp_path: Path) -> None:
    """No caller in dataclasses leaves them out today; exec's own default is the caller's frame."""
    code = (
        "import json; from envkit import codecache; cache = codecache.install()\n"
        "def inside():\n    here = 2\n    cache.exec('there = here + 1; print(json.dumps([here, there]))')\n"
        "x = 1; cache.exec('y = x + 1'); inside(); print(json.dumps(y))"
    )
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, check=False)
    assert proc.returncode == 0 and proc.stdout.splitlines() == ["[2, 3]", "2"], proc.stderr


def test_conda_with_the_plugin_keeps_pythons_own_exec(tmp_path: Path) -> None:
    """Conda loads envkit's plugin by its entry point, and `conda envkit` runs envkit.cli.run in
    conda's own process: no dataclass of conda's or another plugin's goes through the cache."""
    code = (
        "import dataclasses, json\n"
        "from conda.plugins.manager import get_plugin_manager\n"
        "names = [name for name, _ in get_plugin_manager().list_name_plugin()]\n"
        "import envkit.cli; from envkit import codecache\n"
        "print(json.dumps(['envkit.conda_plugin' in names, 'exec' in vars(dataclasses), codecache.installed() is None]))"
    )
    said = _python(code, cache=tmp_path / "cache", python=conda_exe().parent / "python", PYTHONPATH="")
    assert said == [True, False, True]


@pytest.mark.parametrize("minor", [12, 13])
def test_newer_pythons_compile_dataclass_methods_through_the_cache(tmp_path: Path, minor: int) -> None:
    """3.13 compiles a class's methods as one text: still through the module's `exec`."""
    python, _ = cpython(minor)
    code = (
        "import json; from envkit import codecache; cache = codecache.install()\n"
        "from dataclasses import dataclass\n"
        "@dataclass(frozen=True)\nclass Pin:\n    name: str\n    version: str = '0'\n"
        "said = [len(cache.used), len(cache.new), repr(Pin('torch'))]; codecache.save(); print(json.dumps(said))"
    )
    cold = _python(code, cache=tmp_path / "cache", python=python)
    warm = _python(code, cache=tmp_path / "cache", python=python)
    assert cold[1] > 0 and warm == [cold[1], 0, "Pin(name='torch', version='0')"]
