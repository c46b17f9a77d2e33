"""Chat: conversations and their history, the chat API and the event socket; the
placeholders the shipped agents use before their features exist (reserved here)."""

from __future__ import annotations

from skald.core.prompt_blocks import RESERVED_PLACEHOLDERS
from skald.plugins import hookimpl, lazy
from skald.plugins.specs import FeatureWeb

skald_migrations = lazy.migrations(owner=("skald.store.migrations.owner:CHAT",))


skald_routes = lazy.routes("skald.features.chat.routes")


WEB = FeatureWeb(__file__, "chat")
WEB.page(
    "/",
    "ChatPage",
    module="chat.js",
    title="nav.chat",
    capability="chat",
    simple_ok=True,
    order=10,
    icon="chat",
    testid="nav-home",
    flush=True,
)
WEB.page("/overview", "HomePage", module="home.js", order=30, icon="home", full_only=True)
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files


skald_capabilities = lazy.capabilities("skald.features.chat.routes:CHAT_CAP")


@hookimpl
def skald_placeholders() -> dict[str, str]:
    # Known (agents may use them) but filled by no feature yet: they render empty.
    return dict(RESERVED_PLACEHOLDERS)
