"""A pip wheel pinned by version and a hash-checked URL, or by a VCS reference at its commit: what a lock holds for pip."""

from __future__ import annotations

from dataclasses import dataclass

from envkit.prefix.pipurls import pip_shown, url_commit


@dataclass(frozen=True)
class LockedPip:
    """A pip wheel pinned by version and a hash-checked URL, or by a VCS reference at its commit."""

    name: str
    version: str
    url: str  # with #sha256=<hex>; a VCS reference at its commit (git+URL@COMMIT)

    @property
    def sha256(self) -> str | None:
        _, _, fragment = self.url.partition("#sha256=")
        return fragment or None

    @property
    def commit(self) -> str | None:
        return url_commit(self.url)

    @property
    def shown(self) -> str:
        return pip_shown(self.version, self.url)

    @property
    def requirement(self) -> str:
        """A PEP 508 direct reference: pip installs exactly this file (and checks the hash), and every
        reader of pip specs still sees the name."""
        return f"{self.name} @ {self.url}"
