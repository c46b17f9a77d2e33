"""LLM providers and models in the registry. API keys arrive here already sealed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

import apsw
import msgspec

from skald.errors import ConflictError, NotFoundError
from skald.store.columns import Col, Columns
from skald.store.database import Database, change_one, fetch_one
from skald.store.registry import now_iso

Strength = Literal["low", "average", "high"]
ModelCapability = Literal["tools", "vision", "reasoning", "video"]
# What a model is for; AUTO picks among models of one kind only.
ModelKind = Literal["chat", "transcription", "speech", "image"]
MODEL_KINDS: tuple[ModelKind, ...] = ("chat", "transcription", "speech", "image")
# How much a chat model is given per turn: auto (compact for a small context window),
# the full prompt and every tool, or the compact profile (skald/core/model_profile.py).
PromptProfile = Literal["auto", "full", "compact"]


class ProviderRow(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    kind: str
    base_url: str | None
    has_api_key: bool
    created_at: str
    updated_at: str
    # Seconds of silence before a request fails; None: the kind's default.
    silence_timeout_s: int | None = None


class ModelRow(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    provider_id: str
    model: str  # the provider's own id, as it goes on the wire
    name: str  # the household's name for it
    strength: Strength
    capabilities: list[ModelCapability]
    priority: int
    enabled: bool
    created_at: str
    updated_at: str
    # Tokens: the longest answer it may write, and prompt + answer; None: unknown.
    max_output_tokens: int | None = None
    context_window: int | None = None
    kind: ModelKind = "chat"
    prompt_profile: PromptProfile = "auto"


class RequestRow(msgspec.Struct, frozen=True, kw_only=True):
    """One request to a model: counts and timings, never content."""

    at: float
    user_id: str
    model_id: str
    status: str  # finished | stopped | failed (before models v2: ok | error)
    input_tokens: int
    output_tokens: int
    estimated: bool
    latency_ms: float
    error: str | None


_PROVIDER = Columns(
    ProviderRow,
    "id",
    "name",
    "kind",
    "base_url",
    Col("has_api_key", sql="api_key_sealed IS NOT NULL", read=bool),
    "created_at",
    "updated_at",
    "silence_timeout_s",
)
_REQUEST = Columns(
    RequestRow,
    "at",
    "user_id",
    "model_id",
    "status",
    "input_tokens",
    "output_tokens",
    Col("estimated", read=bool),
    "latency_ms",
    "error",
)
_MODEL = Columns(
    ModelRow,
    "id",
    "provider_id",
    "model",
    "name",
    "strength",
    Col("capabilities", read=json.loads),
    "priority",
    Col("enabled", read=bool),
    "created_at",
    "updated_at",
    "max_output_tokens",
    "context_window",
    "kind",
    "prompt_profile",
)


def _unique(c: apsw.Connection, table: str, name: str, exclude_id: str | None) -> None:
    row = fetch_one(c, f"SELECT id FROM {table} WHERE name=? AND id IS NOT ?", (name, exclude_id))
    if row is not None:
        raise ConflictError(f"the name {name!r} is already taken")


class LlmStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        # Bumped after every write to the catalogue (providers, models, keys) has
        # committed, before the write returns: `LlmService` drops what it cached from
        # an older generation, so a changed key or a deleted provider is never used
        # by a turn set up after the call that changed it.
        self.generation = 0

    async def _write(self, fn: Callable[[apsw.Connection], None]) -> None:
        try:
            await self.db.transaction(fn)
        finally:
            self.generation += 1

    # -- providers ------------------------------------------------------------------

    async def providers(self) -> list[ProviderRow]:
        return await _PROVIDER.many(self.db, "FROM llm_providers ORDER BY name")

    async def provider(self, provider_id: str) -> ProviderRow:
        where = "FROM llm_providers WHERE id=?"
        return await _PROVIDER.one(self.db, where, (provider_id,), "no such provider")

    async def sealed_key(self, provider_id: str) -> str | None:
        r = await self.db.fetch_one(
            "SELECT api_key_sealed FROM llm_providers WHERE id=?", (provider_id,)
        )
        return None if r is None else r[0]

    async def provider_with_key(self, provider_id: str) -> tuple[ProviderRow, str | None]:
        """The provider and its sealed key, in one trip to the database thread."""
        r = await self.db.fetch_one(
            f"SELECT {_PROVIDER.names}, api_key_sealed FROM llm_providers WHERE id=?",
            (provider_id,),
        )
        if r is None:
            raise NotFoundError("no such provider")
        return _PROVIDER.row(r), r[len(_PROVIDER)]

    async def save_provider(
        self,
        provider_id: str,
        name: str,
        kind: str,
        base_url: str | None,
        sealed: str | None,
        *,
        create: bool,
        keep_key: bool = False,
        expect: ProviderRow | None = None,
        silence_timeout_s: int | None = None,
    ) -> ProviderRow:
        """Insert or update a provider. `expect`: the row as the caller read it; the
        update applies only if its kind, base URL and key presence are unchanged
        (ConflictError otherwise), so a kept key never follows a concurrent change of
        address, and a key set meanwhile never follows this one."""

        def q(c: apsw.Connection) -> None:
            _unique(c, "llm_providers", name, provider_id)
            stamp = now_iso()
            if create:
                c.execute(
                    "INSERT INTO llm_providers(id, name, kind, base_url, api_key_sealed, "
                    "created_at, updated_at, silence_timeout_s) VALUES (?,?,?,?,?,?,?,?)",
                    (provider_id, name, kind, base_url, sealed, stamp, stamp, silence_timeout_s),
                )
                return
            key_sql = "" if keep_key else ", api_key_sealed=?"
            params: tuple[Any, ...] = (
                (name, kind, base_url)
                + (() if keep_key else (sealed,))
                + (silence_timeout_s, stamp, provider_id)
            )
            where = " WHERE id=?"
            if expect is not None:
                where += " AND kind=? AND base_url IS ? AND (api_key_sealed IS NOT NULL)=?"
                params += (expect.kind, expect.base_url, int(expect.has_api_key))
            c.execute(
                f"UPDATE llm_providers SET name=?, kind=?, base_url=?{key_sql}, "
                f"silence_timeout_s=?, updated_at=?{where}",
                params,
            )
            if c.changes() == 0:
                if expect is not None and fetch_one(
                    c, "SELECT 1 FROM llm_providers WHERE id=?", (provider_id,)
                ):
                    raise ConflictError("the provider was changed meanwhile; try again")
                raise NotFoundError("no such provider")

        await self._write(q)
        return await self.provider(provider_id)

    async def delete_provider(self, provider_id: str) -> None:
        sql = "DELETE FROM llm_providers WHERE id=?"
        await self._write(lambda c: change_one(c, sql, (provider_id,), "no such provider"))

    # -- models ---------------------------------------------------------------------

    async def models(self) -> list[ModelRow]:
        return await _MODEL.many(self.db, "FROM llm_models ORDER BY priority, name")

    async def model(self, model_id: str) -> ModelRow:
        return await _MODEL.one(self.db, "FROM llm_models WHERE id=?", (model_id,), "no such model")

    async def save_model(self, row: ModelRow, *, create: bool) -> ModelRow:
        def q(c: apsw.Connection) -> None:
            if fetch_one(c, "SELECT 1 FROM llm_providers WHERE id=?", (row.provider_id,)) is None:
                raise NotFoundError("no such provider")
            _unique(c, "llm_models", row.name, row.id)
            values = (
                row.provider_id,
                row.model,
                row.name,
                row.strength,
                json.dumps(row.capabilities),
                row.priority,
                int(row.enabled),
                row.max_output_tokens or None,
                row.context_window or None,
                row.kind,
                row.prompt_profile,
                now_iso(),
            )
            if create:
                c.execute(
                    "INSERT INTO llm_models(id, provider_id, model, name, strength, capabilities, "
                    "priority, enabled, max_output_tokens, context_window, kind, prompt_profile, "
                    "created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (row.id, *values, values[-1]),
                )
                return
            change_one(
                c,
                "UPDATE llm_models SET provider_id=?, model=?, name=?, strength=?, capabilities=?, "
                "priority=?, enabled=?, max_output_tokens=?, context_window=?, kind=?, "
                "prompt_profile=?, updated_at=? WHERE id=?",
                (*values, row.id),
                "no such model",
            )

        await self._write(q)
        return await self.model(row.id)

    async def delete_model(self, model_id: str) -> None:
        sql = "DELETE FROM llm_models WHERE id=?"
        await self._write(lambda c: change_one(c, sql, (model_id,), "no such model"))

    async def record_request(
        self,
        *,
        at: float,
        user_id: str,
        model_id: str,
        status: str,
        input_tokens: int,
        output_tokens: int,
        latency_ms: float,
        error: str | None,
        estimated: bool = False,
        cost_usd: float | None = None,
        origin: str | None = None,
    ) -> int:
        """One row per request to a model. `status`: finished, stopped or failed;
        `estimated`: a token count is Skald's estimate (the server reported none);
        `cost_usd`: as the provider reported it (None: not reported); `origin`: the
        conversation the request served. The usage feature's trigger adds the row to
        its hourly aggregate in the same transaction. Returns the row's id."""
        row = (
            at,
            user_id,
            model_id,
            status,
            input_tokens,
            output_tokens,
            int(estimated),
            latency_ms,
            error,
            cost_usd,
            origin,
        )

        def q(c: apsw.Connection) -> int:
            c.execute(
                "INSERT INTO llm_requests(at, user_id, model_id, status, input_tokens, "
                "output_tokens, estimated, latency_ms, error, cost_usd, origin) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                row,
            )
            return int(c.last_insert_rowid())

        return await self.db.transaction(q)

    async def requests(self, limit: int = 1000) -> list[RequestRow]:
        """The latest request records, newest first."""
        return await _REQUEST.many(self.db, "FROM llm_requests ORDER BY id DESC LIMIT ?", (limit,))
