"""The web pages and navigation entries the caller may see, from the pages hook."""

from __future__ import annotations

from litestar import get
from litestar.di import NamedDependency

from skald.api.deps import AnyRequest
from skald.api.security import principal_of
from skald.core.runtime import Runtime
from skald.core.sessions import Principal
from skald.permissions import named
from skald.plugins.specs import Page


@get("/api/pages")
async def list_pages(request: AnyRequest, rt: NamedDependency[Runtime]) -> list[Page]:
    """Pages of every feature whose capability the caller's role holds; the simple
    (children's) shell gets only those marked for it."""
    principal = principal_of(request)
    simple = principal.role.attributes.ui_mode == "simple"
    return [
        p
        for p in rt.plugins.pages()
        if _may_see(principal, p.capability) and (p.simple_ok or not simple)
    ]


def _may_see(principal: Principal, capability: str | None) -> bool:
    # A page naming a capability nobody declared is hidden (deny by default).
    if capability is None:
        return True
    cap = named(capability)
    return cap is not None and principal.can(cap)


ROUTES = [list_pages]
