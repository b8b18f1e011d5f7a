"""Views several commands share: findings, a plan, a probe report, a toolchain map, a sync's
changes. Each takes the typed data it shows and writes rich markup to an Out; no logic lives here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from envkit.core.changes import MARKS, change_text
from envkit.ui.console import Out, TextTable, escape

if TYPE_CHECKING:
    from envkit.audit.engine import Finding
    from envkit.audit.toolchain import ToolchainMap
    from envkit.probe.model import ProbeReport
    from envkit.recipe.model import EnvOp
    from envkit.solve.channels import ResolvedChannel
    from envkit.solve.plan import Plan
    from envkit.team.sync import SyncOutcome

STATUS_STYLE = {
    "pass": "green",
    "warn": "yellow",
    "fail": "bold red",
    "skip": "dim",
    "error": "bold red",
    "warning": "yellow",
    "info": "cyan",
}


class WroteKernels(Protocol):
    """A create's or a sync's Jupyter kernels (envkit.prefix.kernels)."""

    @property
    def kernels(self) -> Sequence[str]: ...
    @property
    def kernels_failed(self) -> Sequence[str]: ...


def ops_lines(c: Out, ops: Iterable[EnvOp]) -> None:
    for op in ops:
        if op.action == "set":
            c.print(f"  {op.name}={escape(repr(op.value))}")
        elif op.action == "unset":
            c.print(f"  unset {op.name}")
        else:
            c.print(f"  {op.name}: {op.action} {escape(op.separator.join(op.entries))}")


def findings_view(c: Out, findings: Iterable[Finding], indent: str = "  ") -> None:
    for f in findings:
        forced = " (forced by the recipe)" if f.forced else ""
        c.print(f"{indent}[{STATUS_STYLE[f.severity]}]{f.severity}[/] {f.rule_id} {escape(f.title)}{forced}")
        c.print(f"{indent}  {escape(f.evidence)}")
        said = f.fixable and "envkit audit --fix" not in f.fix  # once: a fix text that names it says it already
        c.print(f"{indent}  fix: {escape(f.fix)}" + ("  [dim](envkit audit --fix)[/dim]" if said else ""))


def channel_text(ch: ResolvedChannel) -> str:
    """How a plan names a channel: `conda-forge (URL, what resolved it)`, or a URL given as the channel just once."""
    if ch.name == ch.url:
        return escape(ch.url)
    return f"{escape(ch.name)} ({escape(ch.url)}, {ch.via})"


def plan_view(c: Out, plan: Plan, findings: Sequence[Finding] = ()) -> None:
    c.print(f"[bold]Plan[/bold] for [bold]{plan.recipe}[/bold] -> {escape(str(plan.prefix))} ({plan.platform})")
    c.print("channels: " + ", ".join(channel_text(ch) for ch in plan.channels))
    c.print("virtual packages: " + (", ".join(plan.virtual_packages) or "none"))
    for line in plan.assumed:
        c.print(f"[yellow]{escape(line)}[/yellow]")
    table = TextTable("name", "version", "build", "channel", "role")
    for p in plan.packages:
        style = "bold cyan" if p.role else None
        table.add_row(p.name, p.version, p.build, p.channel.rstrip("/").rsplit("/", 1)[-1], p.role or "", style=style)
    c.print(table)
    if plan.pip_specs:
        c.print("pip: " + ", ".join(plan.pip_specs))
    startup = any(op.action == "set" for op in plan.activation) and any(p.name == "python" for p in plan.packages)
    also = "; what it sets also for a python started without it: site-packages/_envkit_settings.*" if startup else ""
    c.print("[bold]activation[/bold] (etc/conda/activate.d/envkit-" + plan.recipe + ".*" + also + ")")
    ops_lines(c, plan.activation)
    for w in plan.warnings:
        c.print(f"[yellow]warning[/yellow] {escape(w)}")
    if findings:
        c.print("[bold]audit of the plan[/bold]")
        findings_view(c, findings)


def probe_view(c: Out, report: ProbeReport) -> None:
    table = TextTable("check", "status", "evidence")
    for ch in report.checks:
        evidence = ch.evidence if ch.status != "pass" else ch.evidence.splitlines()[0] if ch.evidence else ""
        table.add_row(ch.id, f"[{STATUS_STYLE[ch.status]}]{ch.status}[/]", escape(evidence[:400]))
    c.print(table)
    for ch in report.checks:
        if ch.status in ("fail", "warn") and ch.remedy:
            c.print(f"[{STATUS_STYLE[ch.status]}]{ch.id}[/]: {escape(ch.remedy)}")
    where = (f" on {report.node}" if report.node else "") + (f" in Slurm job {report.slurm_job}" if report.slurm_job else "")
    c.print(f"probe [{STATUS_STYLE[report.status]}]{report.status}[/] in {report.seconds:.1f}s{escape(where)} ({escape(report.prefix)})")


def kernels_view(c: Out, out: WroteKernels) -> None:
    """The env's Jupyter kernels a create or sync gave its settings (envkit.prefix.kernels)."""
    for path in out.kernels:
        c.print(f"wrote the env's settings into Jupyter kernel {escape(path)}")
    for failed in out.kernels_failed:
        c.print(
            f"[yellow]warning[/yellow] Jupyter kernel left without the env's settings: {escape(failed)} (envkit audit --fix, as its owner)"
        )


# radon cc 30: one branch of the tree per part, provider and conflict kind; split, the tree's shape would be in no one place
def toolchain_view(c: Out, tm: ToolchainMap) -> None:
    """The toolchain map as a tree: part -> provider -> its library files and who brought it."""
    from rich.tree import Tree

    from envkit.audit.toolchain import PARTS

    planned = " [dim](a plan: library files are known once installed)[/dim]" if tm.planned else ""
    tree = Tree(f"[bold]toolchain[/bold] of {escape(tm.prefix)}{planned}")
    for part in PARTS:
        branch = tree.add(f"[bold]{part}[/bold]")
        entries = [p for p in tm.providers if p.part == part]
        if not entries:
            branch.add("[dim]none[/dim]")
        for p in entries:
            build = f" {p.build}" if p.build else ""
            node = branch.add(f"[cyan]{escape(p.name)}[/cyan] {escape(p.version)}{escape(build)} [dim]({escape(p.source)})[/dim]")
            for path in p.files:
                node.add(f"[dim]{escape(path)}[/dim]")
            if any(len(chain) == 1 for chain in p.brought_by):
                node.add("requested")
            chains = [chain for chain in p.brought_by if len(chain) > 1]
            for chain in chains[:3]:  # the shortest; --json has them all
                node.add("brought by " + " → ".join(escape(n) for n in chain))
            if len(chains) > 3:
                node.add(f"[dim]and by {len(chains) - 3} more[/dim]")
            if not p.brought_by and p.source != "pip":
                node.add("[dim]no requested package depends on it[/dim]")
    act = tree.add("[bold]activation[/bold]")
    if not tm.activation:
        act.add("[dim]nothing set[/dim]")
    for name, value, source in tm.activation:
        act.add(f"{escape(name)}={escape(repr(value)) if value is not None else '(unset)'} [dim]({escape(source)})[/dim]")
    conflicts = tree.add("[bold]conflicts[/bold]")
    if not tm.conflicts and (tm.probe is None or tm.probe.state in ("healthy", "not probed")):
        conflicts.add("[green]none[/green]")
    if tm.probe is not None and tm.probe.state in ("warn", "unhealthy"):
        style = STATUS_STYLE["warn" if tm.probe.state == "warn" else "fail"]
        conflicts.add(f"[{style}]probe {tm.probe.state}[/]: {escape(tm.probe.line())}")
    for f in tm.conflicts:
        conflicts.add(f"[{STATUS_STYLE.get(f.severity, '')}]{f.rule_id} {f.severity}[/] {escape(f.title)}: {escape(f.evidence)}")
    if tm.probe is not None:
        seen = tree.add(f"[bold]probe[/bold] {escape(tm.probe.line())}")
        for lib in tm.probe.loaded:
            seen.add(f"loaded {escape(lib.kind)} {escape(lib.api)}: {escape(lib.path)}")
    c.print(tree, soft_wrap=False)  # a tree's long lines wrap under their branch; soft wrapping would crop them


def sync_changes_view(c: Out, out: SyncOutcome) -> None:
    """The difference a sync applies (or would)."""
    if out.noop:
        return
    c.print(f"[bold]sync[/bold] {escape(out.prefix)} to its {out.source}:")
    if out.lock_set_aside:
        c.print(
            f"  [yellow]made from the lock {escape(out.lock_set_aside)}: this syncs it to the recipe instead; --locked installs the lock[/yellow]"
        )
    for ch in out.packages:
        colour = {"added": "green", "removed": "red", "changed": "yellow"}[ch.kind]
        c.print(f"  [{colour}]{MARKS[ch.kind]}[/{colour}] {ch.name} {escape(change_text(ch.kind, ch.old, ch.new))}")
    for v in out.variables:
        c.print(f"  [cyan]variable[/cyan] {v.name}: {escape(v.old or '(not set by envkit)')} -> {escape(v.new or '(not set by envkit)')}")
    for line in out.pip:
        c.print(f"  [cyan]pip[/cyan] {escape(line)}")
    if not (out.packages or out.variables or out.pip):
        c.print("  nothing differs")
    for w in out.warnings:
        c.print(f"[yellow]warning[/yellow] {escape(w)}")
    findings_view(c, [f for f in out.findings if f.severity != "info"])
