"""API tokens (their table, routes, config section, service and authenticator) and
the OpenAI-compatible `/v1` they open (`openai/`, its threads in the owner database)."""

from __future__ import annotations

from skald.plugins import hookimpl, lazy
from skald.plugins.facade import Server
from skald.plugins.specs import FeatureWeb

skald_migrations = lazy.migrations(
    registry=("skald.features.tokens.store:FEATURE",),
    owner=("skald.features.tokens.openai.threads:FEATURE",),
)


skald_config_sections = lazy.config_section("tokens", "skald.features.tokens.service:TokensConfig")


@hookimpl
def skald_server_state(server: Server) -> list[object]:
    from skald.features.tokens.service import TokensConfig, TokenService, hash_key
    from skald.features.tokens.store import TokenStore

    key = hash_key(server.layout.instance_key)  # a 32-byte file: read once at start
    return [TokenService(TokenStore(server.db), key, server.section("tokens", TokensConfig))]


skald_authenticators = lazy.built_with_server("skald.features.tokens.auth:TokenAuthenticator")


skald_routes = lazy.routes("skald.features.tokens.routes", "skald.features.tokens.openai.routes")


# The profile's API tokens card (accounts' profile.js imports it) and its words.
WEB = FeatureWeb(__file__, "tokens")
skald_web_files = WEB.skald_web_files
