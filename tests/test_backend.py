"""envkit's one door to rattler (envkit.backend), against channels as real servers serve them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

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
