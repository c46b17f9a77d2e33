"""What a provider offers: its model list (the provider's own models endpoint, read by
`fetch_models` alone, for "Test connection" and the Models page's list), what that list
says about each model (`describe`), a guess of each model's capabilities from its family
name, and a tiny real request that proves the address and the key work.

What the list reports is taken as it is (OpenRouter: `context_length`,
`top_provider.max_completion_tokens`, `supported_parameters`,
`architecture.input_modalities`; vLLM: `max_model_len`; LM Studio:
`max_context_length`; llama.cpp: `meta.n_ctx_train`; others under the usual names);
anything missing stays None, and the administrator fills it in. Trap: llama.cpp's
`n_ctx_train` is what the model was trained for, not what the server was started with
(`--ctx-size`), so it is an upper bound; say so where it is shown.

Rule: everything here talks to the provider only (no database, no HTTP framework), and
answers with plain outcomes (`ProviderCheck`) rather than raising, so the setup screens
can show "the key was refused" next to the field. The key never appears in a message.
Trap: the guess is a default an administrator can change, never a fact: an unknown
family gets only `tools` (most chat servers take tool schemas; a model that cannot use
them just answers in text).
"""

from __future__ import annotations

import re
import time
from typing import Any, Final

import httpx
import msgspec

from skald.llm.anthropic import API_VERSION
from skald.llm.anthropic import DEFAULT_BASE_URL as ANTHROPIC_BASE_URL
from skald.llm.client import ModelClient
from skald.llm.errors import LlmError
from skald.llm.types import Finished, Message, Request, TextDelta, TextPart

__all__ = [
    "Guess",
    "ListedModel",
    "ModelListError",
    "OfferedModel",
    "ProviderCheck",
    "describe",
    "fetch_models",
    "guess_model",
    "list_models",
    "try_model",
]

TIMEOUT: Final = httpx.Timeout(20.0, connect=5.0)
UNSENDABLE: Final = (
    "The address or the API key contains characters that cannot be sent; check them."
)
MAX_MODELS: Final = 500
_ORDER: Final = ("tools", "vision", "reasoning")


class Guess(msgspec.Struct, frozen=True, kw_only=True):
    """Defaults for a model picked from a list (the administrator may change them)."""

    capabilities: list[str]  # of "tools", "vision", "reasoning"
    context_window: int | None = None
    max_output_tokens: int | None = None


class OfferedModel(msgspec.Struct, frozen=True, kw_only=True):
    id: str  # the provider's own id, as it goes on the wire
    name: str
    guess: Guess


class ProviderCheck(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool
    message: str  # plain words: what worked, or what went wrong and where
    models: list[OfferedModel] = []
    latency_ms: int | None = None
    reply: str | None = None  # the start of the model's answer to the tiny request


# -- what a listed model says about itself ------------------------------------------------

_WINDOW_KEYS = ("context_window", "context_length", "max_model_len", "max_context_length")
_OUTPUT_KEYS = ("max_output_tokens", "max_completion_tokens", "max_tokens")


class ListedModel(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    capabilities: list[str] = msgspec.field(default_factory=list)  # tools, vision, reasoning


def _positive(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value > 0 else None


def _first(entry: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        found = _positive(entry.get(key))
        if found is not None:
            return found
    return None


def describe(entry: dict[str, Any]) -> ListedModel | None:
    """One entry of a `/models` list (OpenAI-compatible or Anthropic), or None."""
    model_id = entry.get("id")
    if not isinstance(model_id, str) or not model_id:
        return None
    window = _first(entry, _WINDOW_KEYS)
    output = _first(entry, _OUTPUT_KEYS)
    top = entry.get("top_provider")
    if isinstance(top, dict):
        window = window or _first(top, ("context_length",))
        output = output or _first(top, ("max_completion_tokens",))
    meta = entry.get("meta")
    if isinstance(meta, dict):
        window = window or _first(meta, ("n_ctx", "n_ctx_train"))
    caps: set[str] = set()
    params = entry.get("supported_parameters")
    if isinstance(params, list):
        if "tools" in params:
            caps.add("tools")
        if "reasoning" in params or "include_reasoning" in params:
            caps.add("reasoning")
    arch = entry.get("architecture")
    if isinstance(arch, dict) and "image" in (arch.get("input_modalities") or []):
        caps.add("vision")
    return ListedModel(
        id=model_id, context_window=window, max_output_tokens=output, capabilities=sorted(caps)
    )


# Families by name (lower case, anywhere in the id). Order matters: the first match wins.
_FAMILIES: Final[tuple[tuple[str, tuple[str, ...], int | None], ...]] = (
    (r"embed|whisper|tts|dall-e|moderation|rerank", (), None),
    (r"gpt-4o|gpt-4\.1|gpt-5|chatgpt", ("tools", "vision"), 128_000),
    (r"\bo[134](-mini|-pro)?\b|o1-|o3-|o4-", ("tools", "vision", "reasoning"), 200_000),
    (r"claude", ("tools", "vision"), 200_000),
    (r"gemini", ("tools", "vision"), 1_000_000),
    (
        r"gemma-?3|llava|bakllava|moondream|pixtral|-vl\b|-vl-|vision|qwen2\.5-vl|minicpm-v",
        ("tools", "vision"),
        None,
    ),
    (r"deepseek-r1|deepseek-reasoner|qwq|reason|thinking|r1-distill", ("tools", "reasoning"), None),
    (r"qwen3", ("tools", "reasoning"), None),
)


def guess_model(model_id: str, context_window: int | None = None) -> Guess:
    """Capabilities and limits guessed from a model's name (and the context window the
    provider's list reports, which wins over the family's)."""
    name = model_id.lower()
    for pattern, caps, window in _FAMILIES:
        if re.search(pattern, name):
            if "claude" in name and re.search(r"(3-7|sonnet-4|opus-4|-4-)", name):
                caps = (*caps, "reasoning")
            return Guess(capabilities=list(caps), context_window=context_window or window)
    return Guess(capabilities=["tools"], context_window=context_window)


def _plain_http_error(where: str, exc: Exception) -> str:
    # OpenSSL's reason is in the text whichever transport raised it (the model
    # transport's own, or httpcore's behind a proxy).
    if isinstance(exc, httpx.ConnectError) and "CERTIFICATE_VERIFY_FAILED" in str(exc):
        return (
            f"{where} answered with a certificate this computer does not trust. On a network "
            "whose proxy inspects TLS, name its authority in SSL_CERT_FILE (Models: Behind "
            "a proxy)."
        )
    if isinstance(exc, httpx.ConnectError):
        return f"Nothing answers at {where}. Is the server running, and is the address right?"
    if isinstance(exc, httpx.TimeoutException):
        return f"{where} did not answer in time."
    return f"{where} could not be reached ({type(exc).__name__})."


def _status_message(status: int, where: str) -> str:
    if status in (401, 403):
        return f"{where} refused the key (HTTP {status}). Check the API key."
    if status == 404:
        return (
            f"{where} has no models list (HTTP 404). Check the address: for most servers "
            "it ends in /v1."
        )
    return f"{where} answered HTTP {status}."


class ModelListError(Exception):
    """The models endpoint answered, but not with a list: HTTP `status` (not 200, with
    its `content`), or a 200 whose body is not JSON."""

    def __init__(self, status: int, content: bytes = b"") -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.content = content


async def fetch_models(
    kind: str,
    base: str,
    api_key: str | None,
    http: httpx.AsyncClient,
    wait: httpx.Timeout = TIMEOUT,
) -> list[tuple[dict[str, Any], ListedModel]] | None:
    """`GET <base>/models` (Anthropic: `<base>/v1/models`): each entry with what it says
    (`describe`); None when the JSON holds no list. The one reader of a provider's list.

    Raises `httpx.HTTPError` (nothing answered), `httpx.InvalidURL` / `UnicodeError` /
    `ValueError` (a key or an address HTTP cannot carry: never echo it) and
    `ModelListError`; each caller words them its own way."""
    headers: dict[str, str] = {}
    if kind == "anthropic":
        url = f"{base}/v1/models?limit=1000"
        headers["anthropic-version"] = API_VERSION
        if api_key:
            headers["x-api-key"] = api_key
    else:
        url = f"{base}/models"
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
    response = await http.get(url, headers=headers, timeout=wait)
    if response.status_code != 200:
        raise ModelListError(response.status_code, response.content)
    try:
        body = response.json()
    except ValueError:
        raise ModelListError(200) from None
    entries = body.get("data") if isinstance(body, dict) else body
    if not isinstance(entries, list):
        return None
    return [(e, m) for e in entries if isinstance(e, dict) and (m := describe(e)) is not None]


async def list_models(
    kind: str, base_url: str, api_key: str | None, http: httpx.AsyncClient
) -> ProviderCheck:
    """The provider's models (`fetch_models`), each with a guess; never raises."""
    root = (base_url or ANTHROPIC_BASE_URL).rstrip("/")
    started = time.monotonic()
    try:
        listed = await fetch_models(kind, root, api_key, http)
    except httpx.HTTPError as exc:
        return ProviderCheck(ok=False, message=_plain_http_error(root, exc))
    except (httpx.InvalidURL, UnicodeError, ValueError):
        return ProviderCheck(ok=False, message=UNSENDABLE)
    except ModelListError as exc:
        if exc.status != 200:
            return ProviderCheck(ok=False, message=_status_message(exc.status, root))
        listed = None
    latency = int((time.monotonic() - started) * 1000)
    if listed is None:
        return ProviderCheck(ok=False, message=f"{root} did not answer with a models list.")
    models = []
    for entry, described in listed[:MAX_MODELS]:
        # What the list reports (limits, capabilities) wins; the family fills the rest.
        family = guess_model(described.id, described.context_window)
        guess = Guess(
            capabilities=[
                c for c in _ORDER if c in family.capabilities or c in described.capabilities
            ],
            context_window=family.context_window,
            max_output_tokens=described.max_output_tokens,
        )
        name = entry.get("display_name") or entry.get("name") or described.id
        models.append(OfferedModel(id=described.id, name=str(name)[:80], guess=guess))
    models.sort(key=lambda m: m.id)
    return ProviderCheck(
        ok=True,
        message=f"Connected: {len(models)} model{'s' if len(models) != 1 else ''} offered.",
        models=models,
        latency_ms=latency,
    )


async def try_model(client: ModelClient, model: str) -> ProviderCheck:
    """A tiny real request to one model (a few output tokens); never raises."""
    request = Request(
        model=model,
        messages=[Message(role="user", content=[TextPart("Reply with the single word: OK")])],
        max_tokens=16,
    )
    started = time.monotonic()
    text: list[str] = []
    try:
        async for event in client.stream(request):
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, Finished):
                break
    except LlmError as exc:
        return ProviderCheck(ok=False, message=f"The model {model} did not answer: {exc}")
    except (httpx.InvalidURL, UnicodeError, ValueError):
        return ProviderCheck(ok=False, message=UNSENDABLE)
    latency = int((time.monotonic() - started) * 1000)
    reply = "".join(text).strip()[:80]
    return ProviderCheck(
        ok=True,
        message=f"The model {model} answered in {latency} ms.",
        latency_ms=latency,
        reply=reply,
    )
