"""The Plugins page's API (`plugin.manage`): list, install from uploaded wheels,
uninstall (and purge), switch on and off, settings, and who may use each plugin; and
the catch-all under `/api/plugin/<id>/` that answers for a plugin with no live route.

Rule: a switch, a grant or a setting is written to the registry and applied to the
running set (`Plugins.switches`) before the answer, so the next request and the next
turn see it; installing or uninstalling changes the folder on disk, loaded at the next
start (the list says `restart` until then).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any, Literal

import msgspec
from litestar import Response, delete, get, post, put, route
from litestar.datastructures import UploadFile
from litestar.di import NamedDependency
from litestar.enums import HttpMethod
from litestar.params import FromPath, FromQuery, JSONBody

from skald.api.deps import AnyRequest, group, requires
from skald.api.errors import error_response
from skald.api.openapi import errors
from skald.errors import InvalidInputError, NotFoundError
from skald.features.plugins import install as wheels
from skald.features.plugins.settings_form import Field, check, fields
from skald.plugins.facade import Member, Server
from skald.plugins.switches import PLUGIN_MANAGE
from skald.store.plugins import PluginStore, save_member_settings

# The guard of the group in ROUTES.
GUARD = [requires(PLUGIN_MANAGE)]
MAX_UPLOAD = 64 * 1024 * 1024
NO_CACHE = {"Cache-Control": "no-cache"}

Status = Literal["ok", "off", "failed", "trouble", "restart", "removed"]


class PluginView(msgspec.Struct, kw_only=True):
    id: str
    source: str  # "wheel" (installed here), "package", "config" (config.toml), "" (gone)
    module: str
    version: str | None
    enabled: bool
    status: Status  # the health dot: ok, off, failed (to load), trouble (a hook raised)...
    error: str | None  # why it failed, or its last hook failure (administrators only)
    installed: bool  # its folder is in the data directory (a wheel)
    settings: bool  # it has a settings form
    granted: int  # members holding a grant


class Installed(msgspec.Struct, kw_only=True):
    id: str
    version: str
    restart_required: bool  # loaded at the next start


class Switch(msgspec.Struct, kw_only=True):
    enabled: bool


class SettingsView(msgspec.Struct, kw_only=True):
    fields: list[Field]
    values: dict[str, Any]  # section -> the values in force


class SettingsIn(msgspec.Struct, kw_only=True):
    values: dict[str, Any]


class Access(msgspec.Struct, kw_only=True):
    user_id: str
    username: str
    display_name: str
    role: str
    granted: bool
    implicit: bool  # holds plugin.manage: reaches every plugin


class GrantIn(msgspec.Struct, kw_only=True):
    granted: bool


def _status(server: Server, pid: str, enabled: bool, installed: bool) -> tuple[Status, str | None]:
    sw = server.plugins.switches
    loaded = sw.known.get(pid)
    if loaded is None:
        return ("restart" if installed else "removed"), None
    if loaded.source == "wheel" and not installed:
        return "restart", None  # uninstalled, still loaded until the next start
    if loaded.error is not None:
        return "failed", loaded.error
    if not enabled:
        return "off", None
    trouble = sw.runtime_error(pid)
    return ("trouble", trouble) if trouble else ("ok", None)


async def _views(server: Server) -> list[PluginView]:
    store = PluginStore(server.db)
    snapshot = await store.snapshot()
    on_disk = await asyncio.to_thread(_installed_ids, server.layout.plugins_dir)
    ids = sorted(set(server.plugins.switches.known) | set(snapshot.settings) | on_disk)
    out = []
    for pid in ids:
        loaded = server.plugins.switches.known.get(pid)
        enabled = pid not in snapshot.off
        status, error = _status(server, pid, enabled, pid in on_disk)
        out.append(
            PluginView(
                id=pid,
                source=loaded.source if loaded else ("wheel" if pid in on_disk else ""),
                module=loaded.module if loaded else "",
                version=loaded.version if loaded else None,
                enabled=enabled,
                status=status,
                error=error,
                installed=pid in on_disk,
                settings=bool(server.plugins.sections_of(pid)),
                granted=len(snapshot.grants.get(pid, ())),
            )
        )
    return out


def _installed_ids(folder: Path) -> set[str]:
    if not folder.is_dir():
        return set()
    return {p.name for p in folder.iterdir() if p.is_dir() and wheels.PLUGIN_ID.fullmatch(p.name)}


async def _require(server: Server, pid: str) -> PluginView:
    for view in await _views(server):
        if view.id == pid:
            return view
    raise NotFoundError(f"no plugin named {pid!r}")


@get("/api/plugins")
async def list_plugins(server: NamedDependency[Server]) -> list[PluginView]:
    """Every plugin: loaded, failed, or installed and waiting for the next start."""
    return await _views(server)


@post("/api/plugins", status_code=201, request_max_body_size=MAX_UPLOAD, responses=errors(400, 413))
async def install_plugin(server: NamedDependency[Server], request: AnyRequest) -> Installed:
    """Install a plugin from its wheel and, optionally, wheels of its dependencies
    (multipart, one or more files). Refused, with the list, when a dependency is
    neither installed nor uploaded. Loaded at the next start."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise InvalidInputError("send the wheels as multipart/form-data (field `data`)")
    form = await request.form()
    data = [v for _, v in form.multi_items() if isinstance(v, UploadFile)]
    if not data:
        raise InvalidInputError("no file in the upload (send the wheels in the field `data`)")
    with tempfile.TemporaryDirectory(prefix="skald-plugin-") as tmp:
        paths = []
        for i, upload in enumerate(data):
            body = await upload.read()
            path = Path(tmp) / f"{i}.whl"
            await asyncio.to_thread(path.write_bytes, body)
            paths.append((path, Path(upload.filename or "upload").name))
        plan = await asyncio.to_thread(wheels.inspect_upload, paths)
        await asyncio.to_thread(wheels.install, plan, server.layout.plugins_dir)
    await PluginStore(server.db).ensure([plan.id])
    await server.plugins.refresh(server.db)
    return Installed(id=plan.id, version=plan.plugin.version, restart_required=True)


@delete("/api/plugins/{pid:str}", responses=errors(404))
async def uninstall_plugin(
    server: NamedDependency[Server], pid: FromPath[str], purge: FromQuery[bool] = False
) -> None:
    """Remove an installed plugin's files (gone at the next start; switched off now).
    Its settings and grants stay unless `purge`."""
    view = await _require(server, pid)
    store = PluginStore(server.db)
    if view.installed:
        await asyncio.to_thread(wheels.uninstall, server.layout.plugins_dir, pid)
        await store.set_enabled(pid, False)
        server.plugins.switches.set_enabled(pid, False)
    elif not purge:
        raise InvalidInputError(
            "only a plugin installed here can be removed (purge its data instead)"
        )
    if purge:
        await store.purge(pid)
        await server.plugins.refresh(server.db)


@put("/api/plugins/{pid:str}/enabled", responses=errors(404))
async def switch_plugin(
    server: NamedDependency[Server], pid: FromPath[str], data: JSONBody[Switch]
) -> PluginView:
    """Switch a plugin on or off, at once: its routes, tools, pages, prompt blocks,
    channels and services follow from the next request or turn."""
    await _require(server, pid)
    await PluginStore(server.db).set_enabled(pid, data.enabled)
    server.plugins.switches.set_enabled(pid, data.enabled)
    return await _require(server, pid)


@get("/api/plugins/{pid:str}/settings", responses=errors(404))
async def get_settings(server: NamedDependency[Server], pid: FromPath[str]) -> SettingsView:
    """The plugin's settings form (from its config struct) and the values in force."""
    await _require(server, pid)
    return _settings_view(server, pid)


def _settings_view(server: Server, pid: str) -> SettingsView:
    sections = server.plugins.sections_of(pid)
    values = {name: msgspec.to_builtins(server.section(name, st)) for name, st in sections.items()}
    return SettingsView(fields=fields(sections), values=values)


@put("/api/plugins/{pid:str}/settings", responses=errors(400, 404))
async def put_settings(
    server: NamedDependency[Server], pid: FromPath[str], data: JSONBody[SettingsIn]
) -> SettingsView:
    """Save the plugin's settings (checked by its struct); used from the next turn."""
    await _require(server, pid)
    sections = server.plugins.sections_of(pid)
    if not sections:
        raise InvalidInputError("this plugin has no settings (or is not loaded)")
    values = {**server.plugins.switches.settings(pid), **check(sections, data.values)}
    await PluginStore(server.db).set_settings(pid, values)
    server.plugins.switches.set_settings(pid, values)
    return _settings_view(server, pid)


@get("/api/plugins/{pid:str}/access", responses=errors(404))
async def get_access(server: NamedDependency[Server], pid: FromPath[str]) -> list[Access]:
    """Every member, and whether they may use the plugin."""
    await _require(server, pid)
    rows = await PluginStore(server.db).access(pid)
    return [
        Access(
            user_id=r[0],
            username=r[1],
            display_name=r[2],
            role=r[3],
            granted=bool(r[4]),
            implicit=PLUGIN_MANAGE.name in r[5],
        )
        for r in rows
    ]


@put("/api/plugins/{pid:str}/access/{user_id:str}", status_code=204, responses=errors(404))
async def put_access(
    server: NamedDependency[Server],
    pid: FromPath[str],
    user_id: FromPath[str],
    data: JSONBody[GrantIn],
) -> None:
    """Grant or take back one member's use of the plugin (in force at once)."""
    await _require(server, pid)
    store = PluginStore(server.db)
    if not await store.user_exists(user_id):
        raise NotFoundError("no such member")
    await store.grant(pid, user_id, data.granted)
    server.plugins.switches.set_grant(pid, user_id, data.granted)


async def _mine_sections(member: Member, pid: str) -> dict[str, type[msgspec.Struct]]:
    """The plugin's member settings, when it reaches this member (else 404)."""
    plugins = member.server.plugins
    await plugins.refresh(member.server.db)
    sections = plugins.member_sections_of(pid)
    reached = plugins.switches.reaches(pid, member.id, member.can(PLUGIN_MANAGE))
    if not sections or not reached:
        raise NotFoundError(f"no plugin {pid!r} with settings of yours")
    return sections


async def _mine_view(member: Member, sections: dict[str, type[msgspec.Struct]]) -> SettingsView:
    values = {n: msgspec.to_builtins(await member.settings(n, st)) for n, st in sections.items()}
    return SettingsView(fields=fields(sections), values=values)


@get("/api/plugins/{pid:str}/mine", responses=errors(404))
async def get_mine(member: NamedDependency[Member], pid: FromPath[str]) -> SettingsView:
    """The caller's own settings of a plugin (kept in their own database: nobody else,
    administrators included, reads them)."""
    return await _mine_view(member, await _mine_sections(member, pid))


@put("/api/plugins/{pid:str}/mine", responses=errors(400, 404))
async def put_mine(
    member: NamedDependency[Member], pid: FromPath[str], data: JSONBody[SettingsIn]
) -> SettingsView:
    """Save the caller's own settings of a plugin (checked by its struct)."""
    sections = await _mine_sections(member, pid)
    for section, values in check(sections, data.values).items():
        await save_member_settings(member.db, section, values)
    return await _mine_view(member, sections)


@route(
    "/api/plugin/{pid:str}/{rest:path}",
    http_method=[
        HttpMethod.GET,
        HttpMethod.POST,
        HttpMethod.PUT,
        HttpMethod.PATCH,
        HttpMethod.DELETE,
    ],
    responses=errors(404, 503),
    include_in_schema=False,
)
async def plugin_fallback(
    server: NamedDependency[Server], pid: FromPath[str], rest: FromPath[Path]
) -> Response[Any]:
    """A plugin's address with no live route: a plugin that failed (and is switched on)
    says why with 503; anything else is 404."""
    reason = server.plugins.switches.failed(pid)
    if reason is not None and await PluginStore(server.db).enabled(pid):
        why = f"the plugin {pid!r} failed to load: {reason}"
        return error_response(503, "plugin_failed", why, NO_CACHE)
    return error_response(404, "not_found", f"no plugin {pid!r} serves {rest}", NO_CACHE)


ROUTES = [
    group(
        list_plugins,
        install_plugin,
        uninstall_plugin,
        switch_plugin,
        get_settings,
        put_settings,
        get_access,
        put_access,
        guards=GUARD,
    ),
    get_mine,
    put_mine,
    plugin_fallback,
]
