"""The `envkit` console script and `python -m envkit`: envkit's own process. It keeps the code of
dataclass methods between runs (envkit.codecache), so the cache goes in before the CLI's imports
create their classes."""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself loads after ownprocess.claim(), like every other import
if TYPE_CHECKING:
    from typing import NoReturn


def main() -> NoReturn:
    from envkit import ownprocess

    ownprocess.claim()  # before any import of weight: it turns the cyclic collector off
    from envkit import codecache

    codecache.install()
    from envkit.cli import run

    run()


if __name__ == "__main__":
    main()
