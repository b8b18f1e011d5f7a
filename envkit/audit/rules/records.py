"""Rules on the env's records: conda-meta unreadable, drift since envkit installed it, envkit's record, conda's history, the probe's verdict."""

from __future__ import annotations

import stat
from typing import TYPE_CHECKING

from envkit.audit.inventory import Inventory
from envkit.prefix.record import RECORD_REL

if TYPE_CHECKING:
    pass

from envkit.audit.catalog import rule


@rule(
    "EK022",
    "unreadable-package-records",
    "error",
    "package records in conda-meta that cannot be read",
    rationale="Every conda-meta/*.json is a package record. One that is empty, binary, not JSON, nested beyond reason or missing "
    "its name, version or build makes conda stop with CorruptedEnvironmentError (or ignore the package), and hides "
    "the package from every audit rule: the env is not what its records say.",
    fix="Reinstall the package the file names (conda install --force-reinstall NAME), or delete the file and recreate the "
    "env; conda doctor's consistency check reads the same files.",
    sources=("https://github.com/conda/conda/blob/main/conda/core/prefix_data.py",),
)
def unreadable_records(inv: Inventory) -> list[str]:
    # a record this user may not read may well be sound: EK030 says why and who can fix it
    return [f"{bad.path}: {bad.reason}" for bad in inv.unreadable if not bad.denied]


@rule(
    "EK024",
    "drift-from-recipe",
    "warning",
    "the env's packages differ from what envkit installed",
    rationale="Something changed the env after envkit made it from its recipe: conda install or remove, pip install, an update. "
    "The env is no longer what its recipe (and its lock, and its last probe) describe, and the team's other machines "
    "do not have the change.",
    fix="envkit sync brings it back to its recipe (or put the change into the recipe first, then envkit sync; a newer version the recipe"
    " already allows, conda's or a pip wheel's, comes with envkit sync --update NAME).",
    sources=("https://pixi.sh/latest/workspace/lock_file/",),
)
def env_drift(inv: Inventory) -> list[str]:
    # only envs whose packages envkit installed (create, sync) have a package list to drift from;
    # `audit --fix` on an env conda made writes a record of activation settings alone. Records this
    # user may not read hide packages that are there: no drift can be told then (EK030 says so).
    if inv.record is None or inv.record.packages is None or any(bad.denied for bad in inv.unreadable):
        return []
    from envkit.audit.drift import drift  # the sync module is not loaded for plans (lock, create)

    return drift(inv.record, inv.packages, inv.pip)


@rule(
    "EK021",
    "record-breaks-conda",
    "error",
    "envkit record at conda-meta/envkit.json",
    rationale="envkit 0.1 kept its record at conda-meta/envkit.json. conda, mamba and micromamba read every conda-meta/*.json as a "
    "package record named NAME-VERSION-BUILD.json, so conda list, list --explicit, env export, install, remove, remove --all, "
    "rename and create --clone fail on the env with 'not enough values to unpack', and conda doctor's consistency check errors.",
    fix="envkit audit --fix moves it to etc/envkit/record.json, where conda does not read it and conda rename carries it along.",
    sources=("https://github.com/conda/conda/blob/main/conda/core/prefix_data.py",),
    safe_fix="move-record",
)
def legacy_record(inv: Inventory) -> list[str]:
    if inv.legacy_record:
        return ["conda-meta/envkit.json: conda reads every conda-meta/*.json as a package record, so conda list/install/remove fail here"]
    return []


@rule(
    "EK030",
    "private-package-records",
    "warning",
    "package records (or envkit's record) only their owner can read, in an env others can reach",
    rationale="rattler's installer (pixi's, and envkit's before it set them right) writes every conda-meta/*.json with mode 0600, "
    "where conda creates them under the umask (0644 as a rule); envkit itself wrote etc/envkit/record.json 0600 until "
    "it did the same. In an env the team shares (/opt/envs on a GPU node, a project directory), nobody but its creator "
    "can read those files, so what reads them fails for everyone else: conda list and conda install on package records, "
    "envkit's own audit (which would report them as unreadable under EK022), and, on envkit's record, the envkit "
    "commands that need it (sync, export, activation show).",
    fix="envkit audit --fix, run by the env's owner (or root), adds the read bits the env's directories already give "
    "(chmod g+r,o+r on the files named); nothing else changes. A sync by the owner opens envkit's record as well.",
    sources=("https://github.com/prefix-dev/pixi/issues/4284",),
    safe_fix="open-records",
)
def shared_env_private_records(inv: Inventory) -> list[str]:
    if not inv.private_records:
        return []
    who = " and ".join(
        w for bit, w in ((stat.S_IRGRP, "its group"), (stat.S_IROTH, "other users")) if any(lack & bit for _, lack in inv.private_records)
    )
    names = [rel for rel, _ in inv.private_records if rel.startswith("conda-meta/")]
    out = []
    if names:
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        out.append(f"{len(names)} package record(s) that only their owner can read, in an env {who} can reach: {shown}")
    if len(names) < len(inv.private_records):
        out.append(f"{RECORD_REL}, envkit's record of the env, only its owner can read, in an env {who} can reach")
    return out


@rule(
    "EK041",
    "stale-conda-request",
    "warning",
    "conda keeps a request the recipe does not make",
    rationale="conda works out an env's requested specs from conda-meta/history and holds every later `conda install` or "
    "`conda update` to them. A request made with conda (`conda install mkl=2024.1.0`) that the recipe does not make "
    "stays there after the env is put back to its recipe, and the next unrelated `conda install tqdm` moves mkl back "
    "to 2024.1.0: the toolchain the recipe pins (and the probe proved) is gone without a word. envkit sync records the "
    "recipe's specs as the env's requests and ends the others.",
    fix="Run envkit sync: it puts the packages back and writes the recipe's specs as the env's requests (it names the "
    "requests it ends). To keep the request, put the spec in the recipe instead.",
    sources=("https://docs.conda.io/projects/conda/en/latest/commands/env/export.html",),
)
def stale_requests(inv: Inventory) -> list[str]:
    """conda's requests (conda-meta/history) that are not the recipe's specs: conda honours them
    at every later install or update, and can move the env away from its recipe with them."""
    from envkit.prefix.history import stale_requests as stale

    if inv.planned or inv.record is None:
        return []
    return [
        f"conda-meta/history requests {asked}" + (f" where the recipe asks {ours}" if ours else ", which the recipe does not ask for")
        for asked, ours in stale(inv.prefix, inv.record)
    ]


@rule(
    "EK042",
    "not-a-conda-env",
    "error",
    "a prefix conda does not take for an env",
    rationale="conda marks an env by its conda-meta/history file: without it `conda list`, `conda install` and `conda activate` "
    "answer that the prefix is not a conda environment, and `conda env list` leaves it out. A conda-meta folder with "
    "no package record in it describes nothing: what the prefix holds was not installed by conda or envkit.",
    fix="Recreate the env (envkit create --force from its recipe, or conda create); envkit sync refuses such a prefix.",
    sources=("https://github.com/conda/conda/blob/main/conda/base/constants.py",),
)
def not_a_conda_env(inv: Inventory) -> list[str]:
    from envkit.prefix.history import not_an_env

    if inv.planned:
        return []
    why = not_an_env(inv.prefix)
    return [why] if why else []


def _probe_verdict(inv: Inventory, state: str) -> list[str]:
    from envkit.prefix.health import health_of

    if inv.planned:
        return []
    health = health_of(inv.record)
    if health.state != state:
        return []
    return [f"the last probe ({health.line()}) said {state}: envkit probe -p {inv.prefix} shows each check"]


@rule(
    "EK043",
    "probe-warned",
    "warning",
    "the env's last probe warned",
    rationale="The probe runs the env's own python: it imports the toolchain, lists the BLAS and OpenMP libraries the process "
    "really maps, runs a numeric check and a DDP-style launch. A warning there (two BLAS libraries loaded, more than "
    "one OpenMP runtime, threads that oversubscribe the CPUs) is something the static rules may not see from the "
    "files alone; every health verdict (list, toolchain, audit, conda doctor) shows it until a probe passes.",
    fix="Run envkit probe for each check's evidence and remedy; fix the cause (usually a recipe change and envkit sync), "
    "and the next probe records the new verdict.",
    sources=("https://github.com/joblib/threadpoolctl/blob/master/multiple_openmp.md",),
)
def probe_warned(inv: Inventory) -> list[str]:
    return _probe_verdict(inv, "warn")


@rule(
    "EK044",
    "probe-failed",
    "error",
    "the env's last probe failed",
    rationale="A failed probe check means the env does what envkit exists to prevent: a crash in the DDP launch, an import that "
    "fails, wrong numbers, a setting missing at run time. The failure stays in the env's record until a probe passes.",
    fix="Run envkit probe for each check's evidence and remedy; fix the cause, then probe again.",
    sources=("https://github.com/pytorch/pytorch/issues/37377",),
)
def probe_failed(inv: Inventory) -> list[str]:
    return _probe_verdict(inv, "unhealthy")
