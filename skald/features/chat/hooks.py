"""Chat: conversations and their history, the chat API and the event socket; the
placeholders the shipped agents use before their features exist (reserved here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.core.prompt_blocks import RESERVED_PLACEHOLDERS
from skald.plugins import hookimpl
from skald.plugins.specs import FeatureWeb, lazy_routes
from skald.store.migrations import Feature
from skald.store.migrations.owner import CHAT

if TYPE_CHECKING:
    from skald.permissions import Capability


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    return [CHAT] if schema == "owner" else []


skald_routes = lazy_routes("skald.features.chat.routes")


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


@hookimpl
def skald_capabilities() -> list[Capability]:
    # Importing the module that enforces a capability declares it.
    from skald.features.chat.routes import CHAT_CAP

    return [CHAT_CAP]


@hookimpl
def skald_placeholders() -> dict[str, str]:
    # Known (agents may use them) but filled by no feature yet: they render empty.
    return dict(RESERVED_PLACEHOLDERS)
