"""Settings for a python started without activation: a cluster job's `srun ENV/bin/python`, a
shebang, an IDE's run button, a console script such as `ENV/bin/yolo`. Nothing sources
etc/conda/activate.d there, so the seed crash comes back wherever the env's python is run that way.

Three files in the env's site-packages do what activation would have done for the variables it
sets: a `.pth` whose import line sets them at every interpreter start, a stdlib-only module that
does the same, and a `.start` entry point (PEP 829) that calls it in that line's place on the
Pythons that read `.start` files (3.15 and later; 3.18 and later ignore import lines in `.pth`
files).

Both set a variable only where the process does not have it: a value given on the command
line, by a job script or by an activation (this env's, or another's) wins, as it should when
nothing activated this env; what activation alone does (unset, prepend, append) stays its own, as
a process cannot change its own loader path after it started.

They also carry the threading values an env's activation sets from outside envkit's record
(`conda env config vars set MKL_THREADING_LAYER=GNU`, the forums' fix, or the `variables:` of an
environment.yml `conda env create` read): those reach an activated python only (EK037)."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from envkit.recipe.model import EnvOp

MODULE = "_envkit_settings"  # sorted ahead of most .pth files, so it runs before theirs
NAMES = (f"{MODULE}.py", f"{MODULE}.pth", f"{MODULE}.start")

# The variables whose activation-only values the startup files carry (EK037): those of the BLAS and
# OpenMP runtimes, NCCL's and the user-site switch, the ones envkit's rules judge. Not every
# variable conda's activation sets: a project's own (WANDB_PROJECT) is the project's business.
CARRIED_RE = re.compile(r"^(?:(?:MKL|OMP|KMP|GOMP|OPENBLAS|GOTO|BLIS|VECLIB|NUMEXPR|NCCL)_[A-Z0-9_]+|PYTHONNOUSERSITE)$")


def carried_name(name: str) -> bool:
    return CARRIED_RE.match(name) is not None


def site_dir(prefix: Path) -> Path | None:
    """The site-packages the env's python reads at start, from its conda record's file name
    (python-VERSION-BUILD.json: no JSON read, as python's record lists thousands of files); None
    for an env without python."""
    for meta in sorted((prefix / "conda-meta").glob("python-[0-9]*.json")):
        parts = meta.name[: -len(".json")].split("-")
        if len(parts) != 3:
            continue
        major_minor = ".".join(parts[1].split(".")[:2])
        free_threaded = parts[2].endswith("t")  # conda-forge's cp313t builds read lib/python3.13t
        candidates = (
            f"lib/python{major_minor}t/site-packages" if free_threaded else "",
            f"lib/python{major_minor}/site-packages",
            "Lib/site-packages",
        )
        for rel in filter(None, candidates):
            if (prefix / rel).is_dir():
                return prefix / rel
    return None


def _literal(value: str) -> str:
    """The value as Python source that gives the process the same bytes the shell scripts give it
    (UTF-8), whatever the locale: under an ASCII one a str with `é` cannot go into os.environ
    (UnicodeEncodeError, and site skips the rest of the line), so a non-ASCII value goes through
    os.fsdecode. ASCII throughout, as Python before 3.13 reads a .pth file in the locale's encoding."""
    return ascii(value) if value.isascii() else f"os.fsdecode({value.encode('utf-8')!a})"


# PYTHONNOUSERSITE keeps the user site (`pip install --user`, EK032) off only if it is there when
# the interpreter starts: site has put that folder on sys.path before it reads any .pth file. Where
# the startup files set it, they take the folder out again as site would have left it out (its
# own .pth files have run by then: those stay done).
USER_SITE_OFF_LINE = (
    "import site, sys; os.environ.get('PYTHONNOUSERSITE') and site.ENABLE_USER_SITE and "
    "(setattr(site, 'ENABLE_USER_SITE', False), site.USER_SITE in sys.path and sys.path.remove(site.USER_SITE))"
)
USER_SITE_OFF_MODULE = (
    "    if os.environ.get('PYTHONNOUSERSITE') and site.ENABLE_USER_SITE:  # too late for site: done as it would have\n"
    "        site.ENABLE_USER_SITE = False\n"
    "        if site.USER_SITE in sys.path:\n"
    "            sys.path.remove(site.USER_SITE)\n"
)


def startup_texts(header: tuple[str, ...], ops: tuple[EnvOp, ...], carried: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """File name -> text, for the variables activation sets (the last value wins, as in the
    scripts) and those `carried` from the rest of the env's activation, which won there; none for
    settings that set nothing. The .pth line sets the values itself, so the Pythons that run it
    import nothing and write no bytecode at each start; the module is what the .start entry point
    calls."""
    values = {op.name: op.value for op in ops if op.action == "set"} | dict(carried)
    if not values:
        return {}
    comments = "".join(f"# {line}\n" for line in header)
    user_site_off = "PYTHONNOUSERSITE" in values
    imports = "import os\nimport site\nimport sys\n" if user_site_off else "import os\n"
    settings = "".join(f"        ({name!r}, {_literal(value)}),\n" for name, value in values.items())
    module = (
        f"{comments}"
        '"""The env\'s activation settings for a python started without `conda activate` (a job\n'
        "script, a shebang, an IDE, a console script): each variable activation sets is set here\n"
        "too, unless the process already has it. Called at interpreter start through the .start\n"
        'file of the same name (PEP 829); the .pth file of that name does the same on older Pythons."""\n'
        f"\n{imports}\n\n"
        "def apply():\n"
        f"    for name, value in (\n{settings}    ):\n"
        "        os.environ.setdefault(name, value)\n"
        f"{USER_SITE_OFF_MODULE if user_site_off else ''}"
    )
    setdefaults = [f"os.environ.setdefault({name!r}, {_literal(value)})" for name, value in values.items()]
    line = "; ".join(["import os", *setdefaults, *([USER_SITE_OFF_LINE] if user_site_off else [])])
    return {
        f"{MODULE}.py": module,
        f"{MODULE}.pth": f"{comments}{line}\n",  # ascii() keeps a value with a newline on this one line
        f"{MODULE}.start": f"{comments}{MODULE}:apply\n",
    }


def drop_leftovers(site: Path, *, folders: bool) -> None:
    """After the startup files were taken out of `site`: the bytecode Python wrote for the module,
    and with `folders` (the site-packages of a python the env no longer has) the folders that
    leaves once nothing else is in them."""
    for pyc in site.glob(f"__pycache__/{MODULE}.*.pyc"):
        pyc.unlink(missing_ok=True)
    for folder in (site / "__pycache__", site, site.parent) if folders else ():
        with contextlib.suppress(OSError):  # not empty: something else is still there
            folder.rmdir()
