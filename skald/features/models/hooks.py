"""Models: LLM providers and models, and what was asked of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.plugins import hookimpl, lazy
from skald.plugins.specs import FeatureWeb

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.plugins.facade import Member


skald_migrations = lazy.migrations(registry=("skald.store.migrations.registry:MODELS",))


skald_routes = lazy.routes("skald.features.models.routes", "skald.features.models.voice")


@hookimpl
def skald_tools(member: Member) -> list[Tool]:
    # Offered only while an image model is enabled (its schema costs every request ~90
    # tokens); the catalogue is the one this turn's model choice just read.
    from skald.features.models.pictures import GenerateImageTool

    return [GenerateImageTool(member)] if member.server.llm.offers("image") else []


WEB = FeatureWeb(__file__, "models")
WEB.page("/admin/models", "AdminModelsPage", capability="admin.models", order=140, icon="cpu")
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files


skald_capabilities = lazy.capabilities("skald.core.llm_service:ADMIN_MODELS_CAP")
