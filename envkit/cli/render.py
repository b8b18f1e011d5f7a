"""Rendering only: results as rich markup, which rich draws (envkit.cli.console). No logic lives here."""

from __future__ import annotations

import shlex
from typing import Any

from envkit.cli.console import Out, TextTable, data_stream, escape, visible
from envkit.commands import Result
from envkit.core.changes import MARKS, change_text
from envkit.core.fsutil import STDOUT
from envkit.prefix.record import FIX_SOURCE

STATUS_STYLE = {
    "pass": "green",
    "warn": "yellow",
    "fail": "bold red",
    "skip": "dim",
    "error": "bold red",
    "warning": "yellow",
    "info": "cyan",
}


# ------------------------------------------------------------------ human renderers


def _recipes_list(c: Out, rows: list[Any]) -> None:
    table = TextTable("recipe", "source", "commit", "description")
    for r in rows:
        name = escape(r.name) if not r.shadowed_by else f"[dim]{escape(r.name)} (shadowed by {escape(r.shadowed_by)})[/dim]"
        table.add_row(name, escape(f"{r.source} ({r.kind})"), escape((r.commit or "")[:10]), escape(r.description))
    c.print(table)


def _spec_line(spec: Any) -> str:
    where = f"  [dim]# {escape(str(spec.origin))}[/dim]" if spec.origin else f"  [dim]# {escape(spec.reason)}[/dim]"
    return f"  {escape(spec.spec)}{where}"


def _ops_lines(c: Out, ops: Any) -> None:
    for op in ops:
        if op.action == "set":
            c.print(f"  {op.name}={escape(repr(op.value))}")
        elif op.action == "unset":
            c.print(f"  unset {op.name}")
        else:
            c.print(f"  {op.name}: {op.action} {escape(op.separator.join(op.entries))}")


def _recipes_show(c: Out, shown: Any) -> None:
    r = shown.recipe
    c.print(f"[bold]{r.name}[/bold]  {escape(r.description)}")
    c.print(f"source: {r.origin.source} {escape(r.origin.path)}" + (f" @ {r.origin.commit[:10]}" if r.origin.commit else ""))
    if r.extends:
        c.print("extends: " + escape(", ".join(r.extends)))
    c.print(
        "channels: "
        + escape(", ".join(r.channels))
        + f"   platforms: {escape(', '.join(r.platforms)) or 'this machine'}   python: {escape(r.python or '-')}"
    )
    tc = r.toolchain
    torch = tc.pytorch
    c.print(
        f"toolchain: blas={tc.blas or '-'} mkl={tc.mkl or '-'} openmp={tc.openmp or '-'} pytorch="
        + (f"{torch.source}/{torch.variant}{'/' + torch.cuda if torch.cuda else ''} {torch.version or ''}" if torch else "-")
        + (f" cuda_arch={torch.cuda_arch}" if torch and torch.cuda_arch else "")
    )
    if shown.compiled is not None:
        c.print("[bold]conda specs[/bold]")
        for spec in shown.compiled.conda_specs:
            c.print(_spec_line(spec))
        if shown.compiled.pip_specs:
            c.print("[bold]pip[/bold]")
            for p in shown.compiled.pip_specs:
                c.print(f"  {escape(p)}")
        c.print("[bold]activation settings[/bold]")
        for s in shown.compiled.activation.settings:
            value = "<physical cores, resolved when written>" if s.computed else s.op.value
            c.print(f"  {s.op.name} {s.op.action} {escape(str(value or ':'.join(s.op.entries)))}  [dim]# {escape(s.reason)}[/dim]")
    else:
        c.print("packages: " + (escape(", ".join(p.text for p in r.packages)) or "-"))
    for f in shown.findings:
        c.print(f"[{STATUS_STYLE[f.severity]}]{f.severity}[/] {f.rule.id} {escape(f.message)}" + (" (forced)" if f.forced else ""))


def _validate(c: Out, rows: list[Any]) -> None:
    for v in rows:
        if v.ok:
            c.print(f"[green]ok[/green] {escape(v.path)}")
            for w in v.warnings:
                c.print(f"  [yellow]warning[/yellow] {escape(w)}")
        else:
            for p in v.problems:
                c.print(f"[red]error[/red] {escape(p)}")


def _findings(c: Out, findings: Any, indent: str = "  ") -> None:
    for f in findings:
        forced = " (forced by the recipe)" if getattr(f, "forced", False) else ""
        c.print(f"{indent}[{STATUS_STYLE[f.severity]}]{f.severity}[/] {f.rule_id} {escape(f.title)}{forced}")
        c.print(f"{indent}  {escape(f.evidence)}")
        said = f.fixable and "envkit audit --fix" not in f.fix  # once: a fix text that names it says it already
        c.print(f"{indent}  fix: {escape(f.fix)}" + ("  [dim](envkit audit --fix)[/dim]" if said else ""))


def _plan(c: Out, plan: Any, findings: Any = ()) -> None:
    c.print(f"[bold]Plan[/bold] for [bold]{plan.recipe}[/bold] -> {escape(str(plan.prefix))} ({plan.platform})")
    c.print("channels: " + ", ".join(_channel(ch) for ch in plan.channels))
    c.print("virtual packages: " + (", ".join(plan.virtual_packages) or "none"))
    for line in getattr(plan, "assumed", ()):
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
    _ops_lines(c, plan.activation)
    for w in plan.warnings:
        c.print(f"[yellow]warning[/yellow] {escape(w)}")
    if findings:
        c.print("[bold]audit of the plan[/bold]")
        _findings(c, findings)


def _probe(c: Out, report: Any) -> None:
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


def _create(c: Out, out: Any) -> None:
    if out.refused:
        _plan(c, out.plan, out.findings)
        return
    if out.dry_run:
        _plan(c, out.plan, out.findings)
        if out.toolchain is not None:
            _toolchain(c, out.toolchain)
        c.print("[dim]dry run: nothing was written[/dim]")
        return
    if out.aborted:
        return
    if out.created is not None:
        c.print(
            f"[green]created[/green] {escape(str(out.created.prefix))}"
            + (" (replaced the previous env)" if out.created.replaced_existing else "")
        )
        pasted = escape(shlex.quote(str(out.created.prefix)))  # a command to paste: `$` or `'` in the path stay the path's
        if out.conda_here:
            c.print(f"activate with: conda activate {pasted}   or run: envkit run -p {pasted} -- CMD")
        else:  # no conda here: envkit's own activation
            c.print(
                f'activate with: envkit shell -p {pasted} (or eval "$(envkit shell-hook -p {pasted})")   or run: envkit run -p {pasted} -- CMD'
            )
        _kernels(c, out.created)
    if out.probe is not None:
        _probe(c, out.probe)


def _channel(ch: Any) -> str:
    """How a plan names a channel: `conda-forge (URL, what resolved it)`, or a URL given as the channel just once."""
    if ch.name == ch.url:
        return escape(ch.url)
    return f"{escape(ch.name)} ({escape(ch.url)}, {ch.via})"


def _toolchain(c: Out, tm: Any) -> None:
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


def _audit(c: Out, out: Any) -> None:
    if not out.audits:
        c.print("no envs found; looked at " + ", ".join(escape(p) for p in out.searched))
        return
    if len(out.audits) > 1:
        table = TextTable("env", "packages", "envkit", "errors", "warnings", "info")
        for a in out.audits:
            counts = {s: sum(1 for f in a.findings if f.severity == s) for s in ("error", "warning", "info")}
            table.add_row(
                escape(str(a.prefix)),
                str(a.packages),
                "yes" if a.envkit_managed else "",
                str(counts["error"]),
                str(counts["warning"]),
                str(counts["info"]),
            )
        c.print(table)
    for a in out.audits:
        if a.error:
            c.print(f"[red]error[/red] {escape(str(a.prefix))}: {escape(a.error)}")
            continue
        if len(out.audits) == 1 or a.findings:
            clean = "[green]clean[/green]" if not out.hidden else f"nothing at or above {out.min_severity}"
            c.print(f"[bold]{escape(str(a.prefix))}[/bold]: " + (f"{len(a.findings)} finding(s)" if a.findings else clean))
        _findings(c, a.findings)
    if out.hidden:
        c.print(f"{out.hidden} finding(s) below {out.min_severity} not shown (--min-severity info shows them)")
    for plan in out.fixes:
        c.print(f"[bold]fix[/bold] {escape(str(plan.prefix))}: " + escape("; ".join(plan.reasons)))
        c.file.write(plan.diff)
    for path in out.applied:
        c.print(f"  wrote {escape(path)}")


def _explain(c: Out, rule: Any) -> None:
    c.print(f"[bold]{rule.id}[/bold] ({rule.slug}) [{STATUS_STYLE[rule.severity]}]{rule.severity}[/]: {escape(rule.title)}")
    c.print(f"\n[bold]Why[/bold]\n{escape(rule.rationale)}")
    c.print(f"\n[bold]Fix[/bold]\n{escape(rule.fix)}" + ("\n(safe fix: envkit audit --fix applies it)" if rule.safe_fix else ""))
    c.print("\n[bold]Sources[/bold]\n" + "\n".join(rule.sources))
    c.print(f"\n[bold]Docs[/bold]\n{rule_doc_link(rule.id)}")


RULES_PAGE = "docs/reference/rules.md"


def rule_doc_link(rule_id: str) -> str:
    """Where a rule is documented: its own anchor on the generated rules page."""
    return f"{RULES_PAGE}#{rule_id.lower()}"


def _rules_list(c: Out, rules: Any) -> None:
    for rule in rules:
        c.print(escape(f"{rule.id}  {rule.severity:7}  {rule.slug:28} {rule.title}"))


def _activation_show(c: Out, view: Any) -> None:
    c.print(f"# {view.prefix} ({view.recipe}), shell {view.shell}")
    _ops_lines(c, view.ops)
    # a view: a control character a value holds is shown, not sent (the scripts themselves hold it)
    c.file.write(visible("# --- activate ---\n" + view.activate + "# --- deactivate ---\n" + view.deactivate))


def _sources_add(c: Out, entry: Any) -> None:
    c.print(f"added source [bold]{entry.name}[/bold] {escape(entry.url)} ({entry.ref} @ {entry.commit[:10]})")
    c.print(f"  {len(entry.recipes)} recipe{'s' if len(entry.recipes) != 1 else ''}: {escape(', '.join(entry.recipes))}")


def _sources_remove(c: Out, removed: Any) -> None:
    c.print(f"removed source [bold]{removed.name}[/bold] {escape(removed.url)} (was at {removed.commit[:10]})")
    for prefix in removed.orphaned:
        c.print(f"  {escape(prefix)} was made from its recipes: sync has no recipe for it now; remake it with envkit create --force")


def _sources_update(c: Out, updates: Any) -> None:
    if not updates:
        c.print("no recipe sources to update; add one with 'envkit recipes add-source URL'")
    for u in updates:
        verb = "moved" if u.applied else ("would move" if u.old_commit != u.new_commit else "unchanged")
        c.print(f"[bold]{u.name}[/bold]: {verb} {u.old_commit[:10]} -> {u.new_commit[:10]}")
        for ch in u.changes:
            c.print(f"  {ch.change:8} {ch.name}")
        for prefix in u.orphaned:
            c.print(
                f"  {escape(prefix)} was made from a recipe this removes: sync has no recipe for it then; remake it with envkit create --force"
            )


def _lock(c: Out, out: Any) -> None:
    verb = "not written (the audit refused a platform's plan)" if out.refused else "would write" if out.dry_run else "wrote"
    where = "the lock to stdout" if out.path == STDOUT else f"[bold]{escape(out.path)}[/bold]"
    c.print(f"{verb} {where} for recipe {out.recipe} (digest {out.recipe_digest[:12]})")
    if out.previous and out.kept:
        but = f", but for {', '.join(out.updated)}" if out.updated else ""
        c.print(f"  kept the pins of the lock it replaces where the recipe allows{but} (--update NAME moves one, --update-all every one)")
    elif out.previous:
        c.print("  solved afresh (--update-all)")
    for p in out.platforms:
        pip = f", {p.pip} pip" if p.pip else ""
        c.print(f"  {p.platform}: {p.packages} packages{pip}; virtual packages {escape(', '.join(p.virtual_packages) or '-')}")
        for line in p.assumed:
            c.print(f"    [yellow]{escape(line)}[/yellow]")
        if out.previous:
            changes = ("new in this lock",) if p.changes is None else p.changes or ("unchanged",)
            for line in changes:
                c.print(f"    {escape(line)}")
        _findings(c, [f for f in p.findings if f.severity != "info"], indent="    ")
    for platform in out.dropped:
        c.print(f"  [yellow]{platform}: dropped: the lock it replaces had it, --platform did not ask for it[/yellow]")


def render_sync(c: Out, out: Any) -> None:
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
    _findings(c, [f for f in out.findings if f.severity != "info"])


def _sync(c: Out, out: Any) -> None:
    if out.dry_run or out.refused:  # an applied sync was shown before it started
        render_sync(c, out)
    if out.applied:
        c.print(f"[green]synced[/green] {escape(out.prefix)}")
    _kernels(c, out)
    if out.probe is not None:
        _probe(c, out.probe)


def _kernels(c: Out, out: Any) -> None:
    """The env's Jupyter kernels a create or sync gave its settings (envkit.prefix.kernels)."""
    for path in out.kernels:
        c.print(f"wrote the env's settings into Jupyter kernel {escape(path)}")
    for failed in out.kernels_failed:
        c.print(
            f"[yellow]warning[/yellow] Jupyter kernel left without the env's settings: {escape(failed)} (envkit audit --fix, as its owner)"
        )


def _export(c: Out, out: Any) -> None:
    if out.text is not None:
        data_stream(c).write(out.text)
    else:
        where = "stdout" if out.path == STDOUT else escape(out.path)
        c.print(f"wrote {where} ({out.format} for {', '.join(out.platforms)}) from {escape(out.prefix)}")


def _recipe_cell(r: Any) -> str:
    if not r.envkit:
        return "(not envkit)"
    if r.recipe is None and r.source == FIX_SOURCE:
        return "(audit --fix)"  # activation settings envkit added to an env it did not make
    files = {"changed": " (changed since)", "missing": " (its file is gone)"}
    locks = {"changed": " (its lock changed since)", "missing": " (its lock is gone)"}
    said = files.get(r.recipe_files) or locks.get(r.lock_file) or (" (from a stale lock)" if r.stale_lock else "")
    return escape((r.recipe or "") + said)


def _list(c: Out, rows: Any) -> None:
    if not rows:
        c.print("no envs found")
        return
    table = TextTable("env", "recipe", "commit", "created", "health", "drift")
    for r in rows:
        drift = f"{len(r.drift)} change(s)" if r.drift else ("" if r.envkit else "-")
        table.add_row(
            escape(r.prefix),
            _recipe_cell(r),
            (r.commit or "")[:10],
            (r.created or "")[:10],
            r.health or r.error or "",
            drift,
        )
    c.print(table)
    for r in rows:
        if r.health in ("warn", "unhealthy") and r.health_basis:
            c.print(f"  {escape(r.name)}: {escape(r.health_basis)} (envkit probe -n {escape(r.name)} shows each check)")
    for r in rows:
        for line in r.drift:
            c.print(f"  {escape(r.name)}: {escape(line)}")
    if any(r.recipe_files == "changed" for r in rows):
        c.print("an edited recipe (or a `recipes update` of its source): `envkit sync --dry-run -n NAME` shows what it changes")
    if any(r.lock_file == "changed" and r.recipe_files != "changed" for r in rows):
        c.print("a lock changed since the env was installed from it (a re-lock, or a `recipes update`): `envkit sync --locked -n NAME`")
    for r in rows:
        if r.frozen is not None:
            why = f": {escape(r.frozen)}" if r.frozen else ""
            c.print(f"{escape(r.name)} is frozen (conda-meta/frozen){why}; sync, remove and audit --fix leave it alone (--override-frozen)")
    for r in rows:
        if r.stale_lock and r.recipe_files != "changed":
            c.print(
                f"{escape(r.name)} holds {escape(r.stale_lock)} as it was (--frozen), older than its recipe: "
                f"lock its recipe again (`envkit lock`), then `envkit sync -n {escape(r.name)} --locked`"
            )


def _check(c: Out, rows: Any) -> None:
    for r in rows:
        if r.problems:
            for p in r.problems:
                c.print(f"[red]problem[/red] {escape(p)}")
        elif r.lock is None:
            c.print(
                f"[green]ok[/green] {escape(r.path)} (no lock of its own: extended by {escape(', '.join(r.extended_by))}, whose locks hold it)"
            )
        else:
            c.print(f"[green]ok[/green] {escape(r.path)} (lock {escape(str(r.lock))}, {', '.join(r.platforms)})")


RENDERERS = {
    "recipes list": _recipes_list,
    "recipes show": _recipes_show,
    "recipes validate": _validate,
    "recipes add-source": _sources_add,
    "recipes remove-source": _sources_remove,
    "recipes update": _sources_update,
    "recipes check": _check,
    "lock": _lock,
    "sync": _sync,
    "export": _export,
    "list": _list,
    "create": _create,
    "toolchain": _toolchain,
    "probe": _probe,
    "audit": _audit,
    "audit explain": _explain,
    "audit rules": _rules_list,
    "activation show": _activation_show,
}


def render_human(console: Out, result: Result) -> None:
    renderer = RENDERERS.get(result.command)
    if renderer is not None:
        renderer(console, result.data)
    render_messages(console, result)


def render_messages(console: Out, result: Result) -> None:
    for message in result.messages:
        console.print(escape(message))


def render_plan(console: Out, plan: Any, findings: Any = ()) -> None:
    _plan(console, plan, findings)
