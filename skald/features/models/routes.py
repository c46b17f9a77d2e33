"""Providers and models (capability `admin.models`); the model list for the chat picker."""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from skald.api.deps import group, requires
from skald.api.openapi import errors
from skald.core.llm_service import ADMIN_MODELS_CAP, KindInfo
from skald.llm.discovery import ListedModel, ProviderCheck
from skald.llm.provider_types import with_scheme
from skald.permissions import CHAT as CHAT_CAP
from skald.plugins.facade import Server  # Litestar reads the annotations
from skald.store.llm import (
    ModelCapability,
    ModelKind,
    ModelRow,
    PromptProfile,
    ProviderRow,
    Strength,
)

# ADMIN_MODELS: the guard of the group in ROUTES (every route but `/api/models`, CHAT's).
ADMIN_MODELS = [requires(ADMIN_MODELS_CAP)]
CHAT = [requires(CHAT_CAP)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=80)]
# http(s)://, or no scheme at all (`with_scheme` adds one); never another scheme.
Url = Annotated[
    str, msgspec.Meta(pattern=r"^(?:https?://)?(?![A-Za-z][A-Za-z0-9+.-]*://)[^\s]{1,500}$")
]
Secret = Annotated[str, msgspec.Meta(min_length=1, max_length=2000)]
WireId = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Priority = Annotated[int, msgspec.Meta(ge=0, le=100_000)]
# Seconds of silence before a request fails (0 on a change: back to the kind's default).
Silence = Annotated[int, msgspec.Meta(ge=0, le=3600)]
# Tokens (0 on a change: unknown again, Skald's defaults apply).
Tokens = Annotated[int, msgspec.Meta(ge=0, le=100_000_000)]


class ProviderIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Name
    kind: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    base_url: Url | None = None
    api_key: Secret | None = None
    silence_timeout_s: Silence | None = None


class ProviderPatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Name | None = None
    kind: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    base_url: Url | None = None
    api_key: Secret | None = None
    clear_api_key: bool = False
    silence_timeout_s: Silence | None = None


class ModelIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    provider_id: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    model: WireId
    name: Name
    strength: Strength = "average"
    capabilities: list[ModelCapability] = msgspec.field(default_factory=lambda: ["tools"])
    priority: Priority = 100
    enabled: bool = True
    max_output_tokens: Tokens | None = None
    context_window: Tokens | None = None
    # chat, or transcription / speech / image (voice and pictures; AUTO per kind).
    kind: ModelKind = "chat"
    # auto: the compact profile when the context window is small (model_profile.py).
    prompt_profile: PromptProfile = "auto"


class ModelPatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    provider_id: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    model: WireId | None = None
    name: Name | None = None
    strength: Strength | None = None
    capabilities: list[ModelCapability] | None = None
    priority: Priority | None = None
    enabled: bool | None = None
    max_output_tokens: Tokens | None = None
    context_window: Tokens | None = None
    kind: ModelKind | None = None
    prompt_profile: PromptProfile | None = None


class ProviderKinds(msgspec.Struct, frozen=True, kw_only=True):
    kinds: list[str]
    # The same kinds with friendly names and address defaults, in the order to offer them.
    details: list[KindInfo] = []


class ConnectionIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Test connection before saving a provider."""

    kind: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    base_url: Url | None = None
    api_key: Secret | None = None


class ProviderTestIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # The wire id to ask; absent: the provider's first enabled model (or only its list).
    model: WireId | None = None


class ChatModel(msgspec.Struct, frozen=True, kw_only=True):
    """What a member may see of a model: no provider, no URL, no key."""

    id: str
    name: str
    strength: Strength
    capabilities: list[ModelCapability]


@get("/api/llm/kinds")
async def list_kinds(server: NamedDependency[Server]) -> ProviderKinds:
    return ProviderKinds(kinds=server.llm.kinds(), details=server.llm.kind_info())


@post("/api/llm/check", status_code=200, responses=errors(400))
async def check_connection(
    data: JSONBody[ConnectionIn], server: NamedDependency[Server]
) -> ProviderCheck:
    """Test connection: the provider's models list (with guessed capabilities), before
    anything is saved. An unreachable server or a refused key is `ok: false`, not an error."""
    return await server.llm.check_new(data.kind, with_scheme(data.base_url), data.api_key)


@post("/api/llm/providers/{provider_id:str}/test", status_code=200, responses=errors(404))
async def test_provider(
    provider_id: FromPath[str], data: JSONBody[ProviderTestIn], server: NamedDependency[Server]
) -> ProviderCheck:
    """Test this provider: its models list and a tiny real request (a few tokens)."""
    return await server.llm.check_provider(provider_id, data.model)


@get("/api/llm/providers")
async def list_providers(server: NamedDependency[Server]) -> list[ProviderRow]:
    return await server.llm.store.providers()


@post("/api/llm/providers", status_code=201, responses=errors(409))
async def create_provider(
    data: JSONBody[ProviderIn], server: NamedDependency[Server]
) -> ProviderRow:
    return await server.llm.add_provider(
        data.name, data.kind, with_scheme(data.base_url), data.api_key, data.silence_timeout_s
    )


@patch("/api/llm/providers/{provider_id:str}", responses=errors(409))
async def patch_provider(
    provider_id: FromPath[str], data: JSONBody[ProviderPatch], server: NamedDependency[Server]
) -> ProviderRow:
    return await server.llm.update_provider(
        provider_id,
        data.name,
        data.kind,
        with_scheme(data.base_url),
        data.api_key,
        data.clear_api_key,
        data.silence_timeout_s,
    )


@get("/api/llm/providers/{provider_id:str}/models", responses=errors(404))
async def provider_models(
    provider_id: FromPath[str], server: NamedDependency[Server]
) -> list[ListedModel]:
    """The provider's own model list, with the limits it reports (a real request)."""
    return await server.llm.provider_models(provider_id)


@delete("/api/llm/providers/{provider_id:str}", status_code=204)
async def delete_provider(provider_id: FromPath[str], server: NamedDependency[Server]) -> None:
    await server.llm.store.delete_provider(provider_id)


@get("/api/llm/models")
async def list_models(server: NamedDependency[Server]) -> list[ModelRow]:
    return await server.llm.store.models()


@post("/api/llm/models", status_code=201, responses=errors(404, 409))
async def create_model(data: JSONBody[ModelIn], server: NamedDependency[Server]) -> ModelRow:
    return await server.llm.add_model(
        data.provider_id,
        data.model,
        data.name,
        data.strength,
        list(data.capabilities),
        data.priority,
        data.enabled,
        data.max_output_tokens,
        data.context_window,
        data.kind,
        data.prompt_profile,
    )


@patch("/api/llm/models/{model_id:str}", responses=errors(409))
async def patch_model(
    model_id: FromPath[str], data: JSONBody[ModelPatch], server: NamedDependency[Server]
) -> ModelRow:
    current = await server.llm.store.model(model_id)
    changes: dict[str, object] = {
        k: v for k, v in msgspec.structs.asdict(data).items() if v is not None
    }
    for limit in ("max_output_tokens", "context_window"):
        if changes.get(limit) == 0:
            changes[limit] = None  # back to unknown
    return await server.llm.store.save_model(
        msgspec.structs.replace(current, **changes), create=False
    )


@delete("/api/llm/models/{model_id:str}", status_code=204)
async def delete_model(model_id: FromPath[str], server: NamedDependency[Server]) -> None:
    await server.llm.store.delete_model(model_id)


@get("/api/models", guards=CHAT)
async def chat_models(server: NamedDependency[Server]) -> list[ChatModel]:
    return [
        ChatModel(id=m.id, name=m.name, strength=m.strength, capabilities=m.capabilities)
        for m in await server.llm.store.models()
        if m.enabled and m.kind == "chat"
    ]


ROUTES = [
    group(
        list_kinds,
        check_connection,
        test_provider,
        list_providers,
        create_provider,
        patch_provider,
        provider_models,
        delete_provider,
        list_models,
        create_model,
        patch_model,
        delete_model,
        guards=ADMIN_MODELS,
    ),
    chat_models,
]
