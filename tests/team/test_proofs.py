"""Verified locks (envkit/team/proofs.py, envkit/team/attest.py): a probe of an env made from a
lock keeps its verdict in the lock, tied to the slice it proved; CI can require proofs per kind of
machine; a re-lock keeps the proofs of slices it leaves alone; an edited slice loses its proofs."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
import rattler

from envkit.core.errors import UsageError
from envkit.prefix.record import read_record
from envkit.team.attest import attest
from envkit.team.lock import read_lock
from envkit.team.proofs import MachineKind, Proof, RequiredKind, slice_digest, valid_proofs
from envkit.team.sync import lock_file
from tests.conftest import run_envkit, write_recipe
from tests.support.condapkg import PkgFile, PkgMeta, index_channel, write_tar_bz2
from tests.support.wheelchannel import python_shim

CPU = {k: v for k, v in os.environ.items() if not k.startswith("CONDA_OVERRIDE_")}
GPU = {**CPU, "CONDA_OVERRIDE_CUDA": "12.4", "CONDA_OVERRIDE_CUDA_ARCH": "9.0"}


def proof_channel(root: Path) -> Path:
    """python (a shim over the host's interpreter) and tool -> helper, for linux-64 and osx-arm64."""
    ch = root / "ch"
    for subdir in ("linux-64", "osx-arm64"):
        write_tar_bz2(ch, PkgMeta("tool", "1.0", "0", depends=["helper"], subdir=subdir), [PkgFile("share/tool/v.txt", b"1.0\n")])
        write_tar_bz2(ch, PkgMeta("helper", "1.0", "0", subdir=subdir), [PkgFile("share/helper/h.txt", b"h\n")])
    python_shim(ch)
    index_channel(ch)
    return ch


def _recipe(root: Path, ch: Path, platforms: str = "[linux-64]") -> Path:
    body = (
        f"envkit: 1\nname: proven\nchannels: [{ch.as_uri()}]\nplatforms: {platforms}\npackages: [tool]\nthreading: {{omp_num_threads: 1}}\n"
    )
    return write_recipe(root / "r", "proven", body)


def made_from_lock(recipe: Path, prefix: Path, env: dict[str, str] = CPU) -> str:
    # python only where this machine runs it: the osx-arm64 slice needs none to be locked
    made = run_envkit("create", str(recipe), "--locked", "-p", str(prefix), "--yes", "--no-probe", env=env)
    assert made.returncode == 0, made.stderr
    return made.stdout


def python_recipe(root: Path, ch: Path, platforms: str = "[linux-64]") -> Path:
    body = f"envkit: 1\nname: proven\nchannels: [{ch.as_uri()}]\nplatforms: {platforms}\npackages: [python, tool]\nthreading: {{omp_num_threads: 1}}\n"
    return write_recipe(root / "r", "proven", body)


def test_a_probe_with_attest_proves_the_lock_and_ci_can_require_it(tmp_path: Path) -> None:
    recipe = python_recipe(tmp_path, proof_channel(tmp_path))
    lock_path = recipe.parent / "proven.lock"
    assert run_envkit("lock", str(recipe)).returncode == 0
    before = run_envkit("recipes", "check", str(recipe), "--require-proof", "linux-64")
    assert before.returncode == 1 and "linux-64: no passing proof" in before.stdout, before.stdout
    text = recipe.read_text()
    recipe.write_text(text + "require_proof: [linux-64]\n")  # the same kind as a field of the recipe
    by_field = run_envkit("recipes", "check", str(recipe))
    assert by_field.returncode == 1 and "linux-64: no passing proof" in by_field.stdout and "stale" not in by_field.stdout
    made = made_from_lock(recipe, tmp_path / "env")
    assert "lock: not proven on this kind of machine (linux-64); 'envkit probe --attest" in made
    digest_before = json.loads((tmp_path / "env" / "etc" / "envkit" / "record.json").read_text())["lock"]["digest"]

    probed = run_envkit("probe", "-p", str(tmp_path / "env"), "--attest", env=CPU)
    assert probed.returncode == 0, probed.stdout + probed.stderr
    assert f"attested in {lock_path}: linux-64, " in probed.stdout
    lock = read_lock(lock_path)
    linux = lock.for_platform("linux-64")
    assert linux is not None and len(lock.proofs) == 1 and valid_proofs(lock, linux) == lock.proofs
    proof = lock.proofs[0]
    assert proof.outcome == "pass" and proof.machine.key == "linux-64" and proof.machine.glibc and proof.node
    assert dict(proof.checks)["runtimes"] == "pass" and proof.envkit_version

    after = run_envkit("recipes", "check", str(recipe), "--require-proof", "linux-64")
    assert after.returncode == 0, after.stdout
    still = run_envkit("recipes", "check", str(recipe), "--require-proof", "linux-64,linux-64+cuda")
    assert still.returncode == 1 and "linux-64+cuda: no passing proof" in still.stdout
    assert run_envkit("recipes", "check", str(recipe)).returncode == 0  # the field's linux-64, now proven
    recipe.write_text(text + "require_proof: [linux-64, linux-64+cuda]\n")
    by_field = run_envkit("recipes", "check", str(recipe))
    assert by_field.returncode == 1 and "linux-64+cuda: no passing proof" in by_field.stdout and "stale" not in by_field.stdout
    recipe.write_text(text)
    again = made_from_lock(recipe, tmp_path / "again")
    assert "lock: proven on linux-64, " in again and ", pass" in again

    # the proofs are left out of the lock's digest: the envs made from it are not out of date
    record = read_record(tmp_path / "env")
    assert record is not None and lock_file(record) == "unchanged"
    assert json.loads((tmp_path / "env" / "etc" / "envkit" / "record.json").read_text())["lock"]["digest"] == digest_before
    synced = run_envkit("sync", "-p", str(tmp_path / "env"), "--locked")
    assert synced.returncode == 0 and "nothing to do" in synced.stdout, synced.stdout + synced.stderr
    # rattler's readers skip envkit's line: the lock reads as it did
    env = rattler.LockFile.from_path(lock_path).default_environment()
    assert env is not None
    records = {str(platform): sorted(r.name.normalized for r in found) for platform, found in env.conda_repodata_records().items()}
    assert records == {"linux-64": ["helper", "python", "tool"]}


def test_a_gpu_kind_is_proven_only_by_a_probe_on_such_a_machine(tmp_path: Path) -> None:
    recipe = python_recipe(tmp_path, proof_channel(tmp_path))
    assert run_envkit("lock", str(recipe)).returncode == 0
    made_from_lock(recipe, tmp_path / "env")
    assert run_envkit("probe", "-p", str(tmp_path / "env"), "--attest", env=CPU).returncode == 0
    on_gpu = made_from_lock(recipe, tmp_path / "gpu", env=GPU)
    assert "lock: not proven on this kind of machine (linux-64+cuda_arch=9.0) (proven on linux-64)" in on_gpu
    probed = run_envkit("probe", "-p", str(tmp_path / "gpu"), "--attest", env=GPU)
    assert probed.returncode == 0 and "linux-64 with __cuda_arch 9.0, __cuda 12.4" in probed.stdout, probed.stdout
    assert run_envkit("recipes", "check", str(recipe), "--require-proof", "linux-64+cuda,linux-64+cuda_arch=9.0").returncode == 0
    other_arch = run_envkit("recipes", "check", str(recipe), "--require-proof", "linux-64+cuda_arch=8.0")
    assert other_arch.returncode == 1 and "linux-64+cuda_arch=8.0: no passing proof" in other_arch.stdout
    assert "lock: proven on linux-64 with __cuda_arch 9.0" in made_from_lock(recipe, tmp_path / "gpu2", env=GPU)
    shown = run_envkit("lock", str(recipe), "--show")
    assert shown.returncode == 0 and "kind linux-64+cuda_arch=9.0" in shown.stdout and "kind linux-64;" in shown.stdout


def test_only_an_env_that_is_the_lock_s_slice_is_attested(tmp_path: Path) -> None:
    ch = proof_channel(tmp_path)
    recipe = python_recipe(tmp_path, ch)
    assert run_envkit("lock", str(recipe)).returncode == 0
    solved = run_envkit("create", str(recipe), "-p", str(tmp_path / "solved"), "--yes", "--no-probe")
    assert solved.returncode == 0
    refused = run_envkit("probe", "-p", str(tmp_path / "solved"), "--attest")
    assert refused.returncode == 2 and "was not installed from a lock" in refused.stderr and "Traceback" not in refused.stderr
    prefix = tmp_path / "env"
    made_from_lock(recipe, prefix)
    meta = prefix / "conda-meta" / "tool-1.0-0.json"
    record = json.loads(meta.read_text())
    meta.write_text(json.dumps({**record, "sha256": "f" * 64}))  # the same name, version and build from another archive
    rebuilt = run_envkit("probe", "-p", str(prefix), "--attest")
    assert rebuilt.returncode == 2 and "~ tool 1.0 0: another archive (sha256 ffffffffffff...)" in rebuilt.stderr, rebuilt.stderr
    meta.rename(prefix / "conda-meta" / "tool-1.0-0.json.gone")
    differs = run_envkit("probe", "-p", str(prefix), "--attest")
    assert differs.returncode == 2 and f"is not the linux-64 slice of {recipe.parent / 'proven.lock'} (- tool 1.0 0)" in differs.stderr
    assert read_lock(recipe.parent / "proven.lock").proofs == ()


def test_a_relock_keeps_the_proofs_of_the_slices_it_leaves_alone(tmp_path: Path) -> None:
    ch = proof_channel(tmp_path)
    recipe = _recipe(tmp_path, ch, "[linux-64, osx-arm64]")
    lock_path = recipe.parent / "proven.lock"
    assert run_envkit("lock", str(recipe)).returncode == 0
    lock = read_lock(lock_path)
    # what a probe on each kind of machine keeps (no osx-arm64 machine is here to run one)
    for platform in ("linux-64", "osx-arm64"):
        locked = lock.for_platform(platform)
        assert locked is not None
        attest(_proof(platform, slice_digest(lock, locked)), lock_path)
    assert len(read_lock(lock_path).proofs) == 2
    same = run_envkit("lock", str(recipe), "--update", "helper")  # nothing newer: no slice moves
    assert same.returncode == 0 and len(read_lock(lock_path).proofs) == 2, same.stderr
    write_tar_bz2(ch, PkgMeta("tool", "2.0", "0", depends=["helper"], subdir="linux-64"), [PkgFile("share/tool/v.txt", b"2.0\n")])
    index_channel(ch)
    moved = run_envkit("lock", str(recipe), "--update", "tool")
    assert moved.returncode == 0, moved.stderr
    kept = read_lock(lock_path)
    assert [p.platform for p in kept.proofs] == ["osx-arm64"]
    osx = kept.for_platform("osx-arm64")
    assert osx is not None and valid_proofs(kept, osx) == kept.proofs


def attested(tmp_path: Path) -> tuple[Path, Path]:
    """A recipe locked, an env made from the lock and probed with --attest: (recipe, lock)."""
    recipe = python_recipe(tmp_path, proof_channel(tmp_path))
    assert run_envkit("lock", str(recipe)).returncode == 0
    made_from_lock(recipe, tmp_path / "env")
    assert run_envkit("probe", "-p", str(tmp_path / "env"), "--attest").returncode == 0
    return recipe, recipe.parent / "proven.lock"


def test_an_edited_slice_loses_its_proofs(tmp_path: Path) -> None:
    recipe, lock_path = attested(tmp_path)
    assert run_envkit("recipes", "check", str(recipe), "--require-proof", "linux-64").returncode == 0
    text = lock_path.read_text()
    helper = read_lock(lock_path).for_platform("linux-64")
    assert helper is not None
    old = next(r for r in helper.records if r.name.normalized == "helper").sha256.hex()
    assert text.count(old) == 1
    lock_path.write_text(text.replace(old, "0" * 64))  # the slice edited by hand; its proof is left as it was
    assert len(read_lock(lock_path).proofs) == 1
    failed = run_envkit("recipes", "check", str(recipe), "--require-proof", "linux-64")
    assert failed.returncode == 1 and "no passing proof (1 proof of an earlier linux-64 slice no longer count" in failed.stdout
    shown = run_envkit("lock", str(lock_path), "--show")
    assert "(of an earlier slice: counts for nothing)" in shown.stdout
    looked = run_envkit("create", str(recipe), "--locked", "-p", str(tmp_path / "after"), "--dry-run")
    assert looked.returncode == 0 and "lock: not proven on this kind of machine (linux-64)" in looked.stdout, looked.stdout + looked.stderr


def test_a_proof_edited_to_hold_terminal_codes_is_shown_escaped(tmp_path: Path) -> None:
    _, lock_path = attested(tmp_path)
    lines = lock_path.read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("envkit: "))
    section = json.loads(lines[at][len("envkit: ") :])
    section["proofs"][0]["node"] = "n1\x1b[2J\nrm -rf ~"
    section["proofs"].append({"platform": "linux-64", "slice": 5})  # not one envkit writes: dropped
    lines[at] = "envkit: " + json.dumps(section, sort_keys=True)
    lock_path.write_text("\n".join(lines))
    shown = run_envkit("lock", str(lock_path), "--show")
    assert shown.returncode == 0 and "\x1b" not in shown.stdout and "n1\\x1b[2J\\nrm -rf ~" in shown.stdout
    assert len(read_lock(lock_path).proofs) == 1


def test_machine_kinds_are_named_and_matched_as_documented() -> None:
    assert RequiredKind.parse("linux-64+cuda_arch=9.0") == RequiredKind("linux-64", True, "9.0")
    for bad in ("linux-64+rocm", "linux 64", "linux-64+cuda_arch=", "osx-arm64+cuda=12", "linx-64", "linux-64+cuda+cuda_arch=9.0"):
        with pytest.raises(UsageError):
            RequiredKind.parse(bad)
    hopper = MachineKind.of("linux-64", ["__glibc=2.36", "__cuda=12.4", "__cuda_arch=9.0"])
    cpu = MachineKind.of("linux-64", ["__glibc=2.28"])
    assert hopper.key == "linux-64+cuda_arch=9.0" and cpu.key == "linux-64"
    assert hopper.satisfies(RequiredKind("linux-64")) and hopper.satisfies(RequiredKind("linux-64", True))
    assert not cpu.satisfies(RequiredKind("linux-64", True)) and not hopper.satisfies(RequiredKind("linux-64", True, "8.0"))
    assert not cpu.same_kind(hopper) and hopper.same_kind(MachineKind.of("linux-64", ["__cuda=12.8", "__cuda_arch=9.0"]))
    assert not hopper.same_kind(MachineKind.of("linux-64", ["__cuda=12.4", "__cuda_arch=8.0"]))


def _proof(platform: str, digest: str) -> Proof:
    machine = MachineKind.of(platform, ["__osx=14.5"] if platform.startswith("osx") else ["__glibc=2.36"])
    return replace(Proof(platform, digest, "pass", "2026-12-07T10:00:00+00:00", "0.1.0", machine, "node1"), checks=(("runtimes", "pass"),))
