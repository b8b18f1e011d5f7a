"""The toolchain map: for the BLAS/LAPACK, the OpenMP runtimes and the torch build of an env (or of
a plan), which package or wheel provides each library file, which requested packages brought it
(the dependency path), what the activation sets, and the audit's conflicts. It answers the seed
users' `conda list | grep mkl`: why is MKL here, and who brought the second OpenMP runtime."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from envkit.audit.engine import Finding, findings_for
from envkit.audit.inventory import Inventory, read_inventory
from envkit.audit.rules import RULES_BY_ID
from envkit.prefix.health import Health, health_of
from envkit.prefix.history import requested_names
from envkit.prefix.installed import CondaPackage

Part = Literal["BLAS / LAPACK", "OpenMP runtime", "torch"]
PARTS: tuple[Part, ...] = ("BLAS / LAPACK", "OpenMP runtime", "torch")
ROLE_PART: dict[str, Part] = {"blas": "BLAS / LAPACK", "openmp": "OpenMP runtime", "pytorch": "torch"}
LIB_PART: dict[str, Part] = {"blas": "BLAS / LAPACK", "openmp": "OpenMP runtime"}


@dataclass(frozen=True)
class Provider:
    """The package that provides one part of the numeric toolchain, and the requests that brought it."""

    part: Part
    name: str
    version: str
    build: str
    source: str  # a conda channel's name, or "pip"
    files: tuple[str, ...]  # native libraries it puts in the env ("" for a plan: not installed yet)
    brought_by: tuple[tuple[str, ...], ...]  # dependency paths: a requested package first, this one last


@dataclass(frozen=True)
class ToolchainMap:
    """Who provides BLAS, OpenMP and torch in an env or plan, and where they conflict."""

    prefix: str
    planned: bool  # a plan: no files on disk yet
    requested: tuple[str, ...]
    providers: tuple[Provider, ...]
    activation: tuple[tuple[str, str | None, str], ...]  # name, value (None: unset), where it is set
    conflicts: tuple[Finding, ...]
    probe: Health | None = None  # the last probe's verdict and what it saw loaded (an env on disk)


def _dependency_graph(packages: dict[str, CondaPackage]) -> dict[str, list[str]]:
    return {name: sorted({d.split()[0].lower() for d in pkg.depends if d.split()} & set(packages)) for name, pkg in packages.items()}


def paths_to(target: str, roots: list[str], graph: dict[str, list[str]]) -> tuple[tuple[str, ...], ...]:
    """The shortest dependency path from each requested root that reaches `target`."""
    out = []
    for root in roots:
        if root not in graph:
            continue
        seen: dict[str, tuple[str, ...]] = {root: (root,)}
        queue = deque([root])
        while queue:
            node = queue.popleft()
            if node == target:
                out.append(seen[node])
                break
            for nxt in graph.get(node, []):
                if nxt not in seen:
                    seen[nxt] = (*seen[node], nxt)
                    queue.append(nxt)
    return tuple(sorted(out, key=len))


def _requested(prefix: Path, inv: Inventory) -> list[str]:
    """What the user asked for: envkit's recorded specs, else conda's history, else the packages
    nothing else depends on."""
    names: list[str] = []
    if inv.record is not None:
        names = [s.spec.split()[0] for s in inv.record.specs or () if s.spec.split()]
    if not names:
        names = requested_names(prefix)
    if not names:
        graph = _dependency_graph(inv.packages)
        needed = {d for deps in graph.values() for d in deps}
        names = [n for n in inv.packages if n not in needed]
    return list(dict.fromkeys(n.lower() for n in names))


# radon cc 26: walks every provider of every part once, with the edge cases of pip and vendored runtimes inline
def build_map(inv: Inventory, requested: list[str], *, planned: bool, findings: list[Finding]) -> ToolchainMap:
    from envkit.solve.plan import TOOLCHAIN_ROLES

    graph = _dependency_graph(inv.packages)
    # (part, "conda" | "pip", package) -> its library files of that part: a torch build's vendored
    # libgomp is an OpenMP runtime of the env as much as llvm-openmp's libomp is
    files: dict[tuple[Part, str, str], list[str]] = {}
    for lib in inv.libs:
        kind, _, name = lib.owner.partition(":")
        kind, name = (kind, name) if name else ("conda", "unknown")
        files.setdefault((LIB_PART[lib.kind], kind, name), []).append(lib.path)
    providers: list[Provider] = []
    listed: set[tuple[Part, str, str]] = set()
    for name, pkg in sorted(inv.packages.items()):
        role_part = ROLE_PART.get(TOOLCHAIN_ROLES.get(name) or "")
        lib_parts = [part for (part, kind, owner) in files if kind == "conda" and owner == name]
        parts = list(dict.fromkeys([*([role_part] if role_part else []), *lib_parts]))
        chains = paths_to(name, requested, graph) if parts else ()
        for part in parts:
            listed.add((part, "conda", name))
            providers.append(
                Provider(part, name, pkg.version, pkg.build, pkg.channel_name, tuple(files.get((part, "conda", name), ())), chains)
            )
    for (part, kind, name), paths in sorted(files.items()):
        if (part, kind, name) in listed:
            continue
        dist = inv.pip.get(name) if kind == "pip" else None
        version = dist.version if dist is not None else ""
        providers.append(Provider(part, name, version, "", "pip" if kind == "pip" else "unknown", tuple(paths), ((name,),) if dist else ()))
    torch_wheel = inv.pip.get("torch")
    if torch_wheel is not None and torch_wheel.installer == "pip" and not any(p.name == "torch" and p.part == "torch" for p in providers):
        providers.append(Provider("torch", "torch", torch_wheel.version, "", "pip", (), (("torch",),)))
    activation = tuple((name, var.value, var.source) for name, var in sorted(inv.activation.items()))
    conflicts = tuple(f for f in findings if f.rule_id in RULES_BY_ID and RULES_BY_ID[f.rule_id].toolchain)
    return ToolchainMap(str(inv.prefix), planned, tuple(requested), tuple(providers), activation, conflicts)


def env_toolchain(prefix: Path) -> ToolchainMap:
    inv = read_inventory(prefix, kernels=())  # the map is of the env itself; its Jupyter kernels are the audit's
    built = build_map(inv, _requested(prefix, inv), planned=False, findings=findings_for(inv))
    return replace(built, probe=health_of(inv.record))


def plan_toolchain(inv: Inventory, requested: list[str], findings: list[Finding]) -> ToolchainMap:
    """For a plan (create --dry-run): packages and activation, no files yet."""
    return build_map(inv, requested, planned=True, findings=findings)
