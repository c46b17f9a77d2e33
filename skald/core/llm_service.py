"""The household's models: providers with sealed API keys, the catalogue, and the
model source a conversation uses (AUTO or a chosen model, with fallback)."""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import httpx
import msgspec

from skald.core.model_select import FallbackClient, ModelHealth, Outcome, auto_order
from skald.core.sealing import InstanceKey
from skald.errors import InvalidInputError, SkaldError
from skald.llm import media
from skald.llm.anthropic import DEFAULT_BASE_URL as ANTHROPIC_BASE_URL
from skald.llm.client import ModelClient
from skald.llm.discovery import (
    UNSENDABLE,
    ListedModel,
    ModelListError,
    ProviderCheck,
    fetch_models,
    list_models,
    try_model,
)
from skald.llm.errors import LlmError, error_for_status, every_model_failed
from skald.llm.media import Endpoint
from skald.llm.provider_types import (
    BUILTIN_KINDS,
    ProviderType,
    address,
    load_provider_types,
    make_client,
)
from skald.llm.transport import model_http_client
from skald.llm.wire import error_detail, network_error, redact
from skald.log import get_logger
from skald.permissions import declare
from skald.store.llm import (
    LlmStore,
    ModelCapability,
    ModelKind,
    ModelRow,
    PromptProfile,
    ProviderRow,
    Strength,
)

log = get_logger("skald.llm")
T = TypeVar("T")
LISTING_TIMEOUT = httpx.Timeout(10.0)  # a model list is small: slow means trouble

# Managing the catalogue; also what shows a failed turn's technical detail in the chat
# (the provider, its address: members see only the plain sentence).
ADMIN_MODELS_CAP = declare("admin.models", "Manage LLM providers and models")


class KindInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A provider kind as the setup screens offer it (friendly name, address default)."""

    id: str
    name: str
    base_url: str | None  # pre-filled; None: the address must be given
    requires_key: bool
    docs: str = ""


# The order people look for them in; kinds from providers.json not named here follow,
# and "other OpenAI-compatible" comes last.
_KIND_ORDER = ("openai", "anthropic", "openrouter", "ollama", "lmstudio", "llamacpp", "vllm")


def _purpose(provider_id: str) -> str:
    return f"skald:llm-api-key:v1:{provider_id}"


class LlmService:
    def __init__(self, store: LlmStore, key: InstanceKey, data_dir: Path | None) -> None:
        self.store = store
        self.key = key
        self.types: dict[str, ProviderType] = load_provider_types(data_dir)
        self.health = ModelHealth()
        # The catalogue and one client per provider (its key unsealed), kept between
        # turns. Both belong to one `store.generation`: every catalogue write bumps it
        # before it returns, and the next read starts over from the database.
        self._cached_at = -1
        self._models: list[ModelRow] | None = None
        self._clients: dict[str, ModelClient] = {}

    @functools.cached_property
    def http(self) -> httpx.AsyncClient:
        """One pool for every provider: connections are reused across turns and users.
        Made at first use, not at start; its transport reads the CA certificates (in a
        thread) only at the first https connection (`skald/llm/transport.py`)."""
        return model_http_client(httpx.Timeout(120.0, connect=10.0))

    async def close(self) -> None:
        if "http" in self.__dict__:  # made (cached_property keeps it in the instance)
            await self.http.aclose()

    def kinds(self) -> list[str]:
        return [*BUILTIN_KINDS, *sorted(self.types)]

    @staticmethod
    def _check_silence(seconds: int | None) -> None:
        if seconds and not 1 <= seconds <= 3600:
            raise InvalidInputError("silence_timeout_s is 1 to 3600 seconds (0: the default)")

    def kind_info(self) -> list[KindInfo]:
        info = {
            t.id: KindInfo(
                id=t.id, name=t.name, base_url=t.base_url, requires_key=t.requires_key, docs=t.docs
            )
            for t in self.types.values()
        }
        info["anthropic"] = KindInfo(
            id="anthropic",
            name="Anthropic",
            base_url=ANTHROPIC_BASE_URL,
            requires_key=True,
            docs="Create a key at console.anthropic.com under API keys.",
        )
        ordered = [info.pop(k) for k in _KIND_ORDER if k in info]
        ordered += sorted(info.values(), key=lambda k: k.name.lower())
        ordered.append(
            KindInfo(
                id="openai_compatible",
                name="Other OpenAI-compatible server",
                base_url=None,
                requires_key=False,
                docs="Any server that speaks the OpenAI chat API; give its address (it "
                "usually ends in /v1) and a key if it needs one.",
            )
        )
        return ordered

    async def check_new(
        self, kind: str, base_url: str | None, api_key: str | None
    ) -> ProviderCheck:
        """Test connection before saving: the provider's model list, with guesses."""
        self._check_kind(kind, base_url)
        where = address(kind, base_url, self.types)
        if where is None:
            raise InvalidInputError("the address of the provider is required")
        return await list_models(kind, where, api_key, self.http)

    async def check_provider(self, provider_id: str, model: str | None = None) -> ProviderCheck:
        """Test a saved provider: its model list, then a tiny real request to `model`
        (a wire id), else to its first enabled model (if it has one)."""
        provider, sealed = await self.store.provider_with_key(provider_id)
        api_key = self.key.open(sealed, _purpose(provider_id)) if sealed else None
        where = address(provider.kind, provider.base_url, self.types) or ""
        listed = await list_models(provider.kind, where, api_key, self.http)
        if model is None:
            mine = [
                m
                for m in await self.store.models()
                if m.provider_id == provider_id and m.kind == "chat"
            ]
            model = next((m.model for m in mine if m.enabled), None)
        if model is None:
            return listed
        tried = await try_model(await self.client_for(provider_id), model)
        # A server without a models list can still chat: the tiny request decides.
        return msgspec.structs.replace(tried, models=listed.models)

    def _check_kind(self, kind: str, base_url: str | None) -> None:
        if kind not in self.kinds():
            raise InvalidInputError(
                f"unknown provider kind {kind!r}; known: {', '.join(self.kinds())}"
            )
        if kind == "openai_compatible" and not base_url:
            raise InvalidInputError("an openai_compatible provider needs a base_url")

    async def add_provider(
        self,
        name: str,
        kind: str,
        base_url: str | None,
        api_key: str | None,
        silence_timeout_s: int | None = None,
    ) -> ProviderRow:
        self._check_kind(kind, base_url)
        self._check_silence(silence_timeout_s)
        provider_id = secrets.token_hex(6)
        sealed = self.key.seal(api_key, _purpose(provider_id)) if api_key else None
        row = await self.store.save_provider(
            provider_id,
            name,
            kind,
            base_url,
            sealed,
            create=True,
            silence_timeout_s=silence_timeout_s or None,
        )
        log.info("llm provider added", provider=name, kind=kind)
        return row

    async def update_provider(
        self,
        provider_id: str,
        name: str | None,
        kind: str | None,
        base_url: str | None,
        api_key: str | None,
        clear_key: bool,
        silence_timeout_s: int | None = None,
    ) -> ProviderRow:
        """`silence_timeout_s`: None keeps it, 0 goes back to the kind's default."""
        self._check_silence(silence_timeout_s)
        current = await self.store.provider(provider_id)
        silence = current.silence_timeout_s if silence_timeout_s is None else silence_timeout_s
        kind = kind or current.kind
        base = base_url if base_url is not None else current.base_url
        self._check_kind(kind, base)
        keep = api_key is None and not clear_key
        moved = address(kind, base, self.types) != address(
            current.kind, current.base_url, self.types
        )
        if keep and moved and current.has_api_key:
            # The key was given for the old address; the new one gets it only if the
            # administrator gives it again.
            raise InvalidInputError(
                "the provider's address changes: give its API key again (api_key), or "
                "clear it (clear_api_key); the stored key is never sent to a new address"
            )
        sealed = self.key.seal(api_key, _purpose(provider_id)) if api_key else None
        row = await self.store.save_provider(
            provider_id,
            name or current.name,
            kind,
            base,
            sealed,
            create=False,
            keep_key=keep,
            expect=current if keep else None,
            silence_timeout_s=silence or None,
        )
        if moved:
            log.info("llm provider address changed", provider=row.name, key=row.has_api_key)
        return row

    async def add_model(
        self,
        provider_id: str,
        model: str,
        name: str,
        strength: Strength,
        capabilities: list[ModelCapability],
        priority: int,
        enabled: bool,
        max_output_tokens: int | None = None,
        context_window: int | None = None,
        kind: ModelKind = "chat",
        prompt_profile: PromptProfile = "auto",
    ) -> ModelRow:
        await self.store.provider(provider_id)
        stamp = ""
        row = ModelRow(
            id=secrets.token_hex(6),
            provider_id=provider_id,
            model=model,
            name=name,
            strength=strength,
            capabilities=sorted(set(capabilities)),
            priority=priority,
            enabled=enabled,
            created_at=stamp,
            updated_at=stamp,
            max_output_tokens=max_output_tokens or None,
            context_window=context_window or None,
            kind=kind,
            prompt_profile=prompt_profile,
        )
        return await self.store.save_model(row, create=True)

    async def provider_models(self, provider_id: str) -> list[ListedModel]:
        """The provider's own model list, with the limits and capabilities it reports
        (a tiny real request: GET <address>/models). Raises LlmError when it fails."""
        provider, sealed = await self.store.provider_with_key(provider_id)
        api_key = self.key.open(sealed, _purpose(provider_id)) if sealed else None
        base = address(provider.kind, provider.base_url, self.types)
        if base is None:
            raise LlmError(f"no address for provider {provider.name!r}", retriable=False)
        try:
            listed = await fetch_models(provider.kind, base, api_key, self.http, LISTING_TIMEOUT)
        except httpx.HTTPError as exc:
            raise network_error(provider.name, exc, (api_key,)) from exc
        except (httpx.InvalidURL, UnicodeError, ValueError):
            # A key or an address with characters HTTP cannot carry (never echoed back).
            raise LlmError(f"{provider.name}: {UNSENDABLE}", retriable=False) from None
        except ModelListError as exc:
            if exc.status == 200:
                raise LlmError(
                    f"{provider.name}: the model list is not JSON", retriable=False
                ) from None
            detail = redact(error_detail(exc.content), (api_key,))
            raise error_for_status(exc.status, provider.name, detail) from None
        return [described for _entry, described in listed or []]

    def _current(self) -> int:
        """The catalogue generation, dropping what was cached from an older one."""
        generation = self.store.generation
        if self._cached_at != generation:
            self._cached_at = generation
            self._models = None
            self._clients = {}
        return generation

    async def models(self) -> list[ModelRow]:
        """The catalogue, from memory while nothing in it has changed."""
        generation = self._current()
        if self._models is not None:
            return self._models
        models = await self.store.models()
        # A write that committed while we read makes this copy stale: do not keep it.
        if self._current() == generation:
            self._models = models
        return models

    def offers(self, kind: ModelKind) -> bool:
        """An enabled model of `kind` is in the catalogue as last read (sync, for the tool
        list: each turn's model choice has just read it). Unknown (nothing read since a
        change) answers False: the tool is offered from the next turn on."""
        self._current()
        return any(m.enabled and m.kind == kind for m in self._models or [])

    async def client_for(self, provider_id: str) -> ModelClient:
        generation = self._current()
        client = self._clients.get(provider_id)
        if client is not None:
            return client
        provider, sealed = await self.store.provider_with_key(provider_id)
        api_key = self.key.open(sealed, _purpose(provider_id)) if sealed else None
        client = make_client(
            provider.kind,
            provider.base_url,
            api_key,
            self.types,
            self.http,
            silence_s=provider.silence_timeout_s,
        )
        if self._current() == generation:
            self._clients[provider_id] = client
        return client

    async def can_see_images(self, model_id: str | None) -> bool:
        """Whether a message with a picture can go to a model that sees it: the chosen
        model (when it is still enabled) has `vision`, or in AUTO any enabled one has."""
        enabled = [m for m in await self.models() if m.enabled and m.kind == "chat"]
        chosen = [m for m in enabled if m.id == model_id] if model_id else []
        return any("vision" in m.capabilities for m in (chosen or enabled))

    async def can_watch_videos(self, model_id: str | None) -> bool:
        """`can_see_images` for videos: the chosen model, or in AUTO any, has `video`."""
        enabled = [m for m in await self.models() if m.enabled and m.kind == "chat"]
        chosen = [m for m in enabled if m.id == model_id] if model_id else []
        return any("video" in m.capabilities for m in (chosen or enabled))

    async def source(
        self,
        user_id: str,
        *,
        strength: Strength = "average",
        model_id: str | None = None,
        needs: tuple[str, ...] = (),
        origin: str | None = None,
        on_recorded: Callable[[int, Outcome], Awaitable[None]] | None = None,
    ) -> FallbackClient:
        """The model source for one request: a chosen model alone, or AUTO with fallback."""
        models = await self.models()
        chosen = (
            [m for m in models if m.id == model_id and m.enabled and m.kind == "chat"]
            if model_id
            else []
        )
        if model_id and not chosen:
            # The model picked for this conversation was removed or switched off.
            log.warning("chosen model unavailable; using AUTO", model_id=model_id)
        ordered = chosen or auto_order(models, strength, self.health, needs)
        if needs and not ordered:
            raise LlmError(
                "no enabled model can handle this message (it needs: "
                f"{', '.join(needs)}); an administrator can mark one under Models",
                retriable=False,
                kind="no_capable_model",
            )
        candidates = []
        for m in ordered:
            try:
                candidates.append((m, await self.client_for(m.provider_id)))
            except SkaldError as exc:
                # One misconfigured provider must not take AUTO down with it.
                log.warning("model skipped", model=m.name, error=str(exc))

        async def record(outcome: Outcome) -> None:
            request_id = await self.store.record_request(
                at=time.time(),
                user_id=user_id,
                model_id=outcome.model.id,
                status=outcome.outcome,
                input_tokens=outcome.usage.input_tokens,
                output_tokens=outcome.usage.output_tokens,
                estimated=outcome.usage.estimated,
                latency_ms=(time.monotonic() - outcome.started) * 1000,
                error=None if outcome.error is None else str(outcome.error)[:500],
                cost_usd=outcome.usage.cost_usd,
                origin=origin,
            )
            if on_recorded is not None:
                try:
                    await on_recorded(request_id, outcome)
                except Exception as exc:  # a member's request log must not fail a turn
                    log.warning("request log not written", error=type(exc).__name__)
            if outcome.error is not None:
                log.warning(
                    "model failed", model=outcome.model.name, error=str(outcome.error)[:200]
                )

        return FallbackClient(candidates, self.health, record)

    # -- voice and pictures -----------------------------------------------------------

    async def _endpoint(self, provider_id: str) -> Endpoint:
        provider, sealed = await self.store.provider_with_key(provider_id)
        if provider.kind == "anthropic":
            raise LlmError(
                f"{provider.name}: Anthropic has no speech or picture models",
                retriable=False,
                kind="bad_request",
            )
        base = address(provider.kind, provider.base_url, self.types)
        if base is None:
            raise LlmError(f"no address for provider {provider.name!r}", retriable=False)
        api_key = self.key.open(sealed, _purpose(provider_id)) if sealed else None
        return Endpoint(name=provider.name, base_url=base, api_key=api_key)

    async def _media(
        self,
        user_id: str,
        kind: ModelKind,
        call: Callable[[ModelRow, Endpoint], Awaitable[T]],
    ) -> tuple[ModelRow, T]:
        """Run `call` on the models of `kind` in AUTO order, falling back on a retriable
        failure; every request gets its usage row (no tokens: these are not chats)."""
        ordered = auto_order(await self.models(), "average", self.health, kind=kind)
        if not ordered:
            raise LlmError(
                f"no {_KIND_WORDS[kind]} model is set up yet: an administrator can add one "
                "under Models",
                retriable=False,
                kind="no_model",
            )
        last: LlmError | None = None
        for model in ordered:
            started = time.monotonic()
            error: LlmError | None = None
            try:
                result = await call(model, await self._endpoint(model.provider_id))
            except LlmError as exc:
                error = exc
            await self.store.record_request(
                at=time.time(),
                user_id=user_id,
                model_id=model.id,
                status="finished" if error is None else "failed",
                input_tokens=0,
                output_tokens=0,
                latency_ms=(time.monotonic() - started) * 1000,
                error=None if error is None else str(error)[:500],
            )
            if error is None:
                self.health.succeeded(model.id)
                return model, result
            log.warning("model failed", model=model.name, error=str(error)[:200])
            if not error.retriable:
                raise error
            self.health.failed(model.id)
            last = error
        assert last is not None
        raise every_model_failed(last, f"{_KIND_WORDS[kind]} model")

    async def transcribe(
        self, user_id: str, audio: bytes, filename: str, content_type: str
    ) -> Transcript:
        """Speech to text with the household's transcription models (AUTO, fallback).
        For the chat's microphone and any channel's voice notes alike."""
        if not audio:
            raise InvalidInputError("the recording is empty")

        async def call(model: ModelRow, where: Endpoint) -> str:
            return await media.transcribe(
                self.http, where, model.model, audio, filename, content_type
            )

        model, text = await self._media(user_id, "transcription", call)
        return Transcript(text=text, model=model.name)

    async def speak(self, user_id: str, text: str) -> tuple[str, AsyncIterator[bytes]]:
        """Text to speech: the audio's content type and its bytes as they come."""
        if not text.strip():
            raise InvalidInputError("there is nothing to read aloud")

        async def call(model: ModelRow, where: Endpoint) -> tuple[str, AsyncIterator[bytes]]:
            return await media.speak(
                self.http, where, model.model, text, SPEECH_VOICE, SPEECH_FORMAT
            )

        return (await self._media(user_id, "speech", call))[1]

    async def generate_image(self, user_id: str, prompt: str, size: str) -> bytes:
        """One picture for `prompt` from the household's image models (AUTO, fallback)."""

        async def call(model: ModelRow, where: Endpoint) -> bytes:
            return await media.generate_image(self.http, where, model.model, prompt, size)

        return (await self._media(user_id, "image", call))[1]


class Transcript(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    model: str  # the household's name of the model that heard it


_KIND_WORDS: dict[ModelKind, str] = {
    "chat": "language",
    "transcription": "speech-to-text",
    "speech": "read-aloud",
    "image": "picture",
}
# OpenAI's default voice name (other servers ignore or map it) and a format every
# browser plays.
SPEECH_VOICE = "alloy"
SPEECH_FORMAT = "mp3"
