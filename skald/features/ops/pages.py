"""The web pages and navigation entries the caller may see, from the pages hook."""

from __future__ import annotations

import msgspec
from litestar import get
from litestar.di import NamedDependency

from skald.api.deps import AuthRequest
from skald.core.sessions import Principal
from skald.permissions import named
from skald.plugins.facade import Server  # Litestar reads the annotations
from skald.plugins.specs import Page


@get("/api/pages")
async def list_pages(request: AuthRequest, server: NamedDependency[Server]) -> list[Page]:
    """Pages of every feature whose capability the caller's role holds; the simple
    (children's) shell gets only those marked for it."""
    principal = request.user
    simple = principal.role.attributes.ui_mode == "simple"
    # A plugin switched off or not granted to the caller shows no page (read now).
    await server.plugins.refresh(server.db)
    pages = server.plugins.pages(principal.user.id, principal.role)
    return [p for p in pages if _shown(principal, simple, p)]


class HiddenPage(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    full_only: bool  # the simple shell is sent home rather than told "not allowed"


@get("/api/pages/hidden")
async def hidden_pages(request: AuthRequest, server: NamedDependency[Server]) -> list[HiddenPage]:
    """The pages the caller may not see whose address answers "not allowed" rather than
    "not found" (`Page.say_not_allowed`: the built-in ones), so the app refuses politely
    without a table of its own."""
    principal = request.user
    simple = principal.role.attributes.ui_mode == "simple"
    return [
        HiddenPage(path=p.path, full_only=p.full_only)
        for p in server.plugins.pages()
        if p.say_not_allowed and not _shown(principal, simple, p)
    ]


def _shown(principal: Principal, simple: bool, page: Page) -> bool:
    return _may_see(principal, page.capability) and (page.simple_ok or not simple)


def _may_see(principal: Principal, capability: str | None) -> bool:
    # A page naming a capability nobody declared is hidden (deny by default).
    if capability is None:
        return True
    cap = named(capability)
    return cap is not None and principal.can(cap)


ROUTES = [list_pages, hidden_pages]
