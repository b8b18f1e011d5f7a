"""`envkit export` read back by the parsers other tools use: YAML for environment.yml, BuildKit's
Dockerfile parser (the `dockerfile` package) and a real builder's reading of ENV lines (buildah),
rattler for locks. conda itself installs the exports, and buildah builds the whole Dockerfile, in
tests/conda/test_exports_in_conda.py."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dockerfile
import pytest
import rattler
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envkit.commands.export import FORMATS, conda_env_name
from envkit.core.yamltext import quoted
from envkit.recipe.model import EnvOp
from envkit.team.export import EnvSnapshot, ExportedPackage, ExportedPip, conda_lock, environment_yml, explicit
from envkit.team.export import dockerfile as docker_text
from envkit.team.lock import read_lock
from tests.conftest import run_envkit, write_recipe
from tests.support.buildah import Builder
from tests.support.pipchannel import homemade_wheel, offline_pip_env, pip_channel
from tests.support.tiny import tiny_channel
from tests.team.test_sync import _hand_moved, made_git_env

VARIABLES = """threading:
  mkl_threading_layer: GNU
  env:
    TRICKY: "a 'b' \\"c\\" $d `e` *"
    GONE: {unset: true}
    EXTRA_PATHS: {prepend: [/opt/x, /opt/y]}
"""


def exported_env(tmp_path: Path, extra_variables: dict[str, str] | None = None) -> tuple[Path, dict[str, str]]:
    """An envkit env with conda packages, pip wheels locked by URL, and every kind of variable
    (`extra_variables`: more values to set)."""
    channel, links = pip_channel(tmp_path)
    variables = VARIABLES + "".join(f"    {name}: {quoted(value)}\n" for name, value in (extra_variables or {}).items())
    recipe = write_recipe(
        tmp_path / "r",
        "exp",
        f'envkit: 1\nname: exp\nchannels: [{channel.as_uri()}]\npython: "3.11"\npackages: [pip]\npip: [threadpoolctl]\n{variables}',
    )
    env = offline_pip_env(dict(os.environ), links)
    proc = run_envkit("create", str(recipe), "--yes", "--no-probe", env=env)
    assert proc.returncode == 0, proc.stderr
    return tmp_path / "envs" / "exp", env


def read_lock_text(text: str, where: Path) -> Any:
    path = where / "read-back.lock"
    path.write_text(text)
    return read_lock(path)


def export(prefix: Path, fmt: str, *extra: str) -> str:
    proc = run_envkit("export", "-p", str(prefix), "--format", fmt, *extra)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_environment_yml_keeps_pins_pip_urls_and_variables(tmp_path: Path) -> None:
    prefix, _ = exported_env(tmp_path)
    doc = yaml.safe_load(export(prefix, "environment-yml"))
    assert doc["name"] == "exp" and doc["channels"] == [(tmp_path / "pipchannel").as_uri()]
    conda_pins = [d for d in doc["dependencies"] if isinstance(d, str)]
    records = [json.loads(p.read_text()) for p in (prefix / "conda-meta").glob("*.json")]
    assert sorted(conda_pins) == sorted(f"{r['name']}={r['version']}={r['build']}" for r in records)
    pip = next(d["pip"] for d in doc["dependencies"] if isinstance(d, dict))
    assert len(pip) == 1 and pip[0].startswith("threadpoolctl @ file://") and "#sha256=" in pip[0]
    assert doc["variables"] == {"MKL_THREADING_LAYER": "GNU", "TRICKY": "a 'b' \"c\" $d `e` *"}
    text = export(prefix, "environment-yml")
    assert "# not kept: envkit's activation unsets GONE" in text and "prepends /opt/x:/opt/y to EXTRA_PATHS" in text


def test_explicit_has_urls_and_hashes(tmp_path: Path) -> None:
    prefix, _ = exported_env(tmp_path)
    lines = export(prefix, "explicit").splitlines()
    body = lines[lines.index("@EXPLICIT") + 1 :]
    meta = {json.loads(p.read_text())["url"]: json.loads(p.read_text())["sha256"] for p in (prefix / "conda-meta").glob("*.json")}
    assert sorted(body) == sorted(f"{url}#sha256:{sha}" for url, sha in meta.items())
    assert any(line.startswith("# not kept: pip packages (threadpoolctl==3.8.0)") for line in lines)


def test_conda_lock_pins_urls_hashes_and_depends_and_names_the_settings_it_cannot_keep(tmp_path: Path) -> None:
    prefix, _ = exported_env(tmp_path)
    text = export(prefix, "conda-lock")
    doc = yaml.safe_load(text)
    platform = str(rattler.Subdir.current())
    assert doc["version"] == 1 and doc["metadata"]["platforms"] == [platform]
    assert doc["metadata"]["channels"] == [{"url": (tmp_path / "pipchannel").as_uri(), "used_env_vars": []}]
    custom = doc["metadata"]["custom_metadata"]
    assert custom["created_by"].startswith("envkit ") and custom["envkit.recipe"] == "exp"
    assert custom[f"envkit.activation.{platform}.MKL_THREADING_LAYER"] == "GNU" and custom[f"envkit.activation.{platform}.GONE"] == "unset"
    assert custom[f"envkit.activation.{platform}.EXTRA_PATHS"] == "prepend /opt/x:/opt/y"
    assert "# not kept: activation settings" in text and "envkit audit --fix -p PREFIX writes MKL_THREADING_LAYER=GNU" in text
    records = {r["name"]: r for r in (json.loads(p.read_text()) for p in (prefix / "conda-meta").glob("*.json"))}
    conda = {p["name"]: p for p in doc["package"] if p["manager"] == "conda"}
    assert conda.keys() == records.keys()
    for name, record in records.items():
        entry = conda[name]
        assert (entry["version"], entry["build"], entry["url"], entry["platform"]) == (
            record["version"],
            record["build"],
            record["url"],
            platform,
        )
        assert entry["hash"] == {"md5": record["md5"], "sha256": record["sha256"]}
        depends = {str(d).split(" ")[0] for d in record["depends"]}
        assert set(entry["dependencies"]) == depends and (entry["category"], entry["optional"]) == ("main", False)
    [wheel] = [p for p in doc["package"] if p["manager"] == "pip"]
    assert wheel["name"] == "threadpoolctl" and wheel["url"].startswith("file://") and wheel["url"].endswith(".whl")
    sha256 = wheel["hash"]["sha256"]
    assert sha256 == hashlib.sha256(Path(wheel["url"].removeprefix("file://")).read_bytes()).hexdigest()
    assert export(prefix, "conda-lock") == text  # the same env, the same file


def test_a_lock_exports_what_the_env_made_from_it_exports(tmp_path: Path) -> None:
    """The lock of an env, exported in each format for this machine, says what the env's own export
    says: the same packages, wheels, variables and ENV lines; only the comments name the source."""
    prefix, _ = exported_env(tmp_path)
    lock = tmp_path / "exp.lock"
    assert run_envkit("export", "-p", str(prefix), "--format", "lock", "-o", str(lock)).returncode == 0
    both = run_envkit("export", "-p", str(prefix), "--lock", str(lock), "--format", "conda-lock")
    assert both.returncode == 2 and "not both" in both.stderr, both.stderr
    missing = run_envkit("export", "--lock", str(tmp_path / "nope.lock"), "--format", "conda-lock")
    assert missing.returncode == 2 and "cannot read lock file" in missing.stderr and "Traceback" not in missing.stderr

    def from_lock(fmt: str) -> str:
        proc = run_envkit("export", "--lock", str(lock), "--format", fmt)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def uncommented(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith("#")]

    from_env = yaml.safe_load(export(prefix, "conda-lock"))
    assert [(p["name"], p["url"], p["hash"]) for p in yaml.safe_load(from_lock("conda-lock"))["package"]] == [
        (p["name"], p["url"], p["hash"]) for p in from_env["package"]
    ]
    assert uncommented(from_lock("explicit")) == uncommented(export(prefix, "explicit"))
    assert uncommented(from_lock("dockerfile")) == uncommented(export(prefix, "dockerfile"))
    yml = yaml.safe_load(from_lock("environment-yml"))
    assert yml == yaml.safe_load(export(prefix, "environment-yml"))
    assert yml["variables"]["MKL_THREADING_LAYER"] == "GNU" and any(isinstance(d, dict) and d.get("pip") for d in yml["dependencies"])


TEAM_PLATFORMS = ["linux-64", "osx-arm64", "win-64"]


def team_lock(replica: dict[str, Path], folder: Path, platforms: list[str] = TEAM_PLATFORMS) -> Path:
    """A recipe locked on the replica for `platforms`, with MKL's GNU layer on Linux (the only
    platform that has it) and OMP_NUM_THREADS worked out where the env is installed."""
    others = "".join(f"  {p}: {{threading: {{mkl_threading_layer: auto}}}}\n" for p in platforms if p != "linux-64")
    recipe = write_recipe(
        folder,
        "multi",
        f"envkit: 1\nname: multi\nchannels: [{replica['conda-forge'].as_uri()}]\nplatforms: [{', '.join(platforms)}]\n"
        "python: '3.12'\npackages: [pytorch, numpy]\n"
        "threading: {mkl_threading_layer: GNU, omp_num_threads: physical-cores}\n" + (f"per_platform:\n{others}" if others else ""),
    )
    made = run_envkit("lock", str(recipe))
    assert made.returncode == 0, made.stderr
    return recipe.with_suffix(".lock")


def test_a_lock_exports_each_format_for_the_platform_asked(replica: dict[str, Path], tmp_path: Path) -> None:
    """A team's lock for Linux, macOS and Windows, exported on this (Linux) machine for any of them:
    the explicit list and environment.yml of the macOS and Windows envs, the Dockerfile of the Linux
    one. Each holds exactly the lock's records for its platform; a value the lock keeps as a rule
    (physical-cores) has no number to write, and the file says so instead of writing an empty one."""
    lock = team_lock(replica, tmp_path / "recipes")
    locked = read_lock(lock)

    def export_lock(fmt: str, *platforms: str) -> str:
        proc = run_envkit("export", "--lock", str(lock), "--format", fmt, *(f"--platform={p}" for p in platforms))
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    for platform in TEAM_PLATFORMS:
        records = locked.for_platform(platform)
        assert records is not None
        text = export_lock("explicit", platform)
        assert f"# platform: {platform}" in text.splitlines()
        listed = text.split("@EXPLICIT\n", 1)[1].splitlines()
        assert listed == [f"{r.url}#sha256:{bytes(r.sha256).hex()}" for r in records.records]
        yml = export_lock("environment-yml", platform)
        doc = yaml.safe_load(yml)
        assert doc["dependencies"] == [f"{r.name.normalized}={r.version}={r.build}" for r in records.records]
        assert doc.get("variables") == ({"MKL_THREADING_LAYER": "GNU"} if platform == "linux-64" else None)
        assert f"# Exact packages for {platform}; " in yml
        assert "# not kept: OMP_NUM_THREADS is physical-cores of the machine that runs the env" in yml
    assert export_lock("explicit") == export_lock("explicit", "linux-64")  # this machine's, by default
    # the Dockerfile: the Linux env's, its ENV lines the lock's settings, the worked-out one left to the host
    text = export_lock("dockerfile", "linux-64")
    assert export_lock("dockerfile") == text
    commands = dockerfile.parse_file(_written(tmp_path / "Dockerfile", text))
    assert commands[0].original == "FROM --platform=linux/amd64 condaforge/miniforge3:latest"
    words = shlex.split(commands[1].value[0])
    listed = [line for line in export_lock("explicit", "linux-64").splitlines() if not line.startswith("#")]
    assert words[2 : words.index(">")] == listed
    assert [c.original for c in commands if c.cmd == "ENV"][1:] == ['ENV MKL_THREADING_LAYER="GNU"']
    assert "# not kept: OMP_NUM_THREADS is physical-cores of the machine that runs the env, which the lock leaves to it: " in text
    assert (
        "FROM --platform=linux/amd64 registry.example/ml/conda:24.11\n"
        in run_envkit("export", "--lock", str(lock), "--format", "dockerfile", "--base", "registry.example/ml/conda:24.11").stdout
    )
    # what was written, and for which platform, in words and in JSON
    out = tmp_path / "mac.yml"
    said = run_envkit("export", "--lock", str(lock), "--format", "environment-yml", "--platform", "osx-arm64", "-o", str(out))
    assert said.returncode == 0 and said.stdout == f"wrote {out} (environment-yml for osx-arm64) from {lock}\n", said.stdout
    doc = json.loads(run_envkit("export", "--lock", str(lock), "--format", "conda-lock", "--json").stdout)["data"]
    assert doc["platforms"] == TEAM_PLATFORMS and doc["prefix"] == str(lock)
    # conda-lock: every platform, or those named
    assert yaml.safe_load(export_lock("conda-lock"))["metadata"]["platforms"] == TEAM_PLATFORMS
    assert yaml.safe_load(export_lock("conda-lock", "win-64", "osx-arm64"))["metadata"]["platforms"] == ["win-64", "osx-arm64"]


def _written(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_a_lock_export_for_a_platform_it_cannot_pick_says_which_to_give(replica: dict[str, Path], tmp_path: Path) -> None:
    """Without --platform a one-platform format takes this machine's; a lock without it, and with
    more than one other, is refused in one line naming them; one with a single platform gives that.
    A Dockerfile is Linux's, and only --lock has platforms to pick from."""
    full = team_lock(replica, tmp_path / "full")
    mac_win = team_lock(replica, tmp_path / "mac-win", ["osx-arm64", "win-64"])
    mac = team_lock(replica, tmp_path / "mac", ["osx-arm64"])
    for args, said in (
        ([str(mac_win), "--format", "explicit"], "locks osx-arm64, win-64, and this machine is linux-64: which one is the explicit for?"),
        ([str(mac_win), "--format", "dockerfile"], "locks no Linux platform, and a Dockerfile builds a Linux image"),
        (
            [str(full), "--format", "dockerfile", "--platform", "osx-arm64"],
            "a Dockerfile builds a Linux image (give one of the lock's: linux-64)",
        ),
        ([str(full), "--format", "explicit", "--platform", "osx-arm64", "--platform", "win-64"], "--format explicit is for one platform"),
        (
            [str(full), "--format", "environment-yml", "--platform", "linux-aarch64"],
            "has no linux-aarch64 (it locks linux-64, osx-arm64, win-64)",
        ),
        ([str(full), "--format", "conda-lock", "--platform", "linux-aarch64"], "has no linux-aarch64"),
        ([str(full), "--format", "lock"], "is a lock already"),
        ([str(full), "--format", "explicit", "--base", "img"], "--format explicit has none"),
    ):
        refused = run_envkit("export", "--lock", *args)
        assert refused.returncode == 2 and said in refused.stderr, (args, refused.stderr)
        assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr, refused.stderr
    only = run_envkit("export", "--lock", str(mac), "--format", "explicit")
    assert only.returncode == 0 and "# platform: osx-arm64" in only.stdout.splitlines(), only.stderr
    prefix, _ = exported_env(tmp_path)
    env_refused = run_envkit("export", "-p", str(prefix), "--format", "explicit", "--platform", "linux-64")
    assert env_refused.returncode == 2 and "picks a platform of a lock, and an env is of its own" in env_refused.stderr


def test_dockerfile_parses_and_installs_the_explicit_list(tmp_path: Path) -> None:
    prefix, _ = exported_env(tmp_path)
    out = tmp_path / "Dockerfile"
    proc = run_envkit("export", "-p", str(prefix), "--format", "dockerfile", "-o", str(out))
    assert proc.returncode == 0 and proc.stdout.startswith(f"wrote {out} (dockerfile for linux-64)"), proc.stderr
    folder = run_envkit("export", "-p", str(prefix), "--format", "dockerfile", "-o", str(tmp_path))
    assert folder.returncode == 2 and f"e.g. {tmp_path / 'Dockerfile'})" in folder.stderr, folder.stderr
    commands = dockerfile.parse_file(str(out))
    assert [c.cmd for c in commands][:3] == ["FROM", "RUN", "RUN"]
    assert commands[0].original == "FROM --platform=linux/amd64 condaforge/miniforge3:latest"  # the packages' machine
    assert "<<" not in out.read_text() and "# syntax=" not in out.read_text()  # what older builders and an offline BuildKit read
    # the RUN step writes the explicit export's list (its comments aside), then conda installs it
    words = shlex.split(commands[1].value[0])
    assert words[:2] == ["printf", "%s\\n"] and words[words.index(">") + 1] == "/tmp/envkit-explicit.txt"
    listed = [line for line in export(prefix, "explicit").splitlines() if not line.startswith("#")]
    assert words[2 : words.index(">")] == listed and listed[0] == "@EXPLICIT"
    assert "conda create --yes --prefix /opt/env --file /tmp/envkit-explicit.txt" in commands[1].value[0]
    pip = shlex.split(commands[2].value[0])
    assert pip[-1].startswith("threadpoolctl @ file://") and "--no-deps" in pip
    env_lines = [c.original for c in commands if c.cmd == "ENV"]
    assert 'ENV MKL_THREADING_LAYER="GNU"' in env_lines
    assert 'ENV EXTRA_PATHS="/opt/x:/opt/y"${EXTRA_PATHS:+":"${EXTRA_PATHS}}' in env_lines
    assert 'ENV TRICKY="a \'b\' \\"c\\" \\$d `e` *"' in env_lines
    assert "# not kept: envkit's activation unsets GONE" in out.read_text()
    # the channel and the wheels are folders of this machine: named before FROM, with the mounts a build needs
    channel, links = tmp_path / "pipchannel", Path(urlsplit(pip[-1].split(" @ ", 1)[1]).path).parent
    head = out.read_text().split("\nFROM ", 1)[0]
    assert f"# files of the machine this was exported from: {channel.as_uri()}\n" in head
    assert f"# files of the machine this was exported from: {links.as_uri()}\n" in head
    assert f"podman build -v {links}:{links}:ro -v {channel}:{channel}:ro ." in head  # sorted
    # another base image, for a team's own (with conda on its PATH); a word, and only for a Dockerfile
    based = run_envkit("export", "-p", str(prefix), "--format", "dockerfile", "--base", "registry.example/ml/conda:24.11")
    assert based.returncode == 0 and "\nFROM --platform=linux/amd64 registry.example/ml/conda:24.11\n" in based.stdout
    for bad, fmt, said in (
        ("two words", "dockerfile", "is not an image reference"),
        ("-x", "dockerfile", "is not an image reference"),
        ("img", "explicit", "--format explicit has none"),
    ):
        refused = run_envkit("export", "-p", str(prefix), "--format", fmt, f"--base={bad}")
        assert refused.returncode == 2 and said in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    with_lock = run_envkit("export", "--lock", str(out), "--format", "conda-lock", "--base", "img")
    assert with_lock.returncode == 2 and "--format conda-lock has none" in with_lock.stderr


def test_a_dockerfile_of_an_env_that_is_not_linux_is_refused(tmp_path: Path) -> None:
    """A Dockerfile builds a Linux image: the packages of an env made on a Mac cannot go into one.
    (No Mac here: the env's record is made to say osx-arm64, as envkit writes it there.)"""
    prefix, _ = exported_env(tmp_path)
    record_file = prefix / "etc" / "envkit" / "record.json"
    record = json.loads(record_file.read_text())
    assert record["platform"] == "linux-64"
    record_file.write_text(json.dumps({**record, "platform": "osx-arm64"}))
    refused = run_envkit("export", "-p", str(prefix), "--format", "dockerfile")
    assert refused.returncode == 2 and "holds osx-arm64 packages, and a Dockerfile builds a Linux image" in refused.stderr
    assert (
        len(refused.stderr.strip().splitlines()) == 1
        and "envkit export --lock LOCK --platform linux-64 --format dockerfile" in refused.stderr
    )
    assert "# platform: osx-arm64" in export(prefix, "explicit")


def test_a_value_with_a_line_break_is_named_not_written_into_the_dockerfile() -> None:
    """An ENV line ends at a line break; a value holding one cannot be written, so it is named."""
    ops = (EnvOp("TWO_LINES", "set", value="a\nb"), EnvOp("P", "prepend", entries=("/x\r",)), EnvOp("OK", "set", value="c"))
    written = docker_text(EnvSnapshot("e", "/envs/e", "linux-64", None, (), (), (), ops))
    assert "ENV TWO_LINES" not in written and "ENV P=" not in written and 'ENV OK="c"' in written
    assert "# not kept: TWO_LINES holds a line break" in written and "# not kept: P holds a line break" in written


ENV_VALUE = st.text(st.characters(codec="utf-8", blacklist_characters="\x00\n\r"), max_size=30)
ENTRY_VALUE = st.text(st.characters(codec="utf-8", blacklist_characters="\x00\n\r:"), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(values=st.lists(ENV_VALUE, min_size=1, max_size=12), entries=st.lists(ENTRY_VALUE, min_size=1, max_size=3))
def test_property_a_builder_reads_every_env_line_back_as_the_value(
    tmp_path_factory: pytest.TempPathFactory, values: list[str], entries: list[str]
) -> None:
    """The Dockerfile's ENV lines, built by a real builder (buildah) FROM scratch: each variable in
    the image's config is the value exactly (`$`, quotes, backslashes, tabs, characters beyond
    ASCII; JSON's quoting lost a `$NAME` and wrote `\\u00e9` as those six characters)."""
    ops = (*(EnvOp(f"V{i}", "set", value=v) for i, v in enumerate(values)), EnvOp("P", "prepend", entries=tuple(entries)))
    written = docker_text(EnvSnapshot("e", "/envs/e", "linux-64", None, (), (), (), ops))
    env_lines = [
        line for line in written.split("\n") if line.startswith(("ENV V", "ENV P="))
    ]  # not splitlines: \x1e is no line break to Docker
    work = tmp_path_factory.mktemp("envlines")
    (work / "Dockerfile").write_text("FROM scratch\n" + "\n".join(env_lines) + "\n", encoding="utf-8")
    builder = Builder(work / "buildah", ())
    built = builder.build(work / "Dockerfile", "envlines")
    assert built.returncode == 0, built.stderr[-2000:]
    image_env = builder.config_env("envlines")
    assert [image_env[f"V{i}"] for i in range(len(values))] == values
    assert image_env["P"] == ":".join(entries)


def test_lock_export_reinstalls_the_same_env(tmp_path: Path) -> None:
    prefix, env = exported_env(tmp_path)
    out = tmp_path / "now.lock"
    assert run_envkit("export", "-p", str(prefix), "--format", "lock", "-o", str(out)).returncode == 0
    lock = read_lock(out)
    linux = lock.for_platform("linux-64")
    assert linux is not None and sorted(r.name.normalized for r in linux.records) == ["pip", "python"]
    assert [p.name for p in linux.pip] == ["threadpoolctl"]
    assert rattler.LockFile.from_path(out).default_environment() is not None
    recipe = tmp_path / "r" / "exp.yaml"
    again = run_envkit("create", str(recipe), "-n", "again", "--lock", str(out), "--yes", "--no-probe", env=env)
    assert again.returncode == 0, again.stderr
    twin = tmp_path / "envs" / "again"
    assert sorted(p.name for p in (twin / "conda-meta").glob("*.json")) == sorted(p.name for p in (prefix / "conda-meta").glob("*.json"))
    assert (twin / "lib" / "python3.11" / "site-packages" / "threadpoolctl-3.8.0.dist-info").is_dir()


def test_export_of_a_missing_env_and_a_bad_format(tmp_path: Path) -> None:
    missing = run_envkit("export", "-n", "nope", "--format", "explicit")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr and missing.stderr.count("\n") == 1
    bad = run_envkit("export", "-p", str(tmp_path), "--format", "toml")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    assert all(f in bad.stderr for f in FORMATS)  # the choices argparse offers are the formats export writes


def test_a_record_no_export_can_read_stops_every_format(tmp_path: Path) -> None:
    """A package record that is JSON but no record (a list; a 'files' rattler cannot take) was left
    out of environment.yml and @EXPLICIT without a word, and crashed the lock export: an export
    that claims to be the env must hold all of it, or be refused in one line."""
    recipe = write_recipe(tmp_path / "r", "t", f"envkit: 1\nname: t\nchannels: [{tiny_channel(tmp_path).as_uri()}]\npackages: [tool]\n")
    assert run_envkit("create", str(recipe), "--yes", "--no-probe").returncode == 0
    prefix = tmp_path / "envs" / "t"
    helper = next((prefix / "conda-meta").glob("helper-*.json"))
    good = json.loads(helper.read_text())
    cases = (
        ([1, 2], "a JSON list, not an object", FORMATS),
        ({**good, "files": 5}, "'files' is not a list of strings", FORMATS),  # `conda list` crashes on it
        ({**good, "size": "big"}, "'size' is str, not an integer", FORMATS),  # conda's model refuses it, rattler's too
    )
    for broken, why, formats in cases:
        helper.write_text(json.dumps(broken))
        for fmt in formats:
            proc = run_envkit("export", "-p", str(prefix), "--format", fmt, "-o", str(tmp_path / f"out.{fmt}"))
            assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (fmt, proc.stderr)
            assert f"{helper} is not a readable package record" in proc.stderr and why in proc.stderr, proc.stderr
            assert not (tmp_path / f"out.{fmt}").exists()
    helper.write_text(json.dumps(good))
    legacy = prefix / "conda-meta" / "envkit.json"  # what envkit 0.1 left there: no package record either
    legacy.write_text(json.dumps({"envkit_record_version": 1}))
    assert run_envkit("export", "-p", str(prefix), "--format", "lock", "-o", str(tmp_path / "legacy.lock")).returncode == 0
    assert sorted(r.name.normalized for r in read_lock(tmp_path / "legacy.lock").platforms[0].records) == ["helper", "tool"]


def test_output_to_a_stream_a_folder_or_nowhere(tmp_path: Path) -> None:
    """`-o /dev/stdout` is the text on stdout (a rename over it replaced /dev/stdout's target, and as
    root replaced /dev/full with a regular file); a folder, or a path through a file, is one line."""
    channel = tiny_channel(tmp_path)
    recipe = write_recipe(tmp_path / "r", "out", f"envkit: 1\nname: out\nchannels: [{channel.as_uri()}]\npackages: [tool]\n")
    assert run_envkit("create", str(recipe), "--yes", "--no-probe").returncode == 0
    prefix = tmp_path / "envs" / "out"
    piped = subprocess.run(
        [sys.executable, "-m", "envkit", "export", "-p", str(prefix), "--format", "explicit", "-o", "/dev/stdout"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == export(prefix, "explicit")  # the file alone: what envkit says went to stderr
    assert piped.stderr == f"wrote /dev/stdout (explicit for linux-64) from {prefix}\n"
    lock_out = subprocess.run(
        [sys.executable, "-m", "envkit", "lock", str(recipe), "-o", "/dev/stdout"], capture_output=True, text=True, check=False
    )
    assert lock_out.returncode == 0, lock_out.stderr
    assert read_lock_text(lock_out.stdout, tmp_path).recipe == "out" and lock_out.stderr.startswith("wrote /dev/stdout for recipe out")
    # `-o -` is stdout, as most tools take it (it wrote a file named "-")
    dash = subprocess.run(
        [sys.executable, "-m", "envkit", "lock", str(recipe), "-o", "-"], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert dash.returncode == 0 and dash.stdout == lock_out.stdout and not (tmp_path / "-").exists()
    assert dash.stderr.startswith("wrote the lock to stdout for recipe out")
    assert export(prefix, "explicit", "-o", "-") == export(prefix, "explicit")
    # --json would be a second document in the same stream: refused before anything is done
    for args in (
        ("lock", str(recipe), "-o", "-", "--json"),
        ("export", "-p", str(prefix), "--format", "lock", "-o", "/dev/stdout", "--json"),
    ):
        clash = run_envkit(*args)
        assert clash.returncode == 2 and clash.stdout == "" and "both write to stdout" in clash.stderr, clash.stderr
    (tmp_path / "a-file").write_text("")
    for output, said in ((tmp_path, "it is a directory"), (tmp_path / "a-file" / "x.txt", "Not a directory")):
        proc = run_envkit("export", "-p", str(prefix), "--format", "explicit", "-o", str(output))
        assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    locked = run_envkit("lock", str(recipe), "-o", str(tmp_path))
    assert locked.returncode == 2 and "it is a directory" in locked.stderr


def test_environment_yml_of_a_plain_env_keeps_conda_config_vars(tmp_path: Path) -> None:
    """An env envkit did not make: packages from conda-meta, variables from conda-meta/state."""
    channel = tiny_channel(tmp_path)
    prefix = tmp_path / "plain"
    from envkit.solve import backend

    records = backend.solve([channel.as_uri()], ["tool"], "linux-64", backend.virtual_packages("linux-64"))
    backend.install(records, prefix, tmp_path / "pkgs", ["tool"], None)
    (prefix / "conda-meta" / "state").write_text(json.dumps({"env_vars": {"MKL_THREADING_LAYER": "GNU"}}))
    doc = yaml.safe_load(export(prefix, "environment-yml"))
    assert doc["variables"] == {"MKL_THREADING_LAYER": "GNU"}
    assert sorted(doc["dependencies"]) == ["helper=1.0=0", "tool=1.0=0"]


@pytest.mark.parametrize(
    ("folder", "recipe", "name"),
    [("exp", "exp", "exp"), ("team env", "yolov8", "yolov8"), ("a:b#c", None, "a-b-c"), ("base", None, "base-env"), ("root", "r", "r")],
)
def test_the_environment_yml_name_is_one_conda_accepts(folder: str, recipe: str | None, name: str) -> None:
    assert conda_env_name(folder, recipe) == name


def test_a_value_worked_out_for_this_machine_is_said_to_be_its(tmp_path: Path) -> None:
    """`omp_num_threads: physical-cores` is this machine's core count in its scripts; an export is
    for other machines. environment.yml and the Dockerfile said OMP_NUM_THREADS="2" as if the
    recipe had; the lock export pinned the number where `envkit lock` keeps the rule."""
    channel = tiny_channel(tmp_path)
    recipe = write_recipe(
        tmp_path / "r",
        "cores",
        f"envkit: 1\nname: cores\nchannels: [{channel.as_uri()}]\npackages: [tool]\nthreading: {{omp_num_threads: physical-cores}}\n",
    )
    assert run_envkit("create", str(recipe), "--yes", "--no-probe").returncode == 0
    prefix = tmp_path / "envs" / "cores"
    here = json.loads((prefix / "etc" / "envkit" / "record.json").read_text())["activation"]["ops"][0]["value"]
    note = f"# OMP_NUM_THREADS={here} is physical-cores of the machine this was exported from (the recipe asks for physical-cores): "
    yml = export(prefix, "environment-yml")
    assert yaml.safe_load(yml)["variables"] == {"OMP_NUM_THREADS": here}  # conda's variables are literal: the number stays
    assert note + "change it to suit the machine that runs the env" in yml.splitlines()
    assert note + "give the host's own with docker run -e NAME=N" in export(prefix, "dockerfile").splitlines()
    out = tmp_path / "now.lock"
    assert run_envkit("export", "-p", str(prefix), "--format", "lock", "-o", str(out)).returncode == 0
    linux = read_lock(out).for_platform("linux-64")
    assert linux is not None and [(s["name"], s["value"], s["computed"]) for s in linux.activation] == [
        ("OMP_NUM_THREADS", "", "physical-cores")
    ]
    locked = tmp_path / "locked.lock"
    assert run_envkit("lock", str(recipe), "-o", str(locked)).returncode == 0
    locked_linux = read_lock(locked).for_platform("linux-64")
    assert locked_linux is not None and locked_linux.activation == linux.activation  # as envkit lock keeps it


def test_an_export_names_the_wheels_the_env_has_not_the_ones_envkit_installed(tmp_path: Path) -> None:
    """An export is of the env as it is. A wheel pip moved since (`pip install -U`, or a git wheel
    force-reinstalled at another commit) was exported by the file or commit envkit had recorded
    for its name: `conda env create -f` of it made the old env under the new version's name."""
    prefix, env = exported_env(tmp_path)
    homemade_wheel(tmp_path / "links", "threadpoolctl", "9.9", {"threadpoolctl.py": "__version__ = '9.9'\n"})
    pip = [str(prefix / "bin" / "python"), "-m", "pip", "install", "--quiet", "--upgrade", "threadpoolctl"]
    subprocess.run(pip, check=True, env=env)
    wheels = next(d["pip"] for d in yaml.safe_load(export(prefix, "environment-yml"))["dependencies"] if isinstance(d, dict))
    assert wheels == ["threadpoolctl==9.9"]


def test_an_export_names_the_commit_a_git_wheel_is_at_now(tmp_path: Path) -> None:
    commit, _, source, moved, git_env = made_git_env(tmp_path, "gitexp")
    second = commit("REV = 2\n")
    _hand_moved(moved, git_env, f"{source}@{second}")
    wheels = next(d["pip"] for d in yaml.safe_load(export(moved, "environment-yml"))["dependencies"] if isinstance(d, dict))
    assert wheels == [f"proj @ {source}@{second}"]
    assert [p.url for p in read_lock_text(export(moved, "lock"), tmp_path).platforms[0].pip] == [f"{source}@{second}"]


TEXT = st.text(st.characters(codec="utf-8"), min_size=1, max_size=30)  # UTF-8: no lone surrogates


@settings(max_examples=60, deadline=None)
@given(name=TEXT, version=TEXT, url=TEXT, depend=TEXT, spec=st.text(max_size=20), value=st.text(max_size=40), wheel_url=TEXT)
def test_exports_read_back_as_written_whatever_the_strings(
    name: str, version: str, url: str, depend: str, spec: str, value: str, wheel_url: str
) -> None:
    """Every value the YAML exports hold reads back as itself (colons, quotes, `#`, line breaks,
    control characters, YAML's own words, characters beyond U+FFFF, which JSON's escapes turned into
    two), and every comment stays on its line whatever a name or a path in it holds."""
    package = ExportedPackage(name, version, "b0", "ch", url, "a" * 64, "b" * 32, ((depend, spec),))
    op = EnvOp("MKL_THREADING_LAYER", "set", value=value)
    env = EnvSnapshot(name, f"/envs/{name}", "linux-64", name, (url,), (package,), (ExportedPip(name, version, wheel_url),), (op,))
    doc = yaml.safe_load(conda_lock((env,)))
    conda, pip = doc["package"]
    assert (conda["name"], conda["version"], conda["url"], conda["dependencies"]) == (name, version, url, {depend: spec})
    assert doc["metadata"]["channels"] == [{"url": url, "used_env_vars": []}]
    assert doc["metadata"]["custom_metadata"]["envkit.activation.linux-64.MKL_THREADING_LAYER"] == value
    assert doc["metadata"]["custom_metadata"]["envkit.recipe"] == name
    url_part, _, fragment = wheel_url.partition("#")
    assert pip["url"] == (url_part if fragment.startswith("sha256=") else wheel_url)
    yml = yaml.safe_load(environment_yml(env))
    assert (yml["name"], yml["channels"], yml["variables"]) == (name, [url], {"MKL_THREADING_LAYER": value})
    assert yml["dependencies"][0] == f"{name}={version}=b0"
    listed = explicit(env).split("\n")
    assert all(line.startswith("#") for line in listed[: listed.index("@EXPLICIT")])


def test_a_conda_lock_of_nothing_it_can_pin_is_an_empty_list_not_null() -> None:
    """A bare `package:` is YAML's null, which conda-lock's model refuses; a wheel with no file URL
    is left out of the entries (and named in the header)."""
    env = EnvSnapshot("e", "/envs/e", "linux-64", None, (), (), (ExportedPip("proj", "1.0", None),), ())
    written = conda_lock((env,))
    assert yaml.safe_load(written)["package"] == [] and "# not kept: pip package proj==1.0" in written


def test_environment_yml_asks_conda_for_pip_where_the_env_has_wheels_but_no_conda_pip() -> None:
    """conda env create runs the `pip:` section with conda's pip: without it in the dependencies
    the create fails (an env whose pip came with its python, not as a conda package)."""
    from dataclasses import replace

    from envkit.team.export import EnvSnapshot, ExportedPackage, ExportedPip, environment_yml

    wheels = (ExportedPip("idna", "3.4", None),)
    bare = EnvSnapshot(
        "e",
        "/x/e",
        "linux-64",
        None,
        ("conda-forge",),
        (ExportedPackage("python", "3.11.0", "0", "conda-forge", "https://x/python.conda", None, None),),
        wheels,
        (),
    )
    deps = yaml.safe_load(environment_yml(bare))["dependencies"]
    assert deps == ["python=3.11.0=0", "pip", {"pip": ["idna==3.4"]}]
    with_pip = replace(
        bare, packages=(*bare.packages, ExportedPackage("pip", "24.0", "0", "conda-forge", "https://x/pip.conda", None, None))
    )
    assert yaml.safe_load(environment_yml(with_pip))["dependencies"].count("pip") == 0
