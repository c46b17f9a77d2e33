"""API tokens (their table, routes, config section, service and authenticator) and
the OpenAI-compatible `/v1` they open (`openai/`, its threads in the owner database)."""

from __future__ import annotations

import msgspec

from skald.plugins import hookimpl
from skald.plugins.facade import Server
from skald.plugins.specs import Authenticator, FeatureWeb, lazy_routes
from skald.store.migrations import Feature


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    from skald.features.tokens.openai.threads import FEATURE as THREADS
    from skald.features.tokens.store import FEATURE

    return [FEATURE] if schema == "registry" else [THREADS]


@hookimpl
def skald_config_sections() -> dict[str, type[msgspec.Struct]]:
    from skald.features.tokens.service import TokensConfig

    return {"tokens": TokensConfig}


@hookimpl
def skald_server_state(server: Server) -> list[object]:
    from skald.features.tokens.service import TokensConfig, TokenService, hash_key
    from skald.features.tokens.store import TokenStore

    key = hash_key(server.layout.instance_key)  # a 32-byte file: read once at start
    return [TokenService(TokenStore(server.db), key, server.section("tokens", TokensConfig))]


@hookimpl
def skald_authenticators(server: Server) -> list[Authenticator]:
    from skald.features.tokens.auth import TokenAuthenticator

    return [TokenAuthenticator(server)]


skald_routes = lazy_routes("skald.features.tokens.routes", "skald.features.tokens.openai.routes")


# The profile's API tokens card (accounts' profile.js imports it) and its words.
WEB = FeatureWeb(__file__, "tokens")
skald_web_files = WEB.skald_web_files
