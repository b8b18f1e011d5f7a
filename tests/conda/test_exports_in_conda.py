"""envkit's exports installed by the real conda: `conda env create -f` keeps the activation
settings (seen after `conda activate`), `conda create --file` takes the explicit list with its
hashes, and a real image builder (buildah) builds the Dockerfile with this conda in its base
image. The conda-lock export is installed by conda-lock itself and by conda's conda-lockfiles
plugin; pixi-sbom reads the lock, the exports and the env."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import yaml

from envkit.team.lock import Lock, read_lock
from tests.conda.test_envkit_envs_in_conda import envkit_env
from tests.conftest import ROOT, run_envkit, write_recipe
from tests.support.buildah import Builder, host_mounts
from tests.support.conda import Conda, tool_exe
from tests.team.test_export import exported_env
from tests.team.test_export import team_lock as threaded_team_lock
from tests.team.test_sync import made_git_env


def names(prefix: Path) -> list[str]:
    return sorted(json.loads(p.read_text())["name"] for p in (prefix / "conda-meta").glob("*.json"))


def create_from_yml(conda: Conda, yml: Path, made: Path, pip_env: dict[str, str]) -> None:
    """`conda env create -f`, its pip section offline from the test's wheels."""
    conda.ok(
        "env",
        "create",
        "-q",
        "-p",
        str(made),
        "-f",
        str(yml),
        env=conda.environ(**{k: v for k, v in pip_env.items() if k.startswith("PIP_")}),
    )


def test_conda_env_create_keeps_the_activation_settings(conda: Conda, tmp_path: Path) -> None:
    prefix, pip_env = exported_env(tmp_path)
    yml = tmp_path / "environment.yml"
    assert run_envkit("export", "-p", str(prefix), "--format", "environment-yml", "-o", str(yml)).returncode == 0
    made = tmp_path / "by-conda"
    create_from_yml(conda, yml, made, pip_env)
    assert names(made) == names(prefix)
    assert (made / "lib" / "python3.11" / "site-packages" / "threadpoolctl-3.8.0.dist-info").is_dir()  # conda ran pip on the locked URL
    script = (
        'eval "$("$CONDA_EXE_FOR_TEST" shell.bash hook)"; conda activate "$ENV_PREFIX"; '
        'printf "%s\\n" "$MKL_THREADING_LAYER"; python -c "import os; print(os.environ[\'MKL_THREADING_LAYER\'])"'
    )
    env = conda.environ(CONDA_EXE_FOR_TEST=str(conda.exe), ENV_PREFIX=str(made))
    env.pop("MKL_THREADING_LAYER", None)
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["GNU", "GNU"]
    # conda keeps every value exactly (conda-meta/state); its POSIX activator does not escape a single
    # quote in one, which the export says in a comment
    state = json.loads((made / "conda-meta" / "state").read_text())["env_vars"]
    assert state == {"MKL_THREADING_LAYER": "GNU", "TRICKY": "a 'b' \"c\" $d `e` *"}
    assert "# not kept exactly: TRICKY holds a single quote" in yml.read_text()
    run = conda.ok("run", "-p", str(made), "python", "-c", "import os; print(os.environ.get('MKL_THREADING_LAYER'))")
    assert run.strip() == "GNU"
    # conda keeps the variables for its activation alone: the made env's python started directly
    # (a job script's `srun ENV/bin/python`) has none until the audit carries the threading one
    direct = [str(made / "bin" / "python"), "-c", "import os; print(os.environ.get('MKL_THREADING_LAYER'), os.environ.get('TRICKY'))"]
    assert subprocess.run(direct, capture_output=True, text=True, env=env, check=True).stdout == "None None\n"
    audit = json.loads(run_envkit("audit", "-p", str(made), "--json").stdout)["data"]["audits"][0]
    assert [f["evidence"].split(" at ")[0] for f in audit["findings"] if f["rule_id"] == "EK037"] == [
        "MKL_THREADING_LAYER=GNU is set by conda-meta/state"
    ]
    assert "gets the threading ones once `envkit audit -p ENV --fix` has run in the new env (EK037)" in yml.read_text()
    assert run_envkit("audit", "-p", str(made), "--fix", "--yes").returncode == 0
    assert subprocess.run(direct, capture_output=True, text=True, env=env, check=True).stdout == "GNU None\n"


def test_conda_create_from_the_explicit_list(conda: Conda, tmp_path: Path) -> None:
    prefix, _ = exported_env(tmp_path)
    listing = tmp_path / "explicit.txt"
    assert run_envkit("export", "-p", str(prefix), "--format", "explicit", "-o", str(listing)).returncode == 0
    made = tmp_path / "from-list"
    conda.ok("create", "-q", "-y", "-p", str(made), "--file", str(listing))
    assert names(made) == names(prefix)
    explicit = [line for line in conda.ok("list", "--explicit", "--sha256", "-p", str(made)).splitlines() if line.startswith("file:")]
    # conda's own explicit list of the new env carries the same URLs and sha256s (it writes url#<sha256>)
    ours = [line.replace("#sha256:", "#") for line in listing.read_text().splitlines() if line.startswith("file:")]
    assert sorted(explicit) == sorted(ours)


def test_conda_installs_the_exports_of_a_lock_made_without_an_env(conda: Conda, replica: dict[str, Path], tmp_path: Path) -> None:
    """A team's lock for Linux, macOS and Windows, exported for linux-64 with no env made first (as a
    Mac user would for a Linux machine): conda installs exactly the lock's linux-64 records from the
    explicit list (its own `list --explicit --sha256` agrees) and from the environment.yml, whose
    env gets the lock's settings and no OMP_NUM_THREADS, a number the lock leaves to the machine;
    buildah builds the Dockerfile into an image with the same packages and settings."""
    lock = threaded_team_lock(replica, tmp_path / "recipes")
    here = read_lock(lock).for_platform("linux-64")
    assert here is not None
    listing, yml = tmp_path / "explicit.txt", tmp_path / "environment.yml"
    for fmt, out in (("explicit", listing), ("environment-yml", yml)):
        made = run_envkit("export", "--lock", str(lock), "--format", fmt, "--platform", "linux-64", "-o", str(out))
        assert made.returncode == 0, made.stderr
    by_list = tmp_path / "from-list"
    conda.ok("create", "-q", "-y", "-p", str(by_list), "--file", str(listing))
    assert names(by_list) == sorted(r.name.normalized for r in here.records)
    explicit = [line for line in conda.ok("list", "--explicit", "--sha256", "-p", str(by_list)).splitlines() if line.startswith("file:")]
    assert sorted(explicit) == sorted(f"{r.url}#{bytes(r.sha256).hex()}" for r in here.records)
    by_yml = tmp_path / "from-yml"
    conda.ok("env", "create", "-q", "-p", str(by_yml), "-f", str(yml))
    assert names(by_yml) == names(by_list)
    assert json.loads((by_yml / "conda-meta" / "state").read_text())["env_vars"] == {"MKL_THREADING_LAYER": "GNU"}
    # the Dockerfile, built by a real builder FROM a conda image made here, given the folders its comment names
    context = tmp_path / "context"
    context.mkdir()
    base = "localhost/envkit-test-conda"
    out = context / "Dockerfile"
    made = run_envkit("export", "--lock", str(lock), "--format", "dockerfile", "--base", base, "-o", str(out))
    assert made.returncode == 0, made.stderr
    assert f"-v {replica['conda-forge']}:{replica['conda-forge']}:ro" in out.read_text()
    builder = Builder(tmp_path / "buildah", host_mounts(ROOT, replica["conda-forge"]))
    builder.conda_image(conda.exe, "envkit-test-conda", {"CONDA_PKGS_DIRS": "/tmp/pkgs", "CONDA_NUMBER_CHANNEL_NOTICES": "0"})
    built = builder.build(out, "envkit-test-locked")
    assert built.returncode == 0, f"{built.stdout[-3000:]}\n{built.stderr[-3000:]}"
    records = [name for name in builder.files("envkit-test-locked", "/opt/env/conda-meta") if name.endswith(".json")]
    assert records == sorted(p.name for p in (by_list / "conda-meta").glob("*.json"))
    image_env = builder.config_env("envkit-test-locked")
    assert image_env["MKL_THREADING_LAYER"] == "GNU" and "OMP_NUM_THREADS" not in image_env


WIDE = 'é \\u00e9 a\\b\ttab ${HOME} $x "q" 🚀'  # what JSON's quoting (the old ENV lines) changed in a builder


def test_buildah_builds_the_dockerfile_and_its_image_has_the_settings(conda: Conda, tmp_path: Path) -> None:
    """A real builder (buildah: podman's engine) builds the exported Dockerfile as it is, FROM a
    conda image made here: the image's env holds the env's packages and its wheel, its config the
    activation settings exactly, and a process started in it sees them. buildah 1.28 reads no
    heredoc (1.33 does), so this also holds the export to what older builders read."""
    prefix, _ = exported_env(tmp_path, extra_variables={"WIDE": WIDE})
    context = tmp_path / "context"
    context.mkdir()
    out = context / "Dockerfile"
    base = "localhost/envkit-test-conda"
    assert run_envkit("export", "-p", str(prefix), "--format", "dockerfile", "--base", base, "-o", str(out)).returncode == 0
    # the env's channel and wheels are folders of this machine: the build is given those the
    # Dockerfile's own comment names, and no other (the build fails if it names too few)
    advice = shlex.split(re.search(r"podman build (.*) \.\),", out.read_text()).group(1))  # type: ignore[union-attr]
    folders = [Path(mount.split(":")[0]) for flag, mount in zip(advice[::2], advice[1::2], strict=True) if flag == "-v"]
    assert sorted(folders) == sorted({tmp_path / "pipchannel", *(p for p in tmp_path.iterdir() if p.name.startswith("links"))}), folders
    builder = Builder(tmp_path / "buildah", host_mounts(ROOT, *folders))
    made = builder.conda_image(
        conda.exe,
        "envkit-test-conda",
        {"CONDA_PKGS_DIRS": "/tmp/pkgs", "CONDA_ADD_PIP_AS_PYTHON_DEPENDENCY": "false", "CONDA_NUMBER_CHANNEL_NOTICES": "0"},
    )
    assert made == base, made
    built = builder.build(out, "envkit-test-env")
    assert built.returncode == 0, f"{built.stdout[-3000:]}\n{built.stderr[-3000:]}"
    records = [name for name in builder.files("envkit-test-env", "/opt/env/conda-meta") if name.endswith(".json")]
    assert records == sorted(p.name for p in (prefix / "conda-meta").glob("*.json"))
    assert "threadpoolctl-3.8.0.dist-info" in builder.files("envkit-test-env", "/opt/env/lib/python3.11/site-packages")
    image_env = builder.config_env("envkit-test-env")
    assert image_env["MKL_THREADING_LAYER"] == "GNU" and image_env["EXTRA_PATHS"] == "/opt/x:/opt/y"
    assert image_env["TRICKY"] == "a 'b' \"c\" $d `e` *" and image_env["WIDE"] == WIDE
    assert image_env["CONDA_PREFIX"] == "/opt/env" and image_env["PATH"].startswith(f"/opt/env/bin:{conda.exe.parent}:")
    assert "GONE" not in image_env
    # a process in the image: the env's python, with the settings
    check = context / "Check.Dockerfile"
    show = "import json, os, sys; print(json.dumps([sys.prefix, os.environ['MKL_THREADING_LAYER'], os.environ['WIDE']]))"
    check.write_text(f"FROM localhost/envkit-test-env\nRUN python -c {json.dumps(show)}\n")
    ran = builder.build(check, "envkit-test-check")
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert json.dumps(["/opt/env", "GNU", WIDE]) in ran.stdout
    # the same name, for arm64 (a builder's own base on an Apple Silicon laptop): FROM asks for the
    # packages' machine, so the builder does not take it and install linux-64 binaries on arm64
    builder.conda_image(conda.exe, "envkit-test-conda", {}, arch="arm64")
    elsewhere = builder.build(out, "envkit-test-arm")
    assert elsewhere.returncode != 0 and "image not known" in elsewhere.stderr, elsewhere.stderr[-2000:]


def test_conda_reads_rattler_lock_version_6_only(conda: Conda, tmp_path: Path) -> None:
    """What README (Lock) tells a conda-only teammate, checked: conda reads rattler's lock format
    through the conda-lockfiles plugin (tools/test.sh installs 0.2.2 into the test conda), which
    takes format version 6; py-rattler 0.28 writes 7, so conda refuses envkit's lock in one line
    naming the version. When this fails, conda reads envkit's locks: say so in README."""
    plugins = conda.ok("env", "create", "--help")
    assert "rattler-lock-v6" in plugins, "the test conda has no conda-lockfiles plugin: run bash tools/test.sh (it installs one)"
    prefix, _ = exported_env(tmp_path)
    lock = tmp_path / "exp.lock"
    assert run_envkit("export", "-p", str(prefix), "--format", "lock", "-o", str(lock)).returncode == 0
    assert lock.read_text().startswith("version: 7\n")
    made = tmp_path / "from-lock"
    refused = conda.run("env", "create", "-q", "-y", "-p", str(made), "--file", str(lock), "--format", "rattler-lock-v6")
    assert refused.returncode != 0 and "field 'version': Input should be less than or equal to 6" in refused.stderr, refused.stderr
    assert not made.exists()


def test_an_env_whose_folder_conda_cannot_name_exports_a_name_it_can(conda: Conda, tmp_path: Path) -> None:
    """conda refuses 'my env#2' as an env's folder name and as the name in an environment.yml, but
    such an env exists once a folder is renamed by hand (or made by another tool); its export gets
    a name that `conda env create -f` takes."""
    odd = tmp_path / "my env#2"
    conda.ok("create", "-y", "-q", "-p", str(tmp_path / "plain"))
    (tmp_path / "plain").rename(odd)
    yml = tmp_path / "environment.yml"
    assert run_envkit("export", "-p", str(odd), "--format", "environment-yml", "-o", str(yml)).returncode == 0
    assert '\nname: "my-env-2"\n' in yml.read_text()
    conda.ok("env", "create", "-q", "-f", str(yml), env=conda.environ(CONDA_ENVS_DIRS=str(tmp_path / "envs")))
    assert (tmp_path / "envs" / "my-env-2" / "conda-meta" / "history").is_file()


def test_a_git_wheel_travels_in_environment_yml_at_its_commit(conda: Conda, tmp_path: Path) -> None:
    """The export named a git wheel by its bare URL, so `conda env create -f` (which runs pip on
    the pip section) got whatever the repository held by then; now the commit travels, and conda's
    pip installs that commit after the branch has moved on."""
    commit, first, _, prefix, env = made_git_env(tmp_path, "gitexp")
    commit("REV = 2\n")
    yml = tmp_path / "environment.yml"
    assert run_envkit("export", "-p", str(prefix), "--format", "environment-yml", "-o", str(yml), env=env).returncode == 0
    made = tmp_path / "by-conda"
    conda.ok(
        "env", "create", "-q", "-p", str(made), "-f", str(yml), env=conda.environ(**{k: v for k, v in env.items() if k.startswith("PIP_")})
    )
    installed = json.loads((made / "lib" / "python3.11" / "site-packages" / "proj-0.1.dist-info" / "direct_url.json").read_text())
    assert installed["vcs_info"]["commit_id"] == first
    ran = conda.ok("run", "-p", str(made), "python", "-c", "import proj; print(proj.REV)")
    assert ran.strip() == "1"


def _conda_lock_install(conda: Conda, lock: Path, prefix: Path, **env: str) -> None:
    proc = subprocess.run(
        [str(tool_exe("conda-lock")), "install", "--conda", str(conda.exe), "-p", str(prefix), str(lock)],
        capture_output=True,
        text=True,
        env=conda.environ(**env),
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


def test_conda_lock_and_conda_install_the_conda_lock_export(conda: Conda, replica: dict[str, Path], tmp_path: Path) -> None:
    """conda-lock's own format, for the tools that read it and not rattler's lock: conda-lock itself,
    and conda through its conda-lockfiles plugin, which reads no lock envkit writes (rattler's
    format there is version 7). Both install exactly the env's packages, in the order the locked
    depends give. The settings stay behind (the format has no place for them); the audit's fix
    brings back the GNU the DDP crash needs."""
    prefix = envkit_env(tmp_path, replica)
    lock = tmp_path / "conda-lock.yml"
    assert run_envkit("export", "-p", str(prefix), "--format", "conda-lock", "-o", str(lock)).returncode == 0
    locked = {p["name"]: p for p in yaml.safe_load(lock.read_text())["package"]}
    for record in (json.loads(p.read_text()) for p in (prefix / "conda-meta").glob("*.json")):
        wanted: dict[str, list[str]] = {}
        for depend in record["depends"]:  # conda-lock's form: the version part, no build
            name, _, rest = depend.partition(" ")
            wanted.setdefault(name, []).extend([rest.split(" ")[0]] if rest else [])
        assert locked[record["name"]]["dependencies"] == {name: ",".join(v) for name, v in wanted.items()}
    by_tool = tmp_path / "by-conda-lock"
    _conda_lock_install(conda, lock, by_tool)
    assert names(by_tool) == names(prefix)
    by_conda = tmp_path / "by-conda"
    conda.ok("env", "create", "-q", "-y", "-p", str(by_conda), "--file", str(lock))
    assert names(by_conda) == names(prefix)
    fixed = run_envkit("audit", "-p", str(by_conda), "--fix", "--yes")
    assert fixed.returncode == 0 and "EK001" in fixed.stdout, fixed.stdout + fixed.stderr
    shown = conda.ok("run", "-p", str(by_conda), "python", "-c", "import os; print(os.environ.get('MKL_THREADING_LAYER'))")
    assert shown.strip() == "GNU"


PLATFORMS = ["linux-64", "osx-arm64", "win-64"]


def team_lock(replica: dict[str, Path], tmp_path: Path) -> tuple[Path, Lock]:
    """A recipe locked for Linux, macOS and Windows on the replica, and its lock."""
    recipe = write_recipe(
        tmp_path / "recipes",
        "multi",
        f"envkit: 1\nname: multi\nchannels: [{replica['conda-forge'].as_uri()}]\nplatforms: [{', '.join(PLATFORMS)}]\n"
        "python: '3.12'\npackages: [pytorch, numpy]\n",
    )
    assert run_envkit("lock", str(recipe)).returncode == 0
    return recipe, read_lock(recipe.with_suffix(".lock"))


def _sbom(*args: str) -> list[tuple[str, str, str | None]]:
    """pixi-sbom's CycloneDX document of a lock or an env: each component's name, version and sha256."""
    proc = subprocess.run([str(tool_exe("pixi-sbom")), *args, "--output", "-"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    components = json.loads(proc.stdout)["components"]
    sha = {c["name"]: next((h["content"] for h in c.get("hashes") or () if h["alg"] == "SHA-256"), None) for c in components}
    return sorted((c["name"], c["version"], sha[c["name"]]) for c in components)


def test_pixi_sbom_reads_the_lock_the_exports_and_the_env_alike(replica: dict[str, Path], tmp_path: Path) -> None:
    """An SBOM for a team's compliance check, made by pixi-sbom (rattler's lock format read by
    pixi's Rust code, not py-rattler's): envkit's lock, its conda-lock export and the env itself
    give the same packages, with the same hashes, the wheel's included (its hash was only in the
    URL's fragment, which rattler_lock's readers do not read as one, until the lock wrote the
    format's own field too); the explicit list has the conda packages. A three-platform lock gives
    each platform's records."""
    prefix, _ = exported_env(tmp_path)
    record = json.loads((prefix / "etc" / "envkit" / "record.json").read_text())
    wheel = record["pip_installed"][0]
    conda_side = [json.loads(p.read_text()) for p in (prefix / "conda-meta").glob("*.json")]
    want = sorted(
        [(r["name"], r["version"], r["sha256"]) for r in conda_side]
        + [(wheel["name"], wheel["version"], wheel["url"].split("#sha256=")[1])]
    )
    files = {}
    for fmt, name in (("lock", "exp.lock"), ("conda-lock", "conda-lock.yml"), ("explicit", "explicit.txt")):
        files[fmt] = tmp_path / name
        assert run_envkit("export", "-p", str(prefix), "--format", fmt, "-o", str(files[fmt])).returncode == 0
    assert _sbom("--lockfile", str(files["lock"])) == want
    assert _sbom("--lockfile", str(files["conda-lock"])) == want
    assert _sbom("--prefix", str(prefix)) == [
        (n, v, None if n == wheel["name"] else sha) for n, v, sha in want
    ]  # an env keeps no wheel's hash
    assert _sbom("--lockfile", str(files["explicit"])) == [w for w in want if w[0] != wheel["name"]]
    recipe, lock = team_lock(replica, tmp_path)
    for platform in PLATFORMS:
        locked = lock.for_platform(platform)
        assert locked is not None
        records = sorted((r.name.normalized, str(r.version), bytes(r.sha256).hex() if r.sha256 else None) for r in locked.records)
        assert _sbom("--lockfile", str(recipe.with_suffix(".lock")), "--platform", platform) == records


def test_conda_lock_installs_the_exported_wheels_where_condas_reader_refuses_them(conda: Conda, tmp_path: Path) -> None:
    """The wheels travel as conda-lock writes them (manager: pip), which conda-lock installs;
    conda-lockfiles 0.2.2 takes 'conda' or 'pypi' there and refuses the file in one line. When this
    fails, conda reads the pip entries of conda-lock files: say so in README."""
    prefix, pip_env = exported_env(tmp_path)
    lock = tmp_path / "conda-lock.yml"
    assert run_envkit("export", "-p", str(prefix), "--format", "conda-lock", "-o", str(lock)).returncode == 0
    made = tmp_path / "by-conda-lock"
    # conda-lock runs `conda run -p PREFIX pip install`: the pip command conda-forge's pip package
    # has, which the test channel's (a converted wheel) lacks; this one stands in for it
    console = tmp_path / "console"
    console.mkdir()
    (console / "pip").write_text('#!/bin/sh\nexec python -m pip "$@"\n')
    (console / "pip").chmod(0o755)
    path = f"{console}{os.pathsep}{os.environ['PATH']}"
    _conda_lock_install(conda, lock, made, PATH=path, **{k: v for k, v in pip_env.items() if k.startswith("PIP_")})
    assert names(made) == names(prefix)
    assert (made / "lib" / "python3.11" / "site-packages" / "threadpoolctl-3.8.0.dist-info").is_dir()
    refused = conda.run("env", "create", "-q", "-y", "-p", str(tmp_path / "by-conda"), "--file", str(lock))
    assert refused.returncode != 0 and "'conda' or 'pypi'" in refused.stderr + refused.stdout, refused.stderr
    assert not (tmp_path / "by-conda").exists()


def test_every_platform_of_a_lock_goes_to_conda_lock_and_installs_here(conda: Conda, replica: dict[str, Path], tmp_path: Path) -> None:
    """A team's lock for Linux, macOS and Windows as one conda-lock file, for the machines that
    install with conda-lock, micromamba or conda (none reads rattler's lock version 7): each
    platform's packages are the lock's, and here both conda-lock and conda install linux-64's."""
    recipe, lock = team_lock(replica, tmp_path)
    out = tmp_path / "conda-lock.yml"
    exported = run_envkit("export", "--lock", str(recipe.with_suffix(".lock")), "--format", "conda-lock", "-o", str(out))
    assert exported.returncode == 0, exported.stderr
    doc = yaml.safe_load(out.read_text())
    assert doc["metadata"]["platforms"] == PLATFORMS and sorted(doc["metadata"]["content_hash"]) == PLATFORMS
    for platform in PLATFORMS:
        locked = lock.for_platform(platform)
        assert locked is not None
        entries = [(p["name"], p["url"], p["hash"]["md5"]) for p in doc["package"] if p["platform"] == platform]
        assert entries == [(r.name.normalized, str(r.url), bytes(r.md5).hex()) for r in locked.records]
    here = lock.for_platform("linux-64")
    assert here is not None
    by_tool = tmp_path / "by-conda-lock"
    _conda_lock_install(conda, out, by_tool)
    assert names(by_tool) == sorted(r.name.normalized for r in here.records)
    by_conda = tmp_path / "by-conda"
    conda.ok("env", "create", "-q", "-y", "-p", str(by_conda), "--file", str(out))
    assert names(by_conda) == names(by_tool)


def test_condas_own_export_keeps_envkits_settings(conda: Conda, tmp_path: Path) -> None:
    """`conda env export` and `conda export` of an envkit env: `variables:` has envkit's settings
    (the plugin hands them to conda's exporter), so the teammate's `conda env create -f` env sets
    MKL_THREADING_LAYER at activation; the env itself is not written to."""
    prefix, pip_env = exported_env(tmp_path)
    before = sorted(p.name for p in (prefix / "conda-meta").iterdir())
    exported = conda.run("env", "export", "-p", str(prefix))
    assert exported.returncode == 0, exported.stderr
    variables = yaml.safe_load(exported.stdout)["variables"]
    assert variables["MKL_THREADING_LAYER"] == "GNU" and variables["TRICKY"] == "a 'b' \"c\" $d `e` *"
    assert "left out of this export" in exported.stderr  # the prepend setting: conda's variables hold plain values
    again = conda.ok("export", "-p", str(prefix), "--format", "environment-yaml")
    assert yaml.safe_load(again)["variables"]["MKL_THREADING_LAYER"] == "GNU"
    assert sorted(p.name for p in (prefix / "conda-meta").iterdir()) == before  # no conda-meta/state written
    yml = tmp_path / "from-conda.yml"
    yml.write_text(exported.stdout)
    made = tmp_path / "teammate"
    create_from_yml(conda, yml, made, pip_env)
    script = 'eval "$("$CONDA_EXE_FOR_TEST" shell.bash hook)"; conda activate "$ENV_PREFIX"; printf "%s\\n" "$MKL_THREADING_LAYER"'
    env = conda.environ(CONDA_EXE_FOR_TEST=str(conda.exe), ENV_PREFIX=str(made))
    env.pop("MKL_THREADING_LAYER", None)
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0 and proc.stdout.splitlines() == ["GNU"], proc.stderr


def test_a_lock_s_proofs_are_invisible_to_its_other_readers(conda: Conda, replica: dict[str, Path], tmp_path: Path) -> None:
    """Proofs live in envkit's own line of the lock (envkit.team.proofs), which rattler's readers
    skip: pixi-sbom gives the same document for a proven lock as for the same lock unproven, and
    conda's conda-lockfiles refuses it as it refuses any envkit lock (the format's version)."""
    from envkit.team.attest import attest
    from envkit.team.proofs import MachineKind, Proof, slice_digest

    recipe, lock = team_lock(replica, tmp_path)
    path = recipe.with_suffix(".lock")
    unproven = path.read_bytes()
    before = {platform: _sbom("--lockfile", str(path), "--platform", platform) for platform in PLATFORMS}
    for platform in PLATFORMS:
        locked = lock.for_platform(platform)
        assert locked is not None
        machine = MachineKind.of(platform, ["__cuda=12.4", "__cuda_arch=9.0"] if platform != "osx-arm64" else [])
        attest(Proof(platform, slice_digest(lock, locked), "pass", "2026-12-07T10:00:00+00:00", "0.1.0", machine, "n1"), path)
    assert path.read_bytes() != unproven and len(read_lock(path).proofs) == 3
    assert {platform: _sbom("--lockfile", str(path), "--platform", platform) for platform in PLATFORMS} == before
    refused = conda.run("env", "create", "-q", "-y", "-p", str(tmp_path / "c"), "--file", str(path), "--format", "rattler-lock-v6")
    assert refused.returncode != 0 and "field 'version': Input should be less than or equal to 6" in refused.stderr, refused.stderr
