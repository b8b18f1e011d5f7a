"""What pip URLs name: the tests of envkit.prefix.pipurls (the wheels' sources as the record, the lock
and the drift check read them)."""

from __future__ import annotations

from envkit.prefix.pipurls import commit_shown, exact_url, pip_shown, url_commit, vcs_parts

SHA = "4a4a99ba1801e0e40cd85c54c9f58942ddf6508c"


def test_the_url_recorded_for_what_pip_installed_gets_that_very_thing_again() -> None:
    """pip's report (PEP 610's download_info): an archive by its hash, a VCS checkout at the commit
    pip resolved, a folder as it is."""
    sha = SHA
    archive = {"url": "https://files.example/a-1-py3-none-any.whl", "archive_info": {"hashes": {"sha256": "ab12"}}}
    vcs = {"url": "https://git.example/r", "vcs_info": {"vcs": "git", "requested_revision": "main", "commit_id": sha}}
    assert exact_url(archive) == "https://files.example/a-1-py3-none-any.whl#sha256=ab12"
    assert exact_url(vcs) == f"git+https://git.example/r@{sha}"
    assert exact_url({**vcs, "subdirectory": "pkg"}) == f"git+https://git.example/r@{sha}#subdirectory=pkg"
    assert exact_url({"url": "file:///home/me/proj", "dir_info": {}}) == "file:///home/me/proj"
    # the older form of PEP 610's hash, which pip before 22.2 writes in direct_url.json
    assert exact_url({"url": "https://f.example/a.whl", "archive_info": {"hash": "sha256=cd34"}}) == "https://f.example/a.whl#sha256=cd34"


def test_a_vcs_reference_is_read_apart() -> None:
    """The revision is what follows the path's last `@`, never the user in the host."""
    assert vcs_parts(f"git+ssh://git@host.example/team/r.git@{SHA}#subdirectory=pkg") == (
        "git+ssh://git@host.example/team/r.git",
        SHA,
        "pkg",
    )
    assert vcs_parts("git+ssh://git@host.example/team/r.git") == ("git+ssh://git@host.example/team/r.git", None, "")
    assert vcs_parts("file:///wheels/a-1-py3-none-any.whl#sha256=ab") is None
    assert url_commit(f"git+https://h.example/r@{SHA}") == SHA and url_commit("https://f.example/a.whl") is None


def test_a_version_from_git_shows_its_commit() -> None:
    assert pip_shown("0.1", f"git+https://h.example/r@{SHA}") == "0.1 (4a4a99ba1801)"
    assert pip_shown("0.1", "https://f.example/a.whl#sha256=ab") == "0.1"
    assert commit_shown("0.1", SHA) == "0.1 (4a4a99ba1801)" and commit_shown("0.1", None) == "0.1 (not from git)"
