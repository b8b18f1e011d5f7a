"""What the conda plugin's hooks do (envkit.conda.plugin only wires them into conda): plain
functions over a prefix and conda's package records, loaded only when a hook runs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit.audit.engine import Finding, findings_for
from envkit.audit.inventory import Inventory, read_inventory
from envkit.prefix.installed import CondaPackage

if TYPE_CHECKING:
    from envkit.audit.fix import FixPlan

SHOWN = ("error", "warning")


def _line(f: Finding) -> str:
    return f"{f.rule_id} {f.severity}: {f.title}: {f.evidence} (fix: {f.fix})"


def doctor_report(prefix: str) -> list[str]:
    """The audit's static rules on the env, errors and warnings, one line each."""
    findings = findings_for(read_inventory(Path(prefix)))
    return [_line(f) for f in sorted(findings, key=lambda f: (f.severity != "error", f.rule_id)) if f.severity in SHOWN]


def doctor_fix_plan(prefix: str) -> FixPlan | None:
    from envkit.audit.fix import plan_fix

    findings = [f for f in findings_for(read_inventory(Path(prefix))) if f.fixable]
    plan = plan_fix(Path(prefix), findings)
    return plan if plan.changes else None


def _as_package(rec: Any) -> CondaPackage:
    channel = getattr(rec, "channel", None)
    name = str(getattr(channel, "canonical_name", None) or getattr(channel, "name", None) or channel or "")
    return CondaPackage(str(rec.name), str(rec.version), str(rec.build), name, tuple(str(d) for d in getattr(rec, "depends", ()) or ()))


def after_transaction(inv: Inventory, unlink: tuple[Any, ...], link: tuple[Any, ...]) -> Inventory:
    """The env as conda's transaction would leave it: its packages changed, libraries of the
    packages it removes gone, everything else (activation, pip, envkit's record) as it is."""
    packages = dict(inv.packages)
    for rec in unlink:
        packages.pop(str(rec.name), None)
    for rec in link:
        pkg = _as_package(rec)
        packages[pkg.name] = pkg
    gone = {str(rec.name) for rec in unlink} - {str(rec.name) for rec in link}
    libs = tuple(lib for lib in inv.libs if lib.owner.removeprefix("conda:") not in gone)
    return replace(inv, packages=packages, libs=libs)


def judge_transaction(prefix: str, unlink: tuple[Any, ...], link: tuple[Any, ...]) -> list[str]:
    """Error findings the transaction would introduce (ones the env already has are not news)."""
    path = Path(prefix)
    if not (path / "conda-meta").is_dir():
        before_inv = Inventory(path, {}, {}, (), {}, (), False, None, None, None)
    else:
        before_inv = read_inventory(path, kernels=())  # Jupyter's kernels: a warning's business, not the guard's
    before = {(f.rule_id, f.evidence) for f in findings_for(before_inv) if f.severity == "error"}
    after = [f for f in findings_for(after_transaction(before_inv, unlink, link)) if f.severity == "error"]
    return [_line(f) for f in after if (f.rule_id, f.evidence) not in before]


def stale_request_moves(prefix: str, unlink: tuple[Any, ...], link: tuple[Any, ...]) -> list[str]:
    """The packages a conda transaction moves away from what envkit installed, where a request in
    conda-meta/history that the recipe does not make is what holds them there (EK041)."""
    from envkit.prefix.history import spec_name, stale_requests
    from envkit.prefix.record import read_record

    path = Path(prefix)
    try:
        record = read_record(path)
    except Exception:  # a record the user may not read: the audit says so
        return []
    if record is None:
        return []
    stale = {spec_name(asked): asked for asked, _ in stale_requests(path, record)}
    installed = {p.name: p.version for p in record.packages or ()}
    recipe_name = record.recipe.name if record.recipe else None
    out = []
    for rec in link:
        name, version = str(rec.name), str(rec.version)
        if name in stale and name in installed and installed[name] != version:
            out.append(
                f"EK041 warning: {name} {installed[name]} -> {version}, held by conda's request {stale[name]} "
                f"(conda-meta/history), which recipe '{recipe_name}' does not make "
                f"(fix: envkit sync -p {prefix} puts the recipe's packages and requests back)"
            )
    return out


def export_variables(prefix: Path) -> tuple[dict[str, str], list[str]]:
    """What `conda env export` / `conda export` should write under `variables:` for an env envkit
    made: its `set` settings (they win over conda's own env vars at activation, so also here), and
    the names of the settings a plain variable cannot carry (prepend, append, unset)."""
    from envkit.activation.writer import recorded_activation
    from envkit.prefix.record import read_record

    try:
        record = read_record(prefix)
        ops = recorded_activation(prefix, record).ops if record is not None else ()
    except Exception:  # an unreadable record: conda's export goes on without envkit's settings
        return {}, []
    plain = {op.name: op.value for op in ops if op.action == "set" and op.value is not None}
    return plain, [op.name for op in ops if op.name not in plain]


def settings_into_conda_export() -> None:
    """Let conda's own export (environment.yml) carry envkit's settings: conda builds its
    `variables:` from PrefixData.get_environment_env_vars (conda-meta/state) alone, so for this
    export command that method also returns envkit's `set` settings. Nothing is written to the env:
    conda-meta/state stays conda's (its activation restores a variable that was unset before as an
    empty one, which envkit's own scripts do not). An environment.yml made this way gives a teammate's
    `conda env create -f` env the settings through conda's env vars."""
    import sys

    from conda.core.prefix_data import PrefixData

    original = PrefixData.get_environment_env_vars
    if getattr(original, "_envkit", False):
        return

    def with_envkit_settings(self: Any) -> dict[str, str]:
        found = dict(original(self))
        plain, left_out = export_variables(Path(self.prefix_path))
        if left_out:
            print(
                f"envkit: conda's variables hold plain values: {', '.join(left_out)} (prepend, append or unset) "
                f"left out of this export; `envkit export -p {self.prefix_path} --format environment-yml` keeps them",
                file=sys.stderr,
            )
        return {**found, **plain}

    with_envkit_settings._envkit = True  # type: ignore[attr-defined]
    PrefixData.get_environment_env_vars = with_envkit_settings


# radon cc 24: conda's Environment model has optional parts (packages, prefix, variables); each absent one is a branch
def recipe_for_environment(environment: Any) -> str:
    """`conda env export --format envkit-recipe`: conda's Environment model to recipe text."""
    from envkit.recipe.fromenv import EnvPackage, recipe_text

    packages = [EnvPackage(p.name, str(p.version), str(p.build), _channel_text(p)) for p in environment.explicit_packages]
    if not packages and environment.prefix:
        from envkit.prefix.installed import read_conda_meta

        found, _ = read_conda_meta(Path(environment.prefix))
        packages = [EnvPackage(p.name, p.version, p.build, p.channel) for p in found.values()]
    channels = [str(c) for c in (environment.config.channels or ())]
    if not channels:
        channels = list(dict.fromkeys(p.channel for p in packages if p.channel))
    # what the user asked for (conda-meta/history), else what conda hands over (every package)
    requested = _history_requests(environment.prefix) if environment.prefix else []
    requested = requested or [str(spec.name) for spec in environment.requested_packages]
    name = str(environment.name or environment.prefix or "")
    pip: list[str] = []
    left_out: list[str] = []
    if environment.prefix:
        from envkit.prefix.installed import pip_dists

        for dist in sorted(pip_dists(Path(environment.prefix)).values(), key=lambda d: d.name):
            if dist.managed:
                pip.append(f"{dist.name}=={dist.version}")
            elif dist.editable_from is not None:
                left_out.append(
                    f"{dist.name} {dist.version}, an editable install of {dist.editable_from}: pip install -e it in the new env"
                )
    return recipe_text(
        Path(name).name if "/" in name else name or None,
        channels,
        packages,
        requested,
        dict(environment.variables or {}),
        source=str(environment.prefix or environment.name or "a conda env"),
        pip=pip,
        left_out=left_out,
    )


def _history_requests(prefix: str) -> list[str]:
    """What the user asked conda for (conda-meta/history), so the recipe lists those and not every
    dependency; empty when there is no history to read."""
    try:
        from conda.history import History

        return sorted(History(prefix).get_requested_specs_map())
    except Exception:
        return []


def _channel_text(rec: Any) -> str:
    """conda-forge for a named channel, the URL for a local or custom one."""
    channel = getattr(rec, "channel", None)
    if channel is None:
        return ""
    name = getattr(channel, "canonical_name", None)
    if name and "://" not in str(name) and str(name) != "<unknown>":
        return str(name)
    base = getattr(channel, "base_url", None)
    return str(base or name or channel)
