"""Extra OpenAI-compatible providers are data, not code.

The shipped `providers.json` names the common ones (defaults for the base URL, whether
a key is needed, a hint for the setup screen); `<data>/providers.json` may add entries
or replace shipped ones by id, so a new compatible service needs no release.
"""

from __future__ import annotations

import ipaddress
from importlib import resources
from pathlib import Path
from typing import Annotated, Final, Literal
from urllib.parse import urlsplit

import httpx
import msgspec

from skald.errors import ConfigError
from skald.llm.anthropic import DEFAULT_BASE_URL as ANTHROPIC_BASE_URL
from skald.llm.anthropic import AnthropicClient
from skald.llm.client import ModelClient
from skald.llm.openai_compat import OpenAICompatClient
from skald.llm.wire import SILENCE_HOSTED_S, SILENCE_LOCAL_S, timeout_for

FILE_NAME = "providers.json"
# Kinds implemented in code; a data entry may not shadow them.
BUILTIN_KINDS: Final = ("openai_compatible", "anthropic")


class ProviderType(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$")]
    name: Annotated[str, msgspec.Meta(min_length=1)]
    base_url: Annotated[str, msgspec.Meta(pattern=r"^https?://[^\s]+$")]
    requires_key: bool = True
    docs: str = ""
    # OpenAI's reasoning models refuse `max_tokens`; most compatible servers only know it.
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    # Seconds of silence before a request fails (see skald.llm.wire); a provider may
    # set its own. Hosted services: 120; local servers: 300 (the default).
    silence_timeout_s: Annotated[int, msgspec.Meta(ge=1, le=3600)] = SILENCE_LOCAL_S


class _ProvidersFile(msgspec.Struct, forbid_unknown_fields=True):
    providers: list[ProviderType]


def _parse(raw: bytes, where: str) -> list[ProviderType]:
    try:
        entries = msgspec.json.decode(raw, type=_ProvidersFile).providers
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ConfigError(f"{where}: not valid JSON: {exc}") from None
    seen: set[str] = set()
    for entry in entries:
        if entry.id in BUILTIN_KINDS:
            raise ConfigError(f"{where}: provider id {entry.id!r} is reserved")
        if entry.id in seen:
            raise ConfigError(f"{where}: provider id {entry.id!r} appears twice")
        seen.add(entry.id)
    return entries


def load_provider_types(data_dir: Path | None) -> dict[str, ProviderType]:
    """The shipped types, then `<data_dir>/providers.json` on top (same id replaces)."""
    shipped = resources.files("skald.llm").joinpath(FILE_NAME).read_bytes()
    types = {t.id: t for t in _parse(shipped, f"skald/llm/{FILE_NAME} (shipped)")}
    if data_dir is None:
        return types
    path = data_dir / FILE_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return types
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    types.update((t.id, t) for t in _parse(raw, str(path)))
    return types


def address(kind: str, base_url: str | None, types: dict[str, ProviderType]) -> str | None:
    """Where a provider's requests (and its API key) go: its base URL, else its kind's
    default; compared without a trailing slash."""
    if base_url:
        return base_url.rstrip("/")
    if kind == "anthropic":
        return ANTHROPIC_BASE_URL.rstrip("/")
    ptype = types.get(kind)
    return None if ptype is None else ptype.base_url.rstrip("/")


def with_scheme(raw: str | None) -> str | None:
    """An address typed without its scheme gets one: http:// for this machine and the home
    network (a local server rarely has a certificate), https:// for anything else.

    Private means loopback, private and link-local IP addresses, `localhost`, names without
    a dot (a container or a machine on the LAN) and `.local` / `.lan` / `.home.arpa`."""
    if raw is None or "://" in raw:
        return raw
    text = raw.strip()
    host = (urlsplit("//" + text).hostname or "").lower()
    return ("http://" if _private_host(host) else "https://") + text


def _private_host(host: str) -> bool:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host or host.endswith((".local", ".lan", ".home.arpa", ".localhost"))
    return ip.is_private or ip.is_loopback or ip.is_link_local


def silence_default(kind: str, types: dict[str, ProviderType]) -> int:
    """A kind's seconds of silence before a request fails."""
    if kind == "anthropic":
        return SILENCE_HOSTED_S
    ptype = types.get(kind)
    return SILENCE_LOCAL_S if ptype is None else ptype.silence_timeout_s


def make_client(
    kind: str,
    base_url: str | None,
    api_key: str | None,
    types: dict[str, ProviderType],
    http: httpx.AsyncClient | None = None,
    *,
    silence_s: int | None = None,
) -> ModelClient:
    """A client for a configured provider; `kind` is a built-in kind or a type id.
    `silence_s`: the provider's own silence timeout (None: its kind's)."""
    timeout = timeout_for(silence_s or silence_default(kind, types))
    if kind == "anthropic":
        if not api_key and not base_url:
            raise ConfigError("Anthropic needs an API key")
        return AnthropicClient(base_url or ANTHROPIC_BASE_URL, api_key, http=http, timeout=timeout)
    if kind == "openai_compatible":
        if not base_url:
            raise ConfigError("an OpenAI-compatible provider needs a base URL")
        name = urlsplit(base_url).netloc or base_url
        return OpenAICompatClient(base_url, api_key, provider_name=name, http=http, timeout=timeout)
    ptype = types.get(kind)
    if ptype is None:
        known = ", ".join(sorted([*BUILTIN_KINDS, *types]))
        raise ConfigError(f"unknown provider kind {kind!r} (known: {known})")
    if ptype.requires_key and not api_key:
        raise ConfigError(f"{ptype.name} needs an API key")
    return OpenAICompatClient(
        base_url or ptype.base_url,
        api_key,
        provider_name=ptype.name,
        http=http,
        timeout=timeout,
        max_tokens_field=ptype.max_tokens_field,
    )
