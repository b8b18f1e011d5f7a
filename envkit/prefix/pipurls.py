"""What a pip wheel's URL names: a VCS repository and the commit it was installed at, or a file.

Standard library only: the no-op sync and the audit's drift check read commits without loading the
lock machinery (rattler) or packaging.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit


def vcs_parts(url: str) -> tuple[str, str | None, str] | None:
    """A VCS reference's repository (its `git+` kept), revision and subdirectory
    (`git+URL@REV#subdirectory=S`); None for a file or a folder. The revision is what follows the
    path's last `@` (a user in the host, `git+ssh://git@host/...`, is not one)."""
    if "+" not in url.partition(":")[0]:
        return None
    parts = urlsplit(url)
    path, at, revision = parts.path.rpartition("@")
    if not at or "/" in revision:
        path, revision = parts.path, ""
    subdirectory = next((v for k, _, v in (f.partition("=") for f in parts.fragment.split("&")) if k == "subdirectory"), "")
    return f"{parts.scheme}://{parts.netloc}{path}", revision or None, subdirectory


def url_commit(url: str) -> str | None:
    """The commit a VCS reference names (`git+URL@COMMIT`); None for a file or a folder."""
    parts = vcs_parts(url)
    return parts[1] if parts else None


def pip_shown(version: str, url: str) -> str:
    """A wheel's version, and its commit where it came from git: a branch moves without a new
    version, so a change of commit must show."""
    commit = url_commit(url)
    return version if commit is None else f"{version} ({commit[:12]})"


def commit_shown(version: str, commit: str | None) -> str:
    """A wheel's version with the commit it was installed at; one installed from an index or a file
    (no commit) says so, where the other side of a change has one."""
    return f"{version} ({commit[:12]})" if commit else f"{version} (not from git)"


def exact_url(info: dict[str, Any]) -> str:
    """The URL that gets pip exactly what a report's `download_info` (PEP 610) describes: an archive
    with its sha256, a VCS checkout at the commit pip resolved (`git+URL@COMMIT`: the bare URL
    would fetch a branch's head, or a web page), a local folder as it is (nothing pins what it
    holds). A subdirectory is kept as pip writes it."""
    url = str(info.get("url", ""))
    vcs = info.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs") and vcs.get("commit_id"):
        return f"{vcs['vcs']}+{url}@{vcs['commit_id']}" + (f"#subdirectory={info['subdirectory']}" if info.get("subdirectory") else "")
    archive = info.get("archive_info") or {}
    legacy = str(archive.get("hash") or "")  # PEP 610's older `"hash": "sha256=<hex>"`, which pip before 22.2 wrote
    sha = (archive.get("hashes") or {}).get("sha256") or (legacy.partition("=")[2] if legacy.startswith("sha256=") else None)
    if sha:
        return f"{url}#sha256={sha}"
    return url + (f"#subdirectory={info['subdirectory']}" if info.get("subdirectory") else "")
