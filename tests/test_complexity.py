"""Every function above radon's grade C (cyclomatic complexity over 20) says why beside it, on
the line above its def: a reader meets the reason before the branches."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RADON = Path(sys.executable).with_name("radon")


def _complex_functions() -> list[tuple[Path, int, str, int]]:
    done = subprocess.run([str(RADON), "cc", "-s", "-n", "D", "envkit"], cwd=ROOT, capture_output=True, text=True, check=True)
    found, current = [], None
    for line in done.stdout.splitlines():
        if not line.startswith(" "):
            current = ROOT / line.strip()
        elif (m := re.match(r"\s+[FMC] (\d+):\d+ (\S+) - [D-F] \((\d+)\)", line)) and current is not None:
            found.append((current, int(m.group(1)), m.group(2), int(m.group(3))))
    return found


def test_each_function_over_grade_c_gives_its_reason() -> None:
    functions = _complex_functions()
    assert functions, "radon found no function over grade C: the check would pass on anything"
    unexplained = []
    for path, line, name, cc in functions:
        above = path.read_text(encoding="utf-8").splitlines()[line - 2].strip()
        if not re.fullmatch(rf"# radon cc {cc}: .{{20,}}", above):
            unexplained.append(f"{path.relative_to(ROOT)}:{line} {name} (cc {cc}): {above!r}")
    assert not unexplained, "\n".join(unexplained)


def test_none_is_over_grade_e() -> None:
    """A reason covers a long table of cases, not a function no one can follow (grade F: cc over 40)."""
    assert [f for f in _complex_functions() if f[3] > 40] == []
