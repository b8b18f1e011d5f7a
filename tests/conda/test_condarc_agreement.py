"""envkit's own reading of conda's configuration agrees with conda's `context` on a range of
.condarc layouts: the same channel URLs, envs dirs and package caches. The real conda computes its
side; envkit reads the same files under the same environment (envkit.solve.condaconfig)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from envkit.prefix import envs
from envkit.solve import condaconfig
from envkit.solve.channels import resolve_channels
from tests.support.conda import Conda

CHANNELS = ["conda-forge", "pytorch", "nvidia", "bioconda", "pkgs/main", "pkgs/pro", "team/sub"]

CONDA_SIDE = """
import json, sys
from conda.base.context import context, reset_context
from conda.models.channel import Channel
reset_context()
print(json.dumps({
    "channels": {n: Channel(n).base_url for n in sys.argv[1:]},
    "envs_dirs": [str(p) for p in context.envs_dirs],
    "pkgs_dirs": [str(p) for p in context.pkgs_dirs],
    "configured_pkgs": [str(p) for p in context._pkgs_dirs],
    "default_activation_env": context.default_activation_env,
}))
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def layout_none(home: Path, env: dict[str, str]) -> None:
    pass


def layout_home(home: Path, env: dict[str, str]) -> None:
    write(
        home / ".condarc",
        "channel_alias: https://mirror.example/conda\n"
        "custom_channels:\n  pytorch: https://pt.example\n  team/sub: https://team.example/x\n"
        f"envs_dirs:\n  - {home}/my-envs\n  - ~/other-envs\npkgs_dirs: [{home}/my-pkgs]\n",
    )


def layout_precedence(home: Path, env: dict[str, str]) -> None:
    """XDG, ~/.config/conda, ~/.conda and ~/.condarc in conda's order: the later file wins a
    scalar, lists put the later file's entries first, mappings merge."""
    write(home / "xdg" / "conda" / ".condarc", "channel_alias: https://xdg.example\nenvs_dirs: [/srv/xdg-envs]\n")
    write(home / ".config" / "conda" / ".condarc", "custom_channels: {nvidia: 'https://nv.example/'}\nenvs_dirs: [/srv/config-envs]\n")
    write(
        home / ".conda" / ".condarc",
        "channel_alias: https://dotconda.example/\ncustom_channels: {bioconda: https://bio.example}\ndefault_activation_env: first\n",
    )
    write(
        home / ".condarc",
        "envs_dirs: [/srv/home-envs, /srv/xdg-envs]\npkgs_dirs: [/srv/p1, /srv/p2]\ndefault_activation_env: ~/envs/work\n",
    )
    env["XDG_CONFIG_HOME"] = str(home / "xdg")


def layout_condarc_d(home: Path, env: dict[str, str]) -> None:
    write(home / ".conda" / "condarc.d" / "10-alias.yml", "channel_alias: https://d10.example\n")
    write(home / ".conda" / "condarc.d" / "20-custom.yaml", "custom_channels: {conda-forge: https://cf.example}\n")
    write(home / ".conda" / "condarc.d" / "ignored.txt", "channel_alias: https://not-read.example\n")


def layout_condarc_var_and_env(home: Path, env: dict[str, str]) -> None:
    """$CONDARC is read last among files; CONDA_* variables beat every file."""
    write(home / ".condarc", "channel_alias: https://home.example\nenvs_dirs: [/srv/home-envs]\npkgs_dirs: [/srv/home-pkgs]\n")
    write(home / "elsewhere.yml", "channel_alias: https://condarc-var.example\ncustom_channels: {pytorch: https://pt2.example}\n")
    env["CONDARC"] = str(home / "elsewhere.yml")
    env["CONDA_ENVS_DIRS"] = os.pathsep.join(["/srv/env-a", "/srv/env-b"])
    env["CONDA_PKGS_DIRS"] = "/srv/pkgs-a,/srv/pkgs-b"
    env["CONDA_DEFAULT_ACTIVATION_ENV"] = "training"


def layout_alias_variable(home: Path, env: dict[str, str]) -> None:
    write(home / ".condarc", "channel_alias: https://file.example\nenvs_dirs: ['$HOME/dollar-envs', '${HOME}/braced-envs']\n")
    env["CONDA_CHANNEL_ALIAS"] = "https://variable.example"


LAYOUTS = [layout_none, layout_home, layout_precedence, layout_condarc_d, layout_condarc_var_and_env, layout_alias_variable]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda f: f.__name__.removeprefix("layout_"))
def test_envkit_reads_condarc_as_conda_does(conda: Conda, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: object) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDA")}
    env.update(HOME=str(home), CONDA_EXE=str(conda.exe))
    env.pop("XDG_CONFIG_HOME", None)
    assert callable(layout)
    layout(home, env)
    proc = subprocess.run(
        [str(conda.exe.parent / "python"), "-c", CONDA_SIDE, *CHANNELS], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    theirs = json.loads(proc.stdout)

    for key in [k for k in os.environ if k.startswith(("CONDA", "XDG_CONFIG_HOME"))]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        if key.startswith("CONDA") or key in ("HOME", "XDG_CONFIG_HOME", "CONDARC"):
            monkeypatch.setenv(key, value)
    monkeypatch.delenv("ENVKIT_ENVS_DIR")
    monkeypatch.delenv("ENVKIT_PKGS_DIR")
    ours = condaconfig.read_condarc()
    urls = {c.name: c.url for c in resolve_channels(CHANNELS, {})}
    assert urls == {n: u.rstrip("/") for n, u in theirs["channels"].items()}
    assert [str(p) for p in ours.envs_dirs] == theirs["envs_dirs"]
    assert ours.default_activation_env == theirs["default_activation_env"]  # the env remove must not take
    assert [str(p) for p in ours.pkgs_dirs] == [str(Path(os.path.expandvars(p)).expanduser()) for p in theirs["configured_pkgs"]]
    # where envkit puts a new env, and its package cache: conda's first choices when configured
    assert str(envs.envs_dir()) == next(p for p in theirs["envs_dirs"] if _creatable(Path(p)))
    if theirs["configured_pkgs"]:
        assert str(envs.pkgs_dir()) == next(p for p in theirs["pkgs_dirs"] if _creatable(Path(p)))
    else:  # unconfigured: rattler's own cache, not conda's ROOT/pkgs (envkit.prefix.envs.pkgs_dir says why)
        assert envs.pkgs_dir() == home / ".cache" / "rattler" / "cache" / "pkgs"


def _creatable(path: Path) -> bool:
    while not path.exists() and path != path.parent:
        path = path.parent
    return os.access(path, os.W_OK)


def test_inside_conda_envkit_takes_conda_context(conda: Conda, tmp_path: Path) -> None:
    """The plugin's source (conda's context) and envkit's own reading give the same settings."""
    home = tmp_path / "home"
    layout_precedence(home, {})
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDA")}
    env.update(HOME=str(home), CONDA_EXE=str(conda.exe))
    env.pop("XDG_CONFIG_HOME", None)
    script = (
        "import json; from conda.base.context import reset_context; reset_context();"
        "from envkit.solve import condaconfig as c; a = c.from_context(); b = c.read_condarc();"
        "print(json.dumps([[a.channel_alias, a.custom_channels, [str(p) for p in a.envs_dirs], [str(p) for p in a.pkgs_dirs]],"
        " [b.channel_alias, b.custom_channels, [str(p) for p in b.envs_dirs], [str(p) for p in b.pkgs_dirs]]]))"
    )
    proc = subprocess.run([str(conda.exe.parent / "python"), "-c", script], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    from_conda, from_files = json.loads(proc.stdout)
    from_conda[1] = {k: v for k, v in from_conda[1].items() if k in from_files[1]}  # conda adds defaults' pkgs/main, pkgs/r
    assert from_conda == from_files


MULTI_SIDE = """
import json
from conda.base.context import context, reset_context
reset_context()
print(json.dumps({n: [c.base_url for c in cs] for n, cs in context.custom_multichannels.items() if n not in ("defaults", "local")}))
"""


def test_a_multichannel_expands_to_the_channels_conda_expands_it_to(conda: Conda, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """custom_multichannels: one name, several channels (names through the alias, or URLs), read
    by envkit alone and inside conda as conda reads it."""
    home = tmp_path / "home"
    write(
        home / ".condarc",
        "channel_alias: https://mirror.example/conda\ncustom_channels: {pytorch: https://pt.example}\n"
        "custom_multichannels:\n  team: [conda-forge, pytorch, https://team.example/extra]\n  solo: [bioconda]\n",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDA")}
    env.update(HOME=str(home), CONDA_EXE=str(conda.exe))
    env.pop("XDG_CONFIG_HOME", None)
    proc = subprocess.run([str(conda.exe.parent / "python"), "-c", MULTI_SIDE], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    theirs = {name: [u.rstrip("/") for u in urls] for name, urls in json.loads(proc.stdout).items()}
    # conda puts each member name under channel_alias, whatever custom_channels says of it
    assert theirs["team"] == [
        "https://mirror.example/conda/conda-forge",
        "https://mirror.example/conda/pytorch",
        "https://team.example/extra",
    ]
    for key in [k for k in os.environ if k.startswith(("CONDA", "XDG_CONFIG_HOME"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CONDA_EXE", str(conda.exe))
    for name in ("team", "solo"):
        resolved = resolve_channels([name], {})
        assert [c.url for c in resolved] == theirs[name]
        assert all(c.via == f".condarc custom_multichannels {name}" for c in resolved)
    # inside conda (the plugin's source): the same expansion from conda's context
    script = (
        "import json; from conda.base.context import reset_context; reset_context();"
        "from envkit.solve import condaconfig as c; print(json.dumps({k: list(v) for k, v in c.from_context().custom_multichannels.items()}))"
    )
    inside = subprocess.run([str(conda.exe.parent / "python"), "-c", script], capture_output=True, text=True, env=env, check=False)
    assert inside.returncode == 0, inside.stderr
    assert json.loads(inside.stdout) == theirs
