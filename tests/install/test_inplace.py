"""The installer child a sync starts before it has solved: it must never outlive envkit, however
envkit ends, and the installed records it reads while it waits must not be used once the env has
changed. Its jobs, failed ones included, are also tested through sync (tests/team/test_sync.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from envkit.core.errors import InstallError
from envkit.install import inplace
from envkit.install.inplace import Installer, change_env
from envkit.prefix.condameta import records_state
from tests.support.condapkg import PkgMeta
from tests.support.procs import alive, gone_within
from tests.support.tiny import tiny_channel


def test_an_unused_installer_is_gone_once_closed() -> None:
    """A sync that ends before its change (nothing to do, refused, declined, failed solve)."""
    with Installer() as installer:
        pid = installer._child.pid
        assert alive(pid)
    assert not alive(pid)


# A Python thread started first makes envkit spawn the child where it would fork it (see Installer)
THREADED = "import threading, time; threading.Thread(target=time.sleep, args=(600,), daemon=True).start()"
HOW = {"forked": "", "spawned": THREADED}


@pytest.mark.parametrize("how", sorted(HOW))
def test_the_waiting_installer_dies_with_a_killed_envkit(tmp_path: Path, how: str) -> None:
    """kill -9 while envkit solves or asks: the child started ahead goes too (its stdin ends, and
    the parent-death signal fires), and no installer is left behind for the next run to race."""
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOW[how]
            + textwrap.dedent(
                """
                import sys, time
                from envkit.install.inplace import Installer
                installer = Installer()
                print(installer._child.pid, installer.forked, flush=True)
                time.sleep(600)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    pid, forked = parent.stdout.readline().split()
    child = int(pid)
    assert forked == str(how == "forked")
    assert alive(child)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=30)
    assert gone_within(lambda: [child] if alive(child) else []), "the installer child outlived the killed envkit"


CHANGE = """
import json, os, sys
from pathlib import Path
import rattler
from envkit.install.inplace import ENVIRONMENT, Installer
plan, prefix, cache = map(Path, sys.argv[1:4])
env = rattler.LockFile.from_path(plan).environment(ENVIRONMENT)
records = [r for recs in env.conda_repodata_records().values() for r in recs]
installer = Installer(prefix)
child = Path(f"/proc/{installer._child.pid}/cmdline").read_bytes().split(b"\\0")
installed = installer.installed()
installer.change(records, prefix, cache, ["tool"])
print(json.dumps({"forked": installer.forked, "child": [c.decode() for c in child if c], "installed": installed}))
"""


@pytest.mark.parametrize("closed", [False, True], ids=["", "stdin-closed"])
@pytest.mark.parametrize("how", sorted(HOW))
def test_a_forked_and_a_spawned_child_make_the_same_change(tmp_path: Path, how: str, closed: bool) -> None:
    """A sync forks its installer (rattler loaded once, for both; its threads not yet started) and
    spawns one where threads already run; either reads the env and changes it alike, also for an
    envkit run with its stdin closed, whose pipes then take the standard fds' numbers."""
    channel = tiny_channel(tmp_path, payload=b"v2\n")
    prefix, cache = tmp_path / "env", tmp_path / "cache"
    change_env(_records(channel, ["helper"]), prefix, cache, ["helper"])
    plan = tmp_path / "plan.lock"
    inplace._write_records(_records(channel, ["tool"]), plan)
    done = subprocess.run(
        [sys.executable, "-c", HOW[how] + CHANGE, str(plan), str(prefix), str(cache)],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=(lambda: os.close(0)) if closed else None,
    )
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["forked"] is (how == "forked")
    # a fork runs the parent's own command line; a spawn, a new interpreter on envkit.install.inplace
    assert ("envkit.install.inplace" in said["child"]) is (how == "spawned")
    assert said["installed"] == {"helper": "1.0 0"}
    assert (prefix / "share" / "tool" / "version.txt").read_text() == "v2\n"
    assert sorted(p.name for p in (prefix / "conda-meta").glob("*.json")) == ["helper-1.0-0.json", "tool-1.0-0.json"]


WAIT_THEN_CHANGE = """
import sys
from pathlib import Path
import rattler
from envkit.install.inplace import ENVIRONMENT, Installer
plan, prefix, cache = map(Path, sys.argv[1:4])
env = rattler.LockFile.from_path(plan).environment(ENVIRONMENT)
records = [r for recs in env.conda_repodata_records().values() for r in recs]
installer = Installer(prefix)
assert installer.installed() is not None
print("read", flush=True)
sys.stdin.readline()  # the test's go: only now does the child get its job
installer.change(records, prefix, cache, ["tool"])
print("changed", flush=True)
"""


@pytest.mark.parametrize("how", sorted(HOW))
def test_the_waiting_child_makes_its_http_client_before_the_job_comes(tmp_path: Path, how: str) -> None:
    """Making rattler's client loads the system's certificates (~7 ms): the child does it while
    the parent solves, not between the job and the install. Seen for real: with SSL_CERT_FILE a
    FIFO, the child opens it (and waits for the certificates) before it has a job."""
    channel = tiny_channel(tmp_path, payload=b"v2\n")
    prefix, cache = tmp_path / "env", tmp_path / "cache"
    change_env(_records(channel, ["helper"]), prefix, cache, ["helper"])
    plan, certificates = tmp_path / "plan.lock", tmp_path / "certificates.pem"
    inplace._write_records(_records(channel, ["tool"]), plan)
    os.mkfifo(certificates)
    script = subprocess.Popen(
        [sys.executable, "-c", HOW[how] + WAIT_THEN_CHANGE, str(plan), str(prefix), str(cache)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "SSL_CERT_FILE": str(certificates)},
    )
    assert script.stdin is not None and script.stdout is not None
    try:
        assert script.stdout.readline() == "read\n"
        writer = None
        deadline = time.monotonic() + 60
        while writer is None and time.monotonic() < deadline:
            try:  # opens only once a reader has: the child making its client
                writer = os.open(certificates, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                time.sleep(0.05)
        assert writer is not None, "the child did not make its client while it waited for the job"
        os.close(writer)  # no certificates: a file:// channel needs none
        script.stdin.write("go\n")
        script.stdin.flush()
        assert script.stdout.readline() == "changed\n"
    finally:
        script.kill()
        script.wait()
    assert (prefix / "share" / "tool" / "version.txt").read_text() == "v2\n"


DONE_THEN_CLOSE = """
import json, os, sys
from pathlib import Path
import rattler
from envkit.install import inplace
from envkit.install.inplace import ENVIRONMENT, Installer
plan, prefix, cache = map(Path, sys.argv[1:4])
env = rattler.LockFile.from_path(plan).environment(ENVIRONMENT)
records = [r for recs in env.conda_repodata_records().values() for r in recs]
with Installer(prefix) as installer:
    installer.change(records, prefix, cache, ["tool"])
    done, running = "done" in installer._heard, installer._child.returncode is None
child = installer._child
if child.returncode is None:
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # until it has ended, left for envkit to reap
with Installer():  # reaps one that ended
    reaped = {"returncode": child.returncode, "ending": len(inplace._ENDING)}
print(json.dumps({"forked": installer.forked, "done": done, "running": running, "reaped": reaped}))
"""

CLOSE_AFTER_DONE = """
import json, os
from envkit.install import inplace
from envkit.install.inplace import Installer
with Installer() as installer:
    # what a child past its change has said, while it is still there (here: waiting for its job)
    installer._heard["done"] = {"kind": "done"}
child = installer._child
closed = {"returncode": child.returncode, "ending": [c.pid for c in inplace._ENDING] == [child.pid]}
installer.close()  # closed again (sync's `with`, then the CLI's): still one child to reap
closed["twice"] = [c.pid for c in inplace._ENDING] == [child.pid]
os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # its job's pipe closed, it ends by itself
with Installer():
    reaped = {"returncode": child.returncode, "ending": len(inplace._ENDING)}
print(json.dumps({"forked": installer.forked, "closed": closed, "reaped": reaped}))
"""


@pytest.mark.parametrize("how", sorted(HOW))
def test_the_change_is_taken_as_made_when_the_child_says_so(tmp_path: Path, how: str) -> None:
    """The child says `done` once every file is linked and every record written; the parent goes
    on from there, not from the child's exit (a forked child's exit unmaps a copy of the parent's
    memory, 4-8 ms); it is not killed, and exits 0 by itself."""
    channel = tiny_channel(tmp_path)
    prefix, cache = tmp_path / "env", tmp_path / "cache"
    change_env(_records(channel, ["helper"]), prefix, cache, ["helper"])
    plan = tmp_path / "plan.lock"
    inplace._write_records(_records(channel, ["tool"]), plan)
    done = subprocess.run(
        [sys.executable, "-c", HOW[how] + DONE_THEN_CLOSE, str(plan), str(prefix), str(cache)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["forked"] is (how == "forked") and said["done"] and said["running"], "the parent waited for the child's exit"
    assert said["reaped"] == {"returncode": 0, "ending": 0}
    assert sorted(p.name for p in (prefix / "conda-meta").glob("*.json")) == ["helper-1.0-0.json", "tool-1.0-0.json"]


def test_a_forked_child_that_made_its_change_is_not_waited_for_on_close() -> None:
    """Its exit is its own business, and the next Installer reaps it (a spawned one, rare: a
    rollback after a failed install, is reaped on close, as the test above shows)."""
    done = subprocess.run(
        [sys.executable, "-c", CLOSE_AFTER_DONE],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,  # a close that waited here would wait for good: the child waits for its job
    )
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["forked"] is True
    assert said["closed"] == {"returncode": None, "ending": True, "twice": True}
    assert said["reaped"] == {"returncode": 0, "ending": 0}


def test_a_failed_change_is_not_announced_as_done(tmp_path: Path) -> None:
    """Its exit code tells what failed; a child killed is waited for on close."""
    channel = tiny_channel(tmp_path)
    prefix, cache = tmp_path / "env", tmp_path / "cache"
    change_env(_records(channel, ["tool"]), prefix, cache, ["tool"])
    with Installer(prefix) as installer:
        os.kill(installer._child.pid, signal.SIGKILL)
        with pytest.raises(InstallError):
            installer.change(_records(channel, []), prefix, cache, [])
        assert "done" not in installer._heard
    assert installer._child.returncode is not None


def _records(channel: Path, specs: list[str]) -> list[Any]:
    from envkit.solve import backend

    platform = backend.native_platform()
    return backend.solve([channel.as_uri()], specs, platform, backend.virtual_packages(platform))


def test_records_read_early_are_read_again_when_the_env_changed_meanwhile(tmp_path: Path) -> None:
    """The child reads the installed records while envkit solves; if the env changes before the
    job comes (a rollback of an earlier sync, a conda install), the early read must not be used:
    rattler would not know what to unlink."""
    channel = tiny_channel(tmp_path, extra=(PkgMeta("extra", "1.0", "0"),))
    prefix, cache = tmp_path / "env", tmp_path / "cache"
    change_env(_records(channel, ["tool"]), prefix, cache, ["tool"])
    early = (prefix, *inplace._read_installed(prefix))  # tool and helper
    change_env(_records(channel, ["tool", "extra"]), prefix, cache, ["tool", "extra"])  # the env changes meanwhile
    assert (prefix / "conda-meta" / "extra-1.0-0.json").is_file()

    with tempfile.TemporaryDirectory() as tmp:
        plan = Path(tmp) / "records.lock"
        inplace._write_records(_records(channel, ["tool"]), plan)
        assert inplace._child(plan, prefix, cache, ["tool"], early) == 0

    assert not (prefix / "conda-meta" / "extra-1.0-0.json").exists(), "the stale early read was used"
    assert not (prefix / "share" / "extra").exists()
    assert sorted(p.name for p in (prefix / "conda-meta").glob("*.json")) == ["helper-1.0-0.json", "tool-1.0-0.json"]


def test_records_read_early_are_used_while_the_env_is_unchanged(tmp_path: Path) -> None:
    channel = tiny_channel(tmp_path, extra=(PkgMeta("extra", "1.0", "0"),))
    prefix, cache = tmp_path / "env", tmp_path / "cache"
    change_env(_records(channel, ["tool"]), prefix, cache, ["tool"])
    state, installed = inplace._read_installed(prefix)
    assert records_state(prefix) == state
    with tempfile.TemporaryDirectory() as tmp:
        plan = Path(tmp) / "records.lock"
        inplace._write_records(_records(channel, ["tool", "extra"]), plan)
        assert inplace._child(plan, prefix, cache, ["tool", "extra"], (prefix, state, installed)) == 0
    assert (prefix / "conda-meta" / "extra-1.0-0.json").is_file()
    assert records_state(prefix) != state  # the job changed conda-meta, so a later early read would be refused


def test_a_child_gone_before_its_job_fails_the_change_with_one_line(tmp_path: Path) -> None:
    """The OOM killer takes the waiting child: the change fails as an envkit error (sync then rolls
    back from its journal), and the env is as it was."""
    channel = tiny_channel(tmp_path)
    prefix, cache = tmp_path / "env", tmp_path / "cache"
    change_env(_records(channel, ["tool"]), prefix, cache, ["tool"])
    before = sorted(p.name for p in (prefix / "conda-meta").glob("*.json"))
    installer = Installer(prefix)
    os.kill(installer._child.pid, signal.SIGKILL)
    installer._child.wait()
    with pytest.raises(InstallError, match=f"changing {prefix} failed"):
        installer.change(_records(channel, []), prefix, cache, [])
    assert sorted(p.name for p in (prefix / "conda-meta").glob("*.json")) == before


def test_the_waiting_child_reads_the_env(tmp_path: Path) -> None:
    """What a sync takes from the child instead of reading it again: the installed packages (for
    the difference) and their archives' sha256 (for the journal: a rebuilt package is relinked)."""
    import rattler

    channel = tiny_channel(tmp_path)
    prefix, cache = tmp_path / "env", tmp_path / "cache"
    change_env(_records(channel, ["tool"]), prefix, cache, ["tool"])
    on_disk = {
        r.name.normalized: bytes(r.sha256 or b"").hex() for r in map(rattler.PrefixRecord.from_path, (prefix / "conda-meta").glob("*.json"))
    }
    with Installer(prefix) as installer:
        assert installer.installed() == {"tool": "1.0 0", "helper": "1.0 0"}
        assert installer.installed_sha256() == on_disk and len(on_disk) == 2


def test_the_child_says_when_it_could_not_read(tmp_path: Path) -> None:
    """A record rattler cannot read: the caller reads conda-meta itself, to name it. A child gone:
    nothing comes."""
    channel = tiny_channel(tmp_path)
    prefix, cache = tmp_path / "env", tmp_path / "cache"
    change_env(_records(channel, ["tool"]), prefix, cache, ["tool"])
    (prefix / "conda-meta" / "broken-1.0-0.json").write_text("{")
    with Installer(prefix) as installer:
        assert installer.installed() is None and installer.installed_sha256() is None
    (prefix / "conda-meta" / "broken-1.0-0.json").unlink()
    with Installer(prefix) as installer:
        os.kill(installer._child.pid, signal.SIGKILL)
        installer._child.wait()
        assert installer.installed() is None


def _copies(folder: Path) -> dict[str, tuple[bytes, int]]:
    """name -> (bytes, mtime in ns) of each record in a conda-meta folder or a copy of one."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.glob("*.json"))}


@pytest.mark.parametrize("how", sorted(HOW))
def test_the_waiting_child_copies_the_records_for_the_journal(tmp_path: Path, how: str) -> None:
    """A sync's journal keeps conda-meta's records (7 MB in a torch env): the child copies them
    while envkit solves, bytes and times as they are, and the copy is taken while conda-meta is
    still as the child found it."""
    channel = tiny_channel(tmp_path)
    prefix, cache = tmp_path / "env", tmp_path / "cache"
    change_env(_records(channel, ["tool"]), prefix, cache, ["tool"])
    draft = tmp_path / "draft"
    (draft / "stale").mkdir(parents=True)  # a leftover where the draft goes: replaced, not merged
    code = HOW[how] + textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from envkit.install.inplace import Installer
        prefix, draft = map(Path, sys.argv[1:3])
        with Installer() as installer:
            installer.read(prefix, journal_draft=draft)
            print(installer.forked, installer.records_copied(prefix))
        """
    )
    done = subprocess.run([sys.executable, "-c", code, str(prefix), str(draft)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(how == "forked"), "True"]
    assert sorted(p.name for p in draft.iterdir()) == ["conda-meta"]
    assert _copies(draft / "conda-meta") == _copies(prefix / "conda-meta") and len(_copies(draft / "conda-meta")) == 2


def test_a_copy_for_the_journal_is_not_taken_once_conda_meta_moved_on(tmp_path: Path) -> None:
    """conda does not take envkit's lock: a record it rewrote after the child's copy makes the copy
    stale, and the journal copies the records itself."""
    channel = tiny_channel(tmp_path)
    prefix, cache = tmp_path / "env", tmp_path / "cache"
    change_env(_records(channel, ["tool"]), prefix, cache, ["tool"])
    draft = tmp_path / "draft"
    with Installer() as installer:
        installer.read(prefix, journal_draft=draft)
        assert installer.installed() is not None
        installer._hear("copied")  # the child's copy is made
        record = prefix / "conda-meta" / "tool-1.0-0.json"
        os.utime(record, ns=(record.stat().st_atime_ns, record.stat().st_mtime_ns + 10**9))
        assert installer.records_copied(prefix) is False
    with Installer() as installer:  # a child that is gone before it copies: the same answer
        installer.read(prefix, journal_draft=draft)
        os.kill(installer._child.pid, signal.SIGKILL)
        installer._child.wait()
        assert installer.records_copied(prefix) is False
