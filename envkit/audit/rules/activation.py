"""Rules on what activation sets: drifted or older scripts, conda's variables replaced, settings overridden, kernels, pythons started without activation, reserved names."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from envkit.audit.inventory import Inventory, carried_values

if TYPE_CHECKING:
    pass

from envkit.audit.catalog import rule


@rule(
    "EK014",
    "activation-drift",
    "error",
    "envkit activation scripts missing or edited",
    rationale="The env's record says which threading settings it needs; missing or edited scripts mean they are not applied.",
    fix="envkit audit --fix rewrites them from etc/envkit/record.json.",
    sources=("https://docs.conda.io/projects/conda/en/stable/user-guide/tasks/manage-environments.html#macos-and-linux",),
    safe_fix="rewrite-activation",
)
def activation_drift(inv: Inventory) -> list[str]:
    out = []
    for script in inv.envkit_scripts:
        if script.current is None:
            if script.listed:  # else it is one this envkit writes and an older one did not (EK031)
                out.append(f"{script.path} is missing")
        elif script.current != script.expected and not script.as_written:
            out.append(f"{script.path} differs from what the env's record (etc/envkit/record.json) asks for")
    return out


@rule(
    "EK031",
    "activation-from-older-envkit",
    "warning",
    "activation files as an older envkit wrote them, or without those it writes now",
    rationale="The scripts are untouched since envkit wrote them (the record keeps each one's digest), but this envkit writes them "
    "otherwise: a later envkit mended how they behave in some shell. One such mend: envkit's fish scripts used to leave "
    "status 4 when a variable they save was not set (fish's `set` passes an earlier failure through), so "
    "`conda activate ENV; and python train.py` in fish never trained; and its cmd.exe scripts ended with whatever ERRORLEVEL "
    'came before them, on which conda\'s cmd.exe activation stops ("Activation script ... failed"). Another: envkit now '
    "also writes startup files into the env's site-packages (_envkit_settings.py, .pth and .start), so that a python "
    "started without activation (a job script's `srun ENV/bin/python`, a console script such as ENV/bin/yolo, a "
    "shebang, an IDE) gets the settings; an env made before has none, and a multi-GPU train started that way meets the "
    "seed crash. They also go missing when conda moves the env's python (`conda install python=3.12`): they stay in "
    "the old python's site-packages, which the new one does not read, and the finding says where. Files edited by "
    "hand are EK014's.",
    fix="envkit audit --fix rewrites them from etc/envkit/record.json (the settings stay the same; startup files in an old "
    "python's folder move to the new one's); so does envkit sync.",
    sources=(
        "https://fishshell.com/docs/current/cmds/set.html",
        "https://docs.python.org/3/library/site.html",
        "https://peps.python.org/pep-0829/",
    ),
    safe_fix="rewrite-activation",
)
def activation_from_older_envkit(inv: Inventory) -> list[str]:
    # untouched since envkit wrote them (the record keeps their digests), but this envkit writes them otherwise
    older = [
        f"{s.path} is as an older envkit wrote it; this envkit writes it differently"
        for s in inv.envkit_scripts
        if s.current is not None and s.current != s.expected and s.as_written
    ]
    # a file the record does not name: envkit writes one more now, such as the startup files that
    # give a python started without activation the settings (envkit.activation.startup), or the
    # env's python moved since (`conda install python=3.12`), away from the site-packages they are in
    listed = inv.record.activation.files if inv.record and inv.record.activation else None
    where = {PurePosixPath(f).name: str(PurePosixPath(f).parent) for f in listed} if listed is not None else {}
    for s in inv.envkit_scripts:
        if s.current is None and not s.listed:
            name, folder = PurePosixPath(s.path).name, str(PurePosixPath(s.path).parent)
            if where.get(name, folder) != folder:
                older.append(f"{s.path} is not there: the env's python moved, and the file is in {where[name]}, which it no longer reads")
            else:
                older.append(f"{s.path} is not there: this envkit writes it too")
    return older


def _replaced_conda_vars(inv: Inventory) -> list[tuple[str, str, str | None]]:
    """(name, conda's value, envkit's value or None for unset) where the two differ."""
    out = []
    for name, value in sorted(inv.conda_vars.items()):
        var = inv.activation.get(name)
        if var is not None and var.source == "envkit" and var.value != value:
            out.append((name, value, var.value))
    return out


def unset_replaced_conda_vars(inv: Inventory) -> str:
    names = " ".join(name for name, _, _ in _replaced_conda_vars(inv))
    return (
        f"Keep one: envkit's value, with conda env config vars unset {names} -p {inv.prefix}; or conda's, by putting it in the "
        "recipe's threading.env and running envkit sync (then unset it in conda too). envkit export writes envkit's value."
    )


@rule(
    "EK033",
    "conda-env-var-replaced",
    "warning",
    "a conda env var that envkit's activation replaces",
    rationale="conda applies the variables of `conda env config vars set` before it runs the env's activate.d scripts, so envkit's "
    "value is what processes get (conda activate and conda run alike, tested). conda's own records keep the other one: "
    "`conda env config vars list` shows it, `conda env export` writes it under variables:, and an env made again from that "
    "export, where envkit's scripts are not, gets it. For MKL_THREADING_LAYER=INTEL that is the DDP crash envkit's GNU was "
    "there to prevent; either way the two places disagree about what the env does.",
    fix="Keep one: envkit's value, with conda env config vars unset NAME -n ENV; or conda's, by putting it in the recipe's "
    "threading.env and running envkit sync (then unset it in conda too). envkit export writes envkit's value.",
    sources=("https://docs.conda.io/projects/conda/en/latest/user-guide/tasks/manage-environments.html#setting-environment-variables",),
    advise=unset_replaced_conda_vars,
)
def conda_var_replaced(inv: Inventory) -> list[str]:
    return [
        f"conda's {name}={theirs} (conda env config vars) gives way to envkit's "
        + (f"{name}={ours}" if ours is not None else f"unset {name}")
        + " at activation"
        for name, theirs, ours in _replaced_conda_vars(inv)
    ]


@rule(
    "EK034",
    "envkit-setting-overridden",
    "error",
    "an activation script that undoes envkit's settings",
    rationale="conda runs an env's etc/conda/activate.d scripts one after another in name order, so a script whose name sorts after "
    "envkit-RECIPE.sh (a package's, or one written by hand) has the last word on any variable it also sets: "
    "export MKL_THREADING_LAYER=INTEL there brings back the DDP crash envkit's GNU is there to prevent, and the recipe, "
    "the record and envkit's own script all still say GNU. envkit run and the probe source the scripts in the same order, so "
    "they see it too (and `envkit toolchain` names the script that wins).",
    fix="Take the line out of that script (a package's script comes back with the package: ask its maintainers, or remove the "
    "package), or, if its value is the one you want, put it in the recipe's threading.env and run envkit sync.",
    sources=("https://github.com/conda/conda/blob/main/conda/activate.py",),
    toolchain=True,
)
def envkit_setting_overridden(inv: Inventory) -> list[str]:
    out = []
    for name, ours in sorted(inv.envkit_settings.items()):
        var = inv.activation.get(name)
        if var is not None and var.source != "envkit" and var.value != ours:
            theirs = f"sets {name}={var.value}" if var.value is not None else f"unsets {name}"
            mine = f"{name}={ours}" if ours is not None else f"unset {name}"
            out.append(f"{var.source} {theirs} after envkit's {mine} (conda runs activate.d scripts in name order)")
    return out


@rule(
    "EK036",
    "jupyter-kernel-settings",
    "warning",
    "a Jupyter kernel of the env that starts without its activation settings",
    rationale="A kernelspec written by `python -m ipykernel install` starts the env's python directly, with the Jupyter server's "
    "environment and the spec's own `env`, and runs no activation. The env's startup files (_envkit_settings.pth) fill "
    "in what the server's environment lacks, but a value the server has wins there: one from the shell it was started "
    "in, or MKL_THREADING_LAYER=INTEL, which mkl-service writes into the environment of a server process that imported "
    "it, for every kernel it starts. A DDP run launched from such a notebook (ultralytics' multi-GPU train spawns "
    "torch.distributed.run) gets the seed crash MKL_THREADING_LAYER=GNU is there to prevent, and thread counts are "
    "whatever the server had. The spec's `env` wins over the server's. Kernels started through conda run or nb_conda_kernels are "
    "activated and not looked at. The spec's `env` cannot unset a variable the server has.",
    fix="envkit audit --fix writes envkit's settings into each such kernel.json's env (the rest of the file as it was; a `$` "
    "written as `$$`, since Jupyter expands $NAME there); from then on envkit sync, and create over the env, write the "
    "settings they change there too. The threading values the startup files carry from conda's own activation "
    "(EK037) go into the kernel with them, and come out once activation no longer sets them. A prepend or append is not "
    "written: the spec's env cannot add to a variable.",
    sources=(
        "https://jupyter-client.readthedocs.io/en/stable/kernels.html#kernel-specs",
        "https://github.com/anaconda/nb_conda_kernels/issues/54",
    ),
    safe_fix="kernel-settings",
)
def kernel_settings(inv: Inventory) -> list[str]:
    # what envkit's activation sets and the threading values its startup files carry (EK037): the
    # rest of conda's env vars and other scripts miss the kernel too, but they are not envkit's to write
    settings = inv.envkit_settings | inv.carried
    return [
        f"{k.path} (kernel '{k.name}') starts {k.python} without activation: " + "; ".join(differences)
        for k in inv.kernels
        if (differences := k.differences(settings))
    ]


WITHOUT_ACTIVATION = "a python started without activation (a job script's `srun ENV/bin/python`, a console script, a kernel)"


@rule(
    "EK037",
    "activation-only-settings",
    "warning",
    "threading settings that only an activated python gets",
    rationale="`conda env config vars set MKL_THREADING_LAYER=GNU` (the fix the forums give for the seed crash), the `variables:` "
    "of an environment.yml that `conda env create` read (envkit's own export writes them there), a package's "
    "etc/conda/env_vars.d and a hand-written activate.d script all set their values when the env is activated, and only "
    "then. A python started without activation gets none of them: a Slurm job's `srun ENV/bin/python train.py`, a "
    "console script such as ENV/bin/yolo or ENV/bin/torchrun, a shebang, an IDE's run button, a Jupyter kernel. The "
    "audit and the probe of the activated env pass, and the multi-GPU run started that way meets the seed crash "
    "(mkl-service: MKL_THREADING_LAYER=INTEL is incompatible with libgomp). Only the variables of the BLAS and OpenMP "
    "runtimes, NCCL's and PYTHONNOUSERSITE are looked at; a project's own variables are the project's business. Values "
    "carried before and changed since (`conda env config vars set` again, or `unset`) are found too.",
    fix="envkit audit --fix writes the values into envkit's startup files in the env's site-packages (_envkit_settings.pth, "
    ".py and .start), which set each one only where the process does not have it, so an activation's value still wins, "
    "and records them in etc/envkit/record.json; after a later `conda env config vars set` or `unset`, the audit finds "
    "the difference and --fix writes them again. conda's own settings stay where they are.",
    sources=(
        "https://docs.conda.io/projects/conda/en/stable/user-guide/tasks/manage-environments.html#setting-environment-variables",
        "https://docs.python.org/3/library/site.html",
        "https://github.com/pytorch/pytorch/issues/37377",
    ),
    safe_fix="carry-activation",
)
def activation_only_settings(inv: Inventory) -> list[str]:
    # what envkit's startup files should carry (the threading values conda's env vars or another
    # activate.d script set, less the names envkit's settings set: EK031, EK033 and EK034 judge
    # those), against what its record says they carry
    own = inv.envkit_settings
    wanted = {name: value for name, value in carried_values(inv.activation).items() if name not in own}
    if inv.planned or not inv.startup_site or not (wanted or inv.carried):
        return []
    out = []
    for name in sorted(wanted.keys() | inv.carried.keys()):
        now, given = wanted.get(name), inv.carried.get(name)
        if now == given:
            continue
        if name in own:  # a record that carries a name envkit sets itself: the files give it over envkit's value
            out.append(f"{name}={given} reaches {WITHOUT_ACTIVATION} through envkit's startup files, over envkit's own setting")
        elif given is None:
            out.append(f"{name}={now} is set by {inv.activation[name].source} at activation only: {WITHOUT_ACTIVATION} does not get it")
        elif now is None:
            out.append(f"{name}={given} reaches {WITHOUT_ACTIVATION} through envkit's startup files, but activation no longer sets it")
        else:
            source = inv.activation[name].source
            out.append(f"{name} is {now} at activation ({source}) but {given} for {WITHOUT_ACTIVATION}, from envkit's startup files")
    return out


@rule(
    "EK040",
    "reserved-variable",
    "error",
    "activation sets a variable a shell, conda or the loader acts on",
    rationale="Some variables are not settings but instructions: bash runs PS0 and PROMPT_COMMAND at every prompt, zsh expands "
    "RPS1 and SPROMPT (and runs what they hold under prompt_subst), HISTFILESIZE=0 empties ~/.bash_history the moment "
    "it is set, CONDA_PREFIX and CONDA_SHLVL are conda's activation state (conda deactivate then fails with 'This should "
    "not happen!'), LD_PRELOAD loads a library into every program. envkit refuses them in recipes; an env made "
    "before that, or given them through conda env config vars, still sets them at every activation.",
    fix="Take the variable out of the recipe's threading.env and run envkit sync; for conda's, conda env config vars unset NAME -p PREFIX.",
    sources=(
        "https://www.gnu.org/software/bash/manual/html_node/Bash-Variables.html",
        "https://zsh.sourceforge.io/Doc/Release/Parameters.html",
        "https://docs.conda.io/projects/conda/en/latest/dev-guide/deep-dives/activation.html",
        "https://man7.org/linux/man-pages/man8/ld.so.8.html",
    ),
)
def reserved_variable(inv: Inventory) -> list[str]:
    """envkit's settings or conda's env config vars that set a variable a shell, conda or the
    loader acts on (an env made before envkit refused them, or vars set with conda)."""
    from envkit.recipe.reserved import why_reserved

    out = []
    for source, names in (("envkit's activation", inv.envkit_settings), ("conda env config vars", inv.conda_vars)):
        for name in sorted(names):
            if (why := why_reserved(name)) is not None:
                out.append(f"{source} sets {name}: it is {why}")
    return out
