"""The capability catalogue walk: every capability the code declares guards something (a
route, a tool, a page or a named behaviour), a role without it is refused there and a
role with it gets through; the ones no feature checks yet are reserved for a named issue
and grant nothing."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from conftest import PASSWORD, Client, MakeClient
from litestar.handlers import HTTPRouteHandler
from sandbox_support import with_sandbox_fixture  # noqa: F401

from skald.api.app import create_app
from skald.api.deps import Requires
from skald.core.runtime import Runtime
from skald.core.user_runtime import UserRuntime
from skald.permissions import Capability, can, declare, declared
from skald.plugins.manager import Plugins
from skald.store.rows import Role, RoleAttributes

# The features declare what they enforce when their plugin is collected (as at start-up).
Plugins.builtin().capabilities()

WEB = Path(__file__).resolve().parent.parent / "web" / "js"

# Declared but checked by nothing yet: kept so administrators' role edits survive until
# the feature lands (removing them by a migration would lose those edits). Adding to
# this list is a decision: name the issue that will enforce it.
RESERVED = {}
# Pages of the web UI and the capability each needs (the pages hook, `GET /api/pages`;
# the web app's navigation and router take them from there).
PAGES = {
    "/": "chat",
    "/inbox": "inbox",
    "/files": "files",
    "/tasks": "schedule.use",
    "/agents": "chat",
    "/admin/users": "admin.users",
    "/admin/roles": "admin.roles",
    "/admin/approvals": "admin.roles",
    "/admin/models": "admin.models",
    "/admin/settings": "admin.system",
    "/welcome": "admin.system",
    "/admin/backups": "admin.system",
    "/connectors": "connectors.use",
    "/admin/marketplace": "admin.connectors",
    "/admin/sign-in-providers": "admin.connectors",
    "/telegram": "telegram.use",
    "/admin/telegram": "admin.system",
    "/admin/shared-folders": "folders.manage",
    "/projects": "projects.use",
    "/skills": "files",
    "/admin/plugins": "plugin.manage",
}


def _concrete(path: str) -> str:
    # An int parameter gets a number, or the router answers 404 before any guard runs.
    return re.sub(r"\{[^}]+\}", "x1", re.sub(r"\{[^}:]+:int\}", "1", path))


def _guarded_routes(runtime: Runtime) -> list[tuple[str, str, frozenset[str]]]:
    """(method, path, capability names any of which opens it) for every guarded route."""
    out = []
    for route in create_app(runtime).routes:
        for handler in getattr(route, "route_handlers", []):
            if not isinstance(handler, HTTPRouteHandler):
                continue
            caps = frozenset(
                c.name
                for guard in handler.guards or []
                if isinstance(guard, Requires)
                for c in guard.capabilities
            )
            if caps:
                out.extend(
                    (m, route.path, caps)
                    for m in sorted(handler.http_methods)
                    if m not in ("HEAD", "OPTIONS")
                )
    return out


def _pages() -> dict[str, str]:
    return {p.path: p.capability for p in Plugins.builtin().pages() if p.capability is not None}


async def _member_with(runtime: Runtime, make_client: MakeClient, name: str, caps: set[str]):  # type: ignore[no-untyped-def]
    """A role holding exactly `caps` (unencrypted: no key work), a member in it, signed in."""
    await runtime.core.registry.save_role(
        Role(
            name=name,
            display_name=name,
            builtin=False,
            capabilities=sorted(caps),
            attributes=RoleAttributes(encrypted=False),
        ),
        create=True,
    )
    created = await runtime.core.users.create(f"{name}user", PASSWORD, name)
    client = await make_client()
    await client.login(f"{name}user")
    user_runtime = await runtime.user_runtime(created.user)
    return client, user_runtime


def _tools(user_runtime: UserRuntime) -> set[str]:
    agent = user_runtime.agents["assistant"]
    return {t.name for t in user_runtime._tools(agent)}


async def _prompt(user_runtime: UserRuntime) -> dict[str, str]:
    return await user_runtime._prompt_values()


# Behaviours a capability guards that are neither a route nor a tool name: each probe
# says whether the member got through.
async def _reads_household_notes(client: Client, user_runtime: UserRuntime) -> bool:
    shared = user_runtime.shared
    await shared.note_put("index.md", "- groceries.md: the shopping list", None)
    through = "groceries.md" in (await _prompt(user_runtime))["SHARED_MEMORY_INDEX"]
    assert through == user_runtime.shared_readable
    # The Files API agrees wherever the role may use it at all.
    r = await client.call("GET", "/api/file", params={"path": "shared-memory/index.md"})
    if r.status_code != 403 or r.json()["error"]["message"] != "your role does not allow this":
        assert (r.status_code != 403) == through, r.text
        places = (await client.call("GET", "/api/files/places")).json()
        assert any(p["name"] == "shared-memory" for p in places) == through
    return through


async def _offered_commands(client: Client, user_runtime: UserRuntime) -> bool:
    assert user_runtime.sandbox is not None
    user_runtime.sandbox.commands[user_runtime.user.id] = ["python3"]
    return "execute_cmd" in (await _prompt(user_runtime))["SANDBOX_COMMANDS"]


PROBES: dict[str, Callable[[Client, UserRuntime], Awaitable[bool]]] = {
    "memory.shared": _reads_household_notes,
    "sandbox.exec": _offered_commands,
}


def test_reserved_capabilities_are_exactly_the_listed_ones_and_grant_nothing() -> None:
    reserved = {c.name: c.reserved_for for c in declared() if c.reserved_for is not None}
    assert set(reserved) == set(RESERVED)
    for name, issue in RESERVED.items():
        assert issue in (reserved[name] or ""), f"{name} should say it waits for {issue}"
    everything = Role(
        name="all",
        display_name="all",
        builtin=False,
        capabilities=[c.name for c in declared()],
        attributes=RoleAttributes(),
    )
    for cap in declared():
        assert can(everything, cap) == (cap.reserved_for is None)


def test_a_capability_name_that_the_code_does_not_declare_grants_nothing() -> None:
    role = Role(
        name="x",
        display_name="x",
        builtin=False,
        capabilities=["made.up"],
        attributes=RoleAttributes(),
    )
    assert not can(role, Capability(name="made.up", description="not declared"))
    with pytest.raises(ValueError, match="declared twice"):
        declare("sandbox.exec", "something else")


def test_every_page_needs_a_declared_capability_that_something_enforces() -> None:
    assert _pages() == PAGES
    live = {c.name for c in declared() if c.reserved_for is None}
    for path, cap in _pages().items():
        assert cap in live, f"the page {path} needs {cap!r}, which nothing enforces"
    # The web app keeps no capability table of its own that could drift from the hook.
    for source in WEB.rglob("*.js"):
        text = source.read_text(encoding="utf-8")
        assert not re.search(r"\bcap: '", text), f"{source.name} lists page capabilities"


@pytest.mark.parametrize("cap", [c for c in declared() if c.reserved_for is None], ids=str)
async def test_without_the_capability_every_route_tool_and_behaviour_it_guards_is_refused(
    with_sandbox: Runtime, make_client: MakeClient, cap: Capability
) -> None:
    runtime = with_sandbox
    everything = {c.name for c in declared()}
    without, without_rt = await _member_with(
        runtime, make_client, "without", everything - {cap.name}
    )
    only, only_rt = await _member_with(runtime, make_client, "only", {cap.name})
    _, all_rt = await _member_with(runtime, make_client, "holdsall", everything)
    guarded = 0

    # Routes: refused (403) without it, reached (anything but 401/403) with it alone.
    for method, path, caps in _guarded_routes(runtime):
        assert caps <= everything, f"{method} {path} is guarded by undeclared {caps - everything}"
        assert not any(c in RESERVED for c in caps), f"{method} {path} needs a reserved one"
        if cap.name not in caps:
            continue
        guarded += 1
        url = _concrete(path)
        if caps == {cap.name}:
            r = await without.call(method, url, json={})
            assert r.status_code == 403, f"without {cap.name}: {method} {path} {r.status_code}"
        r = await only.call(method, url, json={})
        assert r.status_code not in (401, 403), (
            f"with {cap.name}: {method} {path} {r.status_code} {r.text}"
        )

    # Tools: what a role loses without it, a role with only it has.
    lost = _tools(all_rt) - _tools(without_rt)
    assert lost <= _tools(only_rt), f"with only {cap.name}: missing {lost - _tools(only_rt)}"
    guarded += len(lost)

    # Other behaviours.
    probe = PROBES.get(cap.name)
    if probe is not None:
        assert not await probe(without, without_rt), f"without {cap.name}: got through"
        assert await probe(only, only_rt), f"with {cap.name}: refused"
        guarded += 1

    # Pages do not count: hiding a page is a courtesy, the server must refuse by itself.
    assert guarded, f"{cap.name} is declared but the server checks it nowhere"


async def test_the_registry_offers_every_declared_capability_after_start(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = dict(await runtime.core.registry.list_capabilities())
    for cap in declared():
        assert rows.get(cap.name) == cap.description
    # A capability declared by new code is added at the next start; none is removed.
    from skald import permissions

    extra = Capability(name="zz.extra", description="added by a later feature")
    monkeypatch.setitem(permissions._DECLARED, extra.name, extra)
    before = len(rows)
    await runtime.core.registry.sync_capabilities([(c.name, c.description) for c in declared()])
    assert await runtime.core.registry.sync_capabilities([(extra.name, extra.description)]) == 0
    rows = dict(await runtime.core.registry.list_capabilities())
    assert rows["zz.extra"] == "added by a later feature" and len(rows) == before + 1


async def test_a_role_with_no_capability_is_refused_by_every_guarded_route(
    runtime: Runtime, make_client: MakeClient
) -> None:
    nobody, _ = await _member_with(runtime, make_client, "bare", set())
    routes = _guarded_routes(runtime)
    assert len(routes) > 40
    for method, path, _caps in routes:
        r = await nobody.call(method, _concrete(path), json={})
        assert r.status_code == 403, f"{method} {path}: {r.status_code}"
        assert r.json()["error"]["code"] == "forbidden"
