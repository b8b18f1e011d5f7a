"""Turn recipe channel names into URLs, honouring mirrors from flags, envkit config and .condarc."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from envkit.core import paths
from envkit.core.credentials import refuse_credentials
from envkit.core.errors import UsageError
from envkit.core.names import is_relative_path
from envkit.solve import condaconfig

DEFAULT_ALIAS = condaconfig.DEFAULT_ALIAS


@dataclass(frozen=True)
class ResolvedChannel:
    """A channel as given (`name`), the URL it reaches, and what decided that URL (`via`)."""

    name: str
    url: str
    via: str  # "default" | "--mirror" | "envkit config" | ".condarc custom_channels" | ".condarc channel_alias" | "url" | "lock" | "record"

    @property
    def canonical(self) -> str:
        """The URL the name has on a machine with no mirror of it: what a lock keeps, so each
        machine that installs it reaches the channel through its own mirror (as pixi's locks do).
        A URL is itself; `defaults` stays as conda's settings expand it."""
        return canonical_url(self.name, self.url)


def canonical_url(name: str, url: str) -> str:
    """What a channel given as `name` and reached at `url` is called on a machine with no mirror."""
    if name == "defaults" or _is_url(name) or name.startswith("/") or is_relative_path(name):
        return url
    return f"{DEFAULT_ALIAS}/{name}"


def recorded_channels(entries: object) -> list[ResolvedChannel]:
    """An env record's `channels` (name and URL each, as create and sync reached them)."""
    if not isinstance(entries, list):
        return []
    return [
        ResolvedChannel(str(c["name"]), str(c["url"]), "record") for c in entries if isinstance(c, dict) and c.get("name") and c.get("url")
    ]


def to_canonical(channels: list[ResolvedChannel]) -> dict[str, str]:
    """URL -> canonical URL for each channel reached through a mirror (rebase's `moves`)."""
    return {c.url: c.canonical for c in channels if c.url != c.canonical}


def from_canonical(channels: list[ResolvedChannel]) -> dict[str, str]:
    """Canonical URL -> this machine's URL for each channel it reaches through a mirror: how a
    lock's URLs are reached here."""
    return {canonical: url for url, canonical in to_canonical(channels).items()}


def rebase(url: str, moves: dict[str, str]) -> str:
    """`url` (a package's, or a channel's) under one channel URL of `moves`, moved to the other."""
    for old, new in moves.items():
        root = old.rstrip("/")
        if url.rstrip("/") == root or url.startswith(root + "/"):
            return new.rstrip("/") + url[len(root) :]
    return url


MIRROR_EXAMPLE = "e.g. --mirror conda-forge=https://mirror.example/conda-forge or =file:///srv/mirror/conda-forge"
CONFIG_KEYS = ("mirrors",)


def mirror_url(value: object, where: str) -> str:
    """A mirror is a URL (scheme://...) or an absolute path; anything else would be taken for a
    channel name and silently resolved against the channel alias."""
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{where}: expected a URL, found {value!r}", hint=MIRROR_EXAMPLE)
    text = value.strip().rstrip("/")
    if text.startswith("/"):
        return Path(text).as_uri()
    if not _is_url(text) or (not urlparse(text).netloc and not text.startswith("file:")):
        raise UsageError(f"{where}: {value!r} is not a URL (scheme://host/path) or an absolute path", hint=MIRROR_EXAMPLE)
    return text


def parse_mirror_flags(values: list[str]) -> dict[str, str]:
    out = {}
    for value in values:
        name, sep, url = value.partition("=")
        if not sep or not name or not url:
            raise UsageError(f"--mirror {value!r}: expected NAME=URL", hint=MIRROR_EXAMPLE)
        refuse_credentials(url, f"--mirror {name}=...")
        out[name] = mirror_url(url, f"--mirror {name}")
    return out


def envkit_config() -> dict[str, object]:
    """~/.config/envkit/config.yaml, checked field by field: a misspelt key is an error, not ignored."""
    path = paths.config_dir() / "config.yaml"
    if not path.is_file():
        return {}
    data = condaconfig.read_mapping(path, hint="fix the file's YAML")
    for key in data:
        if key not in CONFIG_KEYS:
            import difflib  # a suggestion: only for a name that is wrong

            close = difflib.get_close_matches(str(key), CONFIG_KEYS, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(CONFIG_KEYS)}"
            raise UsageError(f"{path}: unknown key '{key}'", hint=hint)
    mirrors = data.get("mirrors")
    if mirrors is not None:
        if not isinstance(mirrors, dict):
            raise UsageError(f"{path}: mirrors: expected a mapping of channel names to URLs, found {type(mirrors).__name__}")
        data["mirrors"] = {str(name): mirror_url(url, f"{path}: mirrors.{name}") for name, url in mirrors.items()}
    return data


def _is_url(channel: str) -> bool:
    return bool(re.match(r"^[a-z][a-z0-9+.-]*://", channel))


# radon cc 21: the four sources of a channel's URL in their precedence, each a branch
def resolve_channels(names: list[str], flag_mirrors: dict[str, str]) -> list[ResolvedChannel]:
    """Precedence: --mirror, envkit config `mirrors:`, .condarc custom_channels, channel_alias."""
    config_mirrors = envkit_config().get("mirrors") or {}
    assert isinstance(config_mirrors, dict)
    conda = condaconfig.current()
    custom = conda.custom_channels
    alias = conda.channel_alias
    where = "conda's" if conda.via == "conda" else ".condarc"
    alias_from = "default" if alias == DEFAULT_ALIAS else f"{where} channel_alias"
    out = []
    for name in names:
        if name == "defaults" and name not in flag_mirrors and name not in config_mirrors:
            out += [ResolvedChannel(name, url, f"{where} default_channels") for url in conda.default_channels]
            continue
        if name in conda.custom_multichannels and name not in flag_mirrors and name not in config_mirrors:
            # each member a URL, or a name under channel_alias: conda makes them simple channels of the
            # alias (Channel.make_simple_channel), custom_channels and mirrors aside
            via = f"{where} custom_multichannels {name}"
            out += [ResolvedChannel(m, m.rstrip("/") if _is_url(m) else f"{alias}/{m}", via) for m in conda.custom_multichannels[name]]
            continue
        if _is_url(name):
            out.append(ResolvedChannel(name, name, "url"))
        elif name.startswith("/"):
            out.append(ResolvedChannel(name, Path(name).as_uri(), "url"))
        elif is_relative_path(name):  # `-c ./channel`, as conda takes it: from the working directory
            out.append(ResolvedChannel(name, Path(name).expanduser().absolute().as_uri(), "url"))
        elif name in flag_mirrors:
            out.append(ResolvedChannel(name, flag_mirrors[name], "--mirror"))
        elif name in config_mirrors:
            out.append(ResolvedChannel(name, str(config_mirrors[name]).rstrip("/"), "envkit config"))
        elif name in custom:
            out.append(ResolvedChannel(name, f"{custom[name]}/{name}", f"{where} custom_channels"))
        else:
            out.append(ResolvedChannel(name, f"{alias}/{name}", alias_from))
    return out


def check_local_channel(channel: ResolvedChannel, platform: str) -> None:
    """rattler silently finds nothing in a missing or unreadable file:// channel; say so instead."""
    parsed = urlparse(channel.url)
    if parsed.scheme != "file":
        return
    root = Path(parsed.path)
    label = f"'{channel.name}'" + ("" if channel.name == channel.url else f" ({channel.url})")
    remap = f" --mirror {channel.name}=URL" if channel.via != "url" else ""  # a name can be mapped; a URL or path is itself
    for sub in (platform, "noarch"):
        index = root / sub / "repodata.json"
        try:
            with index.open("rb"):  # readable by this user, not only there (a channel in another's home)
                return
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            continue
        except OSError as exc:
            raise UsageError(
                f"channel {label}: cannot read {index} ({exc.strerror})",
                hint="ask its owner to make it readable" + (f", or map the name to a channel you can read with{remap}" if remap else ""),
            ) from None
    raise UsageError(
        f"channel {label} has no {platform}/repodata.json or noarch/repodata.json",
        hint="check the path or index it" + (f"; map the name with{remap}" if remap else ""),
    )
