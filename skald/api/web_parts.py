"""The web files of features and plugins, and the translations collected from them.

Rule: each `WebFiles` folder's `web/` is served under `/plugins/<name>/` exactly like the
app's own static files (public, revalidated by ETag: code and icons are no secret, the
data routes have their guards), and `/i18n/<locale>.json` is the merged catalogue of
`skald.plugins.web` (the URL the app always fetched, so the service worker keeps it for
the offline shell). Trap: these are not under `/api/`, so the access walk of
`tests/test_api_access.py` counts them with the static files (`opt={"public": True}`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from litestar import Request, Response, get
from litestar.datastructures import CacheControlHeader
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.static_files import create_static_files_router

from skald.api.errors import error_response
from skald.plugins.specs import WebFiles
from skald.plugins.web import Catalogues

_NO_CACHE = CacheControlHeader(no_cache=True).to_header()


@get("/i18n/{name:str}", opt={"public": True}, include_in_schema=False)
async def translations(
    name: FromPath[str], request: Request[Any, Any, Any], catalogues: NamedDependency[Catalogues]
) -> Response[Any]:
    """`en.json`, `it.json`, `fr.json`: the app shell's keys and every feature's."""
    locale, dot, ext = name.partition(".")
    body = catalogues.body(locale) if (dot, ext) == (".", "json") else None
    if body is None:
        return error_response(404, "not_found", "There are no translations of that name.")
    etag = catalogues.etag(locale)
    headers = {"ETag": etag, "Cache-Control": _NO_CACHE}
    if request.headers.get("if-none-match") == etag:
        return Response(b"", status_code=304, headers=headers)
    return Response(body, media_type="application/json; charset=utf-8", headers=headers)


def static_routers(parts: Sequence[WebFiles]) -> list[Any]:
    """One static router per folder that has a `web/` (a translations-only one has not)."""
    return [
        create_static_files_router(
            path=f"/plugins/{part.name}",
            directories=[part.folder / "web"],
            opt={"public": True},
            cache_control=CacheControlHeader(no_cache=True),
            include_in_schema=False,
        )
        for part in parts
        if (part.folder / "web").is_dir()
    ]
