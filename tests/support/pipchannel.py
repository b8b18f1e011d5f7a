"""A channel with a python that has pip (the venv-style shim plus pip converted from its wheel), and a
find-links folder of pure-Python wheels, so recipes with a `pip:` list lock and install offline:
PIP_NO_INDEX=1 and PIP_FIND_LINKS point pip at the folder, as a team's wheelhouse would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.condapkg import index_channel
from tests.support.wheelchannel import cache_root, convert_wheel, python_shim

PIP_WHEELS = ("pip", "threadpoolctl==3.8.0", "mpmath==1.3.0")


def wheelhouse() -> Path:
    """pip's own wheel and two small pure-Python ones, downloaded once per machine."""
    dest = cache_root() / "wheelhouse"
    marker = dest / ".complete"
    if not marker.exists():
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest", str(dest), *PIP_WHEELS],
            check=True,
            timeout=600,
        )
        marker.write_text("ok")
    return dest


def pip_channel(root: Path) -> tuple[Path, Path]:
    """(channel, find-links folder): the channel holds `python` and `pip`; the folder the wheels."""
    house = wheelhouse()
    channel = root / "pipchannel"
    python_shim(channel)
    convert_wheel(next(house.glob("pip-*.whl")), channel)
    index_channel(channel)
    links = root / "links"
    links.mkdir(parents=True, exist_ok=True)
    for wheel in house.glob("*.whl"):
        if not wheel.name.startswith("pip-"):
            (links / wheel.name).write_bytes(wheel.read_bytes())
    return channel, links


def offline_pip_env(base: dict[str, str], links: Path) -> dict[str, str]:
    return {**base, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
