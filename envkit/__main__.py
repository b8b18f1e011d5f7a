"""The `envkit` console script and `python -m envkit`: envkit's own process."""

from __future__ import annotations

from typing import NoReturn


def main() -> NoReturn:
    from envkit.core import ownprocess

    ownprocess.claim()
    from envkit.cli.main import run

    run()


if __name__ == "__main__":
    main()
