"""envkit's one door to rattler (envkit.solve.backend), against channels as real servers serve them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envkit.solve import backend
from tests.conftest import run_envkit
from tests.support.condapkg import PkgMeta
from tests.support.httpchannel import auth_file, served
from tests.support.tiny import tiny_channel, tiny_recipe

SECRET = "s3cr3t-t0ken-4a4a99ba"


def _holding(root: Path, secret: str) -> list[str]:
    """The files under `root` whose bytes hold `secret`."""
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.is_symlink() and secret.encode() in p.read_bytes()
    )


@pytest.mark.parametrize("kind", ["conda-token", "basic-auth"])
def test_a_private_channel_takes_its_credentials_from_rattlers_store_and_no_file_keeps_them(tmp_path: Path, kind: str) -> None:
    """A team's private channel (a token in the path, as anaconda.org and quetz; a password, as
    Artifactory) with its credentials where rattler and pixi keep them (`pixi auth login`): envkit
    asked the channel without them, so the channel could not be used at all, and the only way
    round, the token in the recipe's URL, put it into the lock the team commits and every export.
    The recipe names the channel without credentials; the lock, the record, conda-meta and every
    export hold none."""
    channel = tiny_channel(tmp_path, extra=(PkgMeta("extra", "1.0", "0"),))
    token, basic = (SECRET, None) if kind == "conda-token" else (None, ("team", SECRET))
    env = dict(os.environ)
    if token:  # RATTLER_AUTH_FILE
        env["RATTLER_AUTH_FILE"] = str(auth_file(tmp_path / "auth.json", token=token))
    else:  # the file `pixi auth login` writes where no keyring answers
        (Path(env["HOME"]) / ".rattler").mkdir()
        auth_file(Path(env["HOME"]) / ".rattler" / "credentials.json", basic=basic)
    with served(channel, token=token, basic=basic) as url:
        recipe = tiny_recipe(tmp_path, Path("/unused"))
        recipe.write_text(recipe.read_text().replace(Path("/unused").as_uri(), url))
        for args in (("lock", str(recipe)), ("create", str(recipe), "--yes", "--no-probe")):
            done = run_envkit(*args, env=env)
            assert done.returncode == 0, done.stderr
        prefix = tmp_path / "envs" / "tiny"
        shutil.rmtree(tmp_path / "pkgs")  # the locked create downloads the packages again
        locked = run_envkit("create", str(recipe), "-p", str(tmp_path / "locked"), "--locked", "--yes", "--no-probe", env=env)
        assert locked.returncode == 0, locked.stderr
        recipe.write_text(recipe.read_text().replace("packages: [tool]", "packages: [tool, extra]"))
        synced = run_envkit("sync", "-p", str(prefix), "--yes", "--no-probe", env=env)
        assert synced.returncode == 0 and "+ extra 1.0 0" in synced.stdout, synced.stderr
        exports = [run_envkit("export", "-p", str(prefix), "--format", fmt, env=env) for fmt in ("environment-yml", "explicit", "lock")]
        assert all(e.returncode == 0 and url in e.stdout for e in exports)
        assert all(SECRET not in e.stdout for e in exports)
        assert _holding(tmp_path / "envs", SECRET) == _holding(tmp_path / "locked", SECRET) == _holding(recipe.parent, SECRET) == []

        shutil.rmtree(tmp_path / "pkgs")  # nothing cached: the channel itself is asked
        env.pop("RATTLER_AUTH_FILE", None)
        shutil.rmtree(Path(env["HOME"]) / ".rattler", ignore_errors=True)
        refused = run_envkit("create", str(recipe), "-p", str(tmp_path / "refused"), "--yes", "--no-probe", env=env)
        assert refused.returncode == 3 and "Traceback" not in refused.stderr, refused.stderr
        if basic:  # a 401 says what is missing; a path without its token is only a 404
            assert "the channel asks for credentials" in refused.stderr and "pixi auth login" in refused.stderr, refused.stderr


def _reads_certificates(fifo: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], bool]:
    """`envkit ARGS` with SSL_CERT_FILE a FIFO, and whether it opened it: making rattler's verifying
    client reads the system's certificates (an open that waits for a writer, here seen and given an
    empty file), while a client that verifies nothing reads none."""
    if not fifo.exists():
        os.mkfifo(fifo)
    proc = subprocess.Popen(
        [sys.executable, "-m", "envkit", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SSL_CERT_FILE": str(fifo)},
    )
    opened = False
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        try:  # opens only while a reader has it open: the command making a verifying client
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.01)
            continue
        opened = True
        os.close(writer)  # no certificates in it: neither channel here needs one
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), opened


def test_channels_on_disk_load_no_certificates_and_any_other_channel_does(tmp_path: Path) -> None:
    """Making rattler's client loads the system's certificates, 7 ms of every create. From channels
    on disk (file://: a local or air-gapped mirror) nothing goes over a network, so the lock, the
    solve and the install (locked or not) make a client that loads none; a channel served over
    HTTP gets the client that verifies, with its credentials layer, as before."""
    fifo = tmp_path / "certificates.pem"
    channel = tiny_channel(tmp_path)
    recipe = tiny_recipe(tmp_path, channel)
    for args in (
        ("lock", str(recipe)),
        ("create", str(recipe), "-p", str(tmp_path / "solved"), "--yes", "--no-probe"),
        ("create", str(recipe), "-p", str(tmp_path / "locked"), "--locked", "--yes", "--no-probe"),
    ):
        done, opened = _reads_certificates(fifo, *args)
        assert done.returncode == 0, done.stderr
        assert not opened, args
    assert (tmp_path / "locked" / "share" / "tool" / "version.txt").read_text() == "v1\n"

    served_channel = tiny_channel(tmp_path / "served")
    with served(served_channel) as url:
        recipe.write_text(recipe.read_text().replace(channel.as_uri(), url))
        done, opened = _reads_certificates(fifo, "create", str(recipe), "-p", str(tmp_path / "over-http"), "--yes", "--no-probe")
    assert done.returncode == 0, done.stderr
    assert opened
    assert (tmp_path / "over-http" / "share" / "tool" / "version.txt").read_text() == "v1\n"


def test_work_given_to_an_install_runs_while_rattler_links_and_its_failure_costs_only_time(tmp_path: Path) -> None:
    """backend.install's `meanwhile` runs in envkit's thread after rattler has taken the install to
    its own threads: waiting in it for a file of the env, the file comes (were the install to wait
    for the work, it would never come). Its result is returned; an error in it gives None, and the
    env is installed all the same."""
    channel = tiny_channel(tmp_path)
    records = backend.solve([channel.as_uri()], ["tool"], "linux-64", backend.virtual_packages("linux-64"))

    def until_linked(prefix: Path) -> bool:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if (prefix / "share" / "tool" / "version.txt").is_file():
                return True
            time.sleep(0.005)
        return False

    first = tmp_path / "first"
    assert backend.install(records, first, tmp_path / "pkgs", ["tool"], None, meanwhile=lambda: until_linked(first)) is True

    def fails() -> bool:
        raise RuntimeError("a read that failed")

    second = tmp_path / "second"
    assert backend.install(records, second, tmp_path / "pkgs", ["tool"], None, meanwhile=fails) is None
    assert (second / "share" / "tool" / "version.txt").read_text() == "v1\n"
    assert backend.install(records, tmp_path / "third", tmp_path / "pkgs", ["tool"], None) is None
