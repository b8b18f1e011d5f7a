"""The `envkit` console script and `python -m envkit`: envkit's own process. It keeps the code of
dataclass methods between runs (envkit.codecache), so the cache goes in before the CLI's imports
create their classes."""

from __future__ import annotations

from typing import NoReturn


def main() -> NoReturn:
    from envkit import codecache, ownprocess

    ownprocess.claim()
    codecache.install()
    from envkit.cli import run

    run()


if __name__ == "__main__":
    main()
