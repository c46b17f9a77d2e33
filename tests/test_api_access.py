"""Deny by default: every route is public by an explicit list or guarded, and every role
gets exactly the status it should from every route."""

from __future__ import annotations

import dataclasses
import re

import pytest
from conftest import PASSWORD, MakeClient, signed_in
from connector_support import on_host, simple_feed
from litestar.handlers import HTTPRouteHandler, WebsocketRouteHandler

from skald.api.app import create_app
from skald.approvals.rules import Rule
from skald.core.runtime import Runtime
from skald.features.projects.store import Projects
from skald.features.shared_folders.store import SharedFolders
from skald.features.system_agents.runner import SystemAgents
from skald.plugins.specs import NewReport, Suggestion
from skald.store import people
from skald.store.registry import SecurityGroup

# Reachable without signing in. Adding to this list is a security decision.
PUBLIC = {
    ("GET", "/api/health"),
    ("GET", "/api/setup"),
    ("POST", "/api/setup"),
    ("POST", "/api/auth/login"),
}
PUBLIC_PREFIXES = ("/api/schema",)  # the OpenAPI document
# The local ops channel: no session opens these, only the token in data/ops.token from a
# loopback peer (tests/test_ops_channel.py); everyone else gets a plain 404.
OPS = {
    ("GET", "/api/ops/status"),
    ("GET", "/api/ops/integrity"),
    ("POST", "/api/ops/backup"),
    ("POST", "/api/ops/drill"),
    ("POST", "/api/ops/users/deactivate"),
    ("POST", "/api/ops/users/activate"),
    ("POST", "/api/ops/users/delete"),
}
STATIC = "/"  # the web UI's files


def _routes(runtime: Runtime) -> list[tuple[str, str, object]]:
    app = create_app(runtime)
    out = []
    for route in app.routes:
        handlers = (
            route.route_handlers if hasattr(route, "route_handlers") else [route.route_handler]
        )  # type: ignore[attr-defined]
        for handler in handlers:
            if isinstance(handler, HTTPRouteHandler):
                out.extend(
                    (m, route.path, handler)
                    for m in sorted(handler.http_methods)
                    if m not in ("HEAD", "OPTIONS")
                )
            elif isinstance(handler, WebsocketRouteHandler):
                out.append(("WS", route.path, handler))
    return out


def _shape(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def _concrete(path: str) -> str:
    # An int parameter gets a number, or the router answers 404 before any guard runs.
    return re.sub(r"\{[^}]+\}", "x1", re.sub(r"\{[^}:]+:int\}", "1", path))


async def test_every_route_is_public_by_list_or_guarded(
    runtime: Runtime, make_client: MakeClient
) -> None:
    anonymous = await make_client()
    checked = 0
    for method, path, handler in _routes(runtime):
        if handler.opt.get("ops") or (method, path) in OPS:  # type: ignore[attr-defined]
            assert (method, path) in OPS, f"{method} {path}: an ops route not listed in OPS"
            assert handler.opt.get("ops"), f"{method} {path}: listed in OPS but not one"  # type: ignore[attr-defined]
            r = await anonymous.call(method, _concrete(path), json={})
            assert r.status_code == 404, f"{method} {path} answered {r.status_code}"
            continue
        public = bool(handler.opt.get("public"))  # type: ignore[attr-defined]
        listed = (
            (method, path) in PUBLIC
            or path.startswith(PUBLIC_PREFIXES)
            or (path.startswith(STATIC) and not path.startswith(("/api", "/v1")))
        )
        assert public == listed, f"{method} {path}: public={public} but listed={listed}"
        if public or method == "WS":
            continue
        r = await anonymous.call(method, _concrete(path), json={})
        assert r.status_code == 401, (
            f"{method} {path} answered {r.status_code} to an anonymous caller"
        )
        assert r.json()["error"]["code"] == "unauthenticated"
        checked += 1
    assert checked >= 15


HUGE = str(2**64 + 1)  # an integer past SQLite's: binding it would raise, not find


def _int_query_params(handler: object, path: str) -> list[str]:
    """The handler's query parameters that are integers (path and dependencies aside)."""
    sig = handler.parsed_fn_signature  # type: ignore[attr-defined]
    skip = set(handler.resolve_dependencies()) | set(re.findall(r"\{([^}:]+)", path))  # type: ignore[attr-defined]
    out = []
    for name, field in sig.parameters.items():
        if name in skip:
            continue
        inner = [a for a in (field.inner_types or ()) if a.annotation is not type(None)]
        kind = inner[0] if field.is_optional and inner else field
        if kind.annotation is int:
            out.append(name)
    return out


async def test_an_integer_past_sqlites_is_a_clear_answer_on_every_route_never_a_500(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    """Every `{x:int}` in a path and every integer query parameter, given 2**64 + 1 by an
    administrator (who passes every guard): a 4xx with a message, never a 500."""
    mum = await make_client()
    await mum.login("mum")
    tried = 0
    for method, path, handler in _routes(runtime):
        if method == "WS":
            continue
        ints = re.findall(r"\{([^}:]+):int\}", path)
        queries = [] if ints else _int_query_params(handler, path)
        if not ints and not queries:
            continue
        url = re.sub(r"\{[^}]+\}", "x1", re.sub(r"\{[^}:]+:int\}", HUGE, path))
        for params in [{q: HUGE} for q in queries] or [{}]:  # one at a time: each is checked
            r = await mum.call(method, url, json={}, params=params)
            assert 400 <= r.status_code < 500, f"{method} {path} {params}: {r.status_code} {r.text}"
            assert r.json()["error"]["message"], f"{method} {path}: {r.text}"
            tried += 1
    assert tried >= 5


# method, path, body, {role: expected status}; ids are filled in by the test.
A, M, C = "admin", "member", "child"
MATRIX: list[tuple[str, str, object, dict[str, int]]] = [
    ("GET", "/api/health", None, {"anon": 200, A: 200, M: 200, C: 200}),
    ("GET", "/api/setup", None, {"anon": 200, A: 200, M: 200, C: 200}),
    (
        "POST",
        "/api/auth/login",
        {"username": "ada", "password": "not it at all"},
        {"anon": 401, A: 401, M: 401, C: 401},
    ),
    (
        "POST",
        "/api/setup",
        {"token": "guess", "username": "eve", "password": PASSWORD},
        {"anon": 409, A: 409, M: 409, C: 409},
    ),
    ("GET", "/api/auth/me", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("PATCH", "/api/auth/me", {"locale": "it"}, {"anon": 401, A: 200, M: 200, C: 200}),
    (
        "POST",
        "/api/auth/password",
        {"current_password": "wrong wrong", "new_password": "whatever1"},
        {"anon": 401, A: 400, M: 400, C: 400},
    ),
    ("GET", "/api/users", None, {"anon": 401, A: 200, M: 403, C: 403}),
    (
        "POST",
        "/api/users",
        {"username": "new_{role}", "password": PASSWORD, "role": "member"},
        {"anon": 401, A: 201, M: 403, C: 403},
    ),
    ("GET", "/api/users/{ada}", None, {"anon": 401, A: 200, M: 403, C: 403}),
    (
        "PATCH",
        "/api/users/{ada}",
        {"display_name": "Ada L."},
        {"anon": 401, A: 200, M: 403, C: 403},
    ),
    ("POST", "/api/users/{victim}/deactivate", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("POST", "/api/users/{victim}/activate", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("DELETE", "/api/users/{victim}", None, {"anon": 401, A: 204, M: 403, C: 403}),
    ("GET", "/api/roles", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("GET", "/api/capabilities", None, {"anon": 401, A: 200, M: 403, C: 403}),
    (
        "POST",
        "/api/roles",
        {"name": "r_{role}", "display_name": "R", "capabilities": ["chat"]},
        {"anon": 401, A: 201, M: 403, C: 403},
    ),
    (
        "PATCH",
        "/api/roles/{role_name}",
        {"display_name": "Member"},
        {"anon": 401, A: 200, M: 403, C: 403},
    ),
    ("GET", "/api/agents", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/instance/timezones", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/backups", None, {"anon": 401, A: 200, M: 403, C: 403}),
    (
        "PUT",
        "/api/backups/settings",
        {"every_hours": 24},
        {"anon": 401, A: 200, M: 403, C: 403},
    ),
    ("POST", "/api/backups/run", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("POST", "/api/backups/drill", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("GET", "/api/backups/archives/{archive}", None, {"anon": 401, A: 404, M: 403, C: 403}),
    (
        "POST",
        "/api/backups/archives/{archive}/restore",
        {"confirm": True},
        {"anon": 401, A: 404, M: 403, C: 403},
    ),
    ("GET", "/api/llm/kinds", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("GET", "/api/llm/providers", None, {"anon": 401, A: 200, M: 403, C: 403}),
    (
        "POST",
        "/api/llm/providers",
        {"name": "p_{role}", "kind": "ollama"},
        {"anon": 401, A: 201, M: 403, C: 403},
    ),
    (
        "PATCH",
        "/api/llm/providers/{prov}",
        {"name": "Local"},
        {"anon": 401, A: 200, M: 403, C: 403},
    ),
    # A real request to the provider (Ollama's usual address, where nothing listens in
    # tests): the administrator gets the connection failure as a 400.
    ("GET", "/api/llm/providers/{prov}/models", None, {"anon": 401, A: 400, M: 403, C: 403}),
    ("GET", "/api/llm/models", None, {"anon": 401, A: 200, M: 403, C: 403}),
    (
        "POST",
        "/api/llm/models",
        {"provider_id": "{prov}", "model": "m", "name": "m_{role}"},
        {"anon": 401, A: 201, M: 403, C: 403},
    ),
    ("PATCH", "/api/llm/models/{model}", {"priority": 5}, {"anon": 401, A: 200, M: 403, C: 403}),
    ("GET", "/api/models", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("DELETE", "/api/llm/models/{model}", None, {"anon": 401, A: 204, M: 403, C: 403}),
    ("DELETE", "/api/llm/providers/{prov}", None, {"anon": 401, A: 204, M: 403, C: 403}),
    ("GET", "/api/conversations", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("POST", "/api/conversations", {"title": "t"}, {"anon": 401, A: 201, M: 201, C: 201}),
    (
        "PATCH",
        "/api/conversations/{conv}",
        {"title": "renamed"},
        {"anon": 401, A: 200, M: 200, C: 200},
    ),
    (
        "PATCH",
        "/api/conversations/{conv}",
        {"security_group": "default"},
        {"anon": 401, A: 200, M: 200, C: 200},
    ),
    (
        "PATCH",
        "/api/conversations/{conv}",
        {"security_group": "nope"},
        {"anon": 401, A: 400, M: 400, C: 400},
    ),
    ("GET", "/api/my/security-groups", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/chat/commands", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/conversations/{conv}/messages", None, {"anon": 401, A: 200, M: 200, C: 200}),
    (
        "POST",
        "/api/conversations/{conv}/messages",
        {"text": "/cost"},
        {"anon": 401, A: 200, M: 200, C: 200},
    ),
    ("POST", "/api/conversations/{conv}/stop", None, {"anon": 401, A: 204, M: 204, C: 204}),
    (
        "POST",
        "/api/conversations/{conv}/messages/{seq}/resend",
        {},
        {"anon": 401, A: 404, M: 404, C: 404},
    ),
    ("GET", "/api/chat/search", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/instance", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("PATCH", "/api/instance", {}, {"anon": 401, A: 200, M: 403, C: 403}),
    ("GET", "/api/setup/checklist", None, {"anon": 401, A: 200, M: 403, C: 403}),
    (
        "POST",
        "/api/llm/check",
        {"kind": "openai_compatible"},
        {"anon": 401, A: 400, M: 403, C: 403},
    ),
    (
        "POST",
        "/api/llm/providers/{prov}/test",  # deleted by an earlier row: not found
        {},
        {"anon": 401, A: 404, M: 403, C: 403},
    ),
    (
        "POST",
        "/api/approvals/{conv}",
        {"decision": "approve"},
        {"anon": 401, A: 404, M: 404, C: 404},
    ),
    ("GET", "/api/inbox", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("POST", "/api/inbox/{conv}/approve", {}, {"anon": 401, A: 404, M: 404, C: 404}),
    ("POST", "/api/inbox/{conv}/reject", None, {"anon": 401, A: 404, M: 404, C: 404}),
    ("POST", "/api/inbox/{conv}/answer", {"answer": "x"}, {"anon": 401, A: 404, M: 404, C: 404}),
    ("POST", "/api/chat", {"text": "hello"}, {"anon": 401, A: 200, M: 200, C: 200}),
    ("POST", "/api/chat/stream", {"text": "/cost"}, {"anon": 401, A: 200, M: 200, C: 200}),
    ("POST", "/api/uploads", {"not": "multipart"}, {"anon": 401, A: 400, M: 400, C: 400}),
    ("GET", "/api/voice", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("POST", "/api/voice/transcribe", {"not": "audio"}, {"anon": 401, A: 415, M: 415, C: 415}),
    ("POST", "/api/voice/speech", {"text": "hi"}, {"anon": 401, A: 409, M: 409, C: 409}),
    ("GET", "/api/pictures/{conv}/{picture}", None, {"anon": 401, A: 404, M: 404, C: 404}),
    ("POST", "/api/auth/logout-all", None, {"anon": 401, A: 204, M: 204, C: 204}),
    ("POST", "/api/auth/logout", None, {"anon": 401, A: 204, M: 204, C: 204}),
    ("GET", "/api/storage", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/storage/members", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("GET", "/api/files/places", None, {"anon": 401, A: 200, M: 200, C: 403}),
    ("GET", "/api/pages", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/pages/hidden", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/i18n/{lang}", None, {"anon": 200, A: 200, M: 200, C: 200}),
    ("GET", "/i18n/de.json", None, {"anon": 404, A: 404, M: 404, C: 404}),
    ("GET", "/plugins/chat/chat.js", None, {"anon": 200, A: 200, M: 200, C: 200}),
    ("GET", "/api/files/dir", None, {"anon": 401, A: 200, M: 200, C: 403}),
    ("GET", "/api/file", None, {"anon": 401, A: 400, M: 400, C: 403}),
    (
        "POST",
        "/api/file",
        {"path": "~/matrix-{role}.txt", "content": "x"},
        {"anon": 401, A: 201, M: 201, C: 403},
    ),
    ("POST", "/api/file/upload", {"not": "multipart"}, {"anon": 401, A: 400, M: 400, C: 403}),
    (
        "PATCH",
        "/api/file",
        {"from": "~/not-there", "to": "~/still-not-there"},
        {"anon": 401, A: 404, M: 404, C: 403},
    ),
    ("DELETE", "/api/file", None, {"anon": 401, A: 400, M: 400, C: 403}),
    ("GET", "/api/files/zip", None, {"anon": 401, A: 200, M: 200, C: 403}),
    ("GET", "/api/approvals/rules", None, {"anon": 401, A: 200, M: 403, C: 403}),
    (
        "POST",
        "/api/approvals/rules",
        {"group": "default", "tool_pattern": "x_{role}", "action": "allow"},
        {"anon": 401, A: 201, M: 403, C: 403},
    ),
    (
        "PATCH",
        "/api/approvals/rules/{rule}",
        {"description": "edited"},
        {"anon": 401, A: 200, M: 403, C: 403},
    ),
    ("DELETE", "/api/approvals/rules/{rule}", None, {"anon": 401, A: 204, M: 403, C: 403}),
    ("GET", "/api/approvals/groups", None, {"anon": 401, A: 200, M: 403, C: 403}),
    (
        "POST",
        "/api/approvals/groups",
        {"name": "g{role}", "display_name": "G"},
        {"anon": 401, A: 201, M: 403, C: 403},
    ),
    (
        "PATCH",
        "/api/approvals/groups/{grp}",
        {"display_name": "Matrix"},
        {"anon": 401, A: 200, M: 403, C: 403},
    ),
    ("DELETE", "/api/approvals/groups/{grp}", None, {"anon": 401, A: 204, M: 403, C: 403}),
    (
        "POST",
        "/api/approvals/test",
        {"group": "default", "tool": "execute_cmd", "arguments": {}},
        {"anon": 401, A: 200, M: 403, C: 403},
    ),
    # Notifications: every member has their own; another's id is simply not found.
    ("GET", "/api/notifications", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("POST", "/api/notifications/read", {"ids": ["{conv}"]}, {"anon": 401, A: 404, M: 404, C: 404}),
    ("POST", "/api/notifications/read-all", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("DELETE", "/api/notifications/{conv}", None, {"anon": 401, A: 404, M: 404, C: 404}),
    ("GET", "/api/notifications/settings", None, {"anon": 401, A: 200, M: 200, C: 200}),
    (
        "PUT",
        "/api/notifications/settings",
        {"channels": ["web"]},
        {"anon": 401, A: 200, M: 200, C: 200},
    ),
    ("POST", "/api/notifications/test", None, {"anon": 401, A: 201, M: 201, C: 201}),
    ("GET", "/api/notifications/push/key", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/notifications/push/devices", None, {"anon": 401, A: 200, M: 200, C: 200}),
    (
        "POST",
        "/api/notifications/push/devices",
        {"endpoint": "https://127.0.0.1/push", "keys": {"p256dh": "x", "auth": "y"}},
        {"anon": 401, A: 400, M: 400, C: 400},
    ),
    (
        "PATCH",
        "/api/notifications/push/devices/{conv}",
        {"enabled": False},
        {"anon": 401, A: 404, M: 404, C: 404},
    ),
    (
        "DELETE",
        "/api/notifications/push/devices/{conv}",
        None,
        {"anon": 401, A: 404, M: 404, C: 404},
    ),
    # Schedules (schedule.use: not the children); another member's job or task is 404.
    ("GET", "/api/schedule/jobs", None, {"anon": 401, A: 200, M: 200, C: 403}),
    ("GET", "/api/schedule/runs", None, {"anon": 401, A: 200, M: 200, C: 403}),
    ("GET", "/api/schedule/tasks", None, {"anon": 401, A: 200, M: 200, C: 403}),
    (
        "PATCH",
        "/api/schedule/jobs/{conv}",
        {"state": "paused"},
        {"anon": 401, A: 404, M: 404, C: 403},
    ),
    ("POST", "/api/schedule/jobs/{conv}/run", None, {"anon": 401, A: 404, M: 404, C: 403}),
    ("GET", "/api/schedule/jobs/{conv}/runs", None, {"anon": 401, A: 404, M: 404, C: 403}),
    ("DELETE", "/api/schedule/jobs/{conv}", None, {"anon": 401, A: 404, M: 404, C: 403}),
    ("POST", "/api/schedule/tasks/{conv}/cancel", None, {"anon": 401, A: 404, M: 404, C: 403}),
    ("GET", "/api/schedule/keep-key", None, {"anon": 401, A: 200, M: 200, C: 403}),
    (
        "POST",
        "/api/schedule/preview",
        {"in_minutes": 5},
        {"anon": 401, A: 200, M: 200, C: 403},
    ),
    (
        "POST",
        "/api/schedule/jobs",
        {"prompt": "the oven", "at": "2020-01-01T10:00"},
        {"anon": 401, A: 400, M: 400, C: 403},
    ),
    (
        "PUT",
        "/api/schedule/keep-key",
        {"enabled": False},
        {"anon": 401, A: 200, M: 200, C: 403},
    ),
    ("GET", "/api/admin/schedule", None, {"anon": 401, A: 200, M: 403, C: 403}),
    (
        "PUT",
        "/api/admin/schedule/{victim}/limits",
        {"min_interval_s": 60},
        {"anon": 401, A: 204, M: 403, C: 403},
    ),
    # Sessions never open the ops channel, whatever the role (no token: not even there).
    ("GET", "/api/ops/status", None, {"anon": 404, A: 404, M: 404, C: 404}),
    # Connectors: `clock` reaches every auto_grant member; `private` only the victim
    # (administrators hold every connector implicitly). Another member's connector is
    # "not found", exactly like one that does not exist.
    ("GET", "/api/connectors", None, {"anon": 401, A: 200, M: 200, C: 403}),
    ("GET", "/api/connectors/{clock}", None, {"anon": 401, A: 200, M: 200, C: 403}),
    ("GET", "/api/connectors/{private}", None, {"anon": 401, A: 200, M: 404, C: 403}),
    ("POST", "/api/connectors/{clock}/activate", None, {"anon": 401, A: 200, M: 200, C: 403}),
    ("POST", "/api/connectors/{private}/activate", None, {"anon": 401, A: 200, M: 404, C: 403}),
    ("POST", "/api/connectors/{clock}/deactivate", None, {"anon": 401, A: 200, M: 200, C: 403}),
    ("POST", "/api/connectors/{clock}/retry", None, {"anon": 401, A: 409, M: 409, C: 403}),
    ("POST", "/api/connectors/{private}/retry", None, {"anon": 401, A: 409, M: 404, C: 403}),
    (
        "PUT",
        "/api/connectors/{clock}/secrets",
        {"values": {"api_key": "k"}},
        {"anon": 401, A: 400, M: 400, C: 403},
    ),
    (
        "PUT",
        "/api/connectors/{private}/secrets",
        {"values": {"api_key": "k"}},
        {"anon": 401, A: 200, M: 404, C: 403},
    ),
    ("DELETE", "/api/connectors/{private}/secrets", None, {"anon": 401, A: 204, M: 404, C: 403}),
    ("GET", "/api/connectors/{clock}/grants", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("PUT", "/api/connectors/{clock}/grants/{ada}", None, {"anon": 401, A: 204, M: 403, C: 403}),
    (
        "DELETE",
        "/api/connectors/{private}/grants/{victim}",
        None,
        {"anon": 401, A: 204, M: 403, C: 403},
    ),
    # OAuth sign-in: neither connector signs in with OAuth (400); another member's is 404.
    ("POST", "/api/connectors/{clock}/oauth/start", None, {"anon": 401, A: 400, M: 400, C: 403}),
    (
        "POST",
        "/api/connectors/{private}/oauth/start",
        None,
        {"anon": 401, A: 400, M: 404, C: 403},
    ),
    (
        "POST",
        "/api/connectors/{clock}/oauth/code",
        {"state": "guess", "code": "c"},
        {"anon": 401, A: 404, M: 404, C: 403},
    ),
    # QR/device sign-in: neither connector signs in with a code (400); another member's
    # is 404, whoever asks.
    *(
        (
            "POST",
            f"/api/connectors/{{{name}}}/{action}",
            None,
            {"anon": 401, A: 400, M: 400 if name == "clock" else 404, C: 403},
        )
        for name in ("clock", "private")
        for action in ("login-status", "logout")
    ),
    # A resource or a prompt of a connector: the query/body is checked first (400), and
    # a child never gets that far.
    ("GET", "/api/connectors/{clock}/resource", None, {"anon": 401, A: 400, M: 400, C: 403}),
    (
        "POST",
        "/api/connectors/{private}/prompts/{seq}",
        {"arguments": {}},
        {"anon": 401, A: 409, M: 404, C: 403},
    ),
    ("GET", "/api/connector-oauth/callback", None, {"anon": 401, A: 400, M: 400, C: 403}),
    # Issue 29 item 5 (oauthprov): a connector's check (neither has one: 400; another
    # member's is 404), grant_by_default and the sign-in providers (administrators only).
    (
        "POST",
        "/api/connectors/{private}/verify",
        {"values": {"api_key": "k"}},
        {"anon": 401, A: 400, M: 404, C: 403},
    ),
    (
        "POST",
        "/api/connectors/{clock}/verify",
        {"values": {"api_key": "k"}},
        {"anon": 401, A: 400, M: 400, C: 403},
    ),
    (
        "PUT",
        "/api/connectors/{clock}/grant-by-default",
        {"grant_by_default": True},
        {"anon": 401, A: 204, M: 403, C: 403},
    ),
    ("GET", "/api/sign-in-providers", None, {"anon": 401, A: 200, M: 403, C: 403}),
    (
        "PUT",
        "/api/sign-in-providers/{none}",
        {
            "authorize_url": "https://accounts.example/authorize",
            "token_url": "https://accounts.example/token",
            "client_id": "household",
            "client_secret": "matrix-secret",
        },
        {"anon": 401, A: 200, M: 403, C: 403},
    ),
    ("DELETE", "/api/sign-in-providers/{plugin}", None, {"anon": 401, A: 404, M: 403, C: 403}),
    ("GET", "/api/marketplace", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("POST", "/api/marketplace/{clock}/install", None, {"anon": 401, A: 409, M: 403, C: 403}),
    ("POST", "/api/marketplace/{clock}/update", None, {"anon": 401, A: 409, M: 403, C: 403}),
    ("DELETE", "/api/connectors/{private}", None, {"anon": 401, A: 204, M: 403, C: 403}),
    # The household's own items: administrators only (bad input is 400, not a 500).
    (
        "POST",
        "/api/connector-items/test",
        {"item": {"name": "x", "kind": "command", "command": " "}},
        {"anon": 401, A: 400, M: 403, C: 403},
    ),
    (
        "POST",
        "/api/connector-items",
        {"name": "x", "kind": "url", "url": "ftp://x"},
        {"anon": 401, A: 400, M: 403, C: 403},
    ),
    ("DELETE", "/api/connector-items/{clock}", None, {"anon": 401, A: 404, M: 403, C: 403}),
    ("GET", "/api/ops/integrity", None, {"anon": 404, A: 404, M: 404, C: 404}),
    ("POST", "/api/ops/backup", {"quick": True}, {"anon": 404, A: 404, M: 404, C: 404}),
    ("POST", "/api/ops/drill", None, {"anon": 404, A: 404, M: 404, C: 404}),
    *(
        (
            "POST",
            f"/api/ops/users/{action}",
            {"username": "ada"},
            {"anon": 404, A: 404, M: 404, C: 404},
        )
        for action in ("deactivate", "activate", "delete")
    ),
    # People: each member reads their own directory profile and links; the People page's
    # routes (profiles, supervision links) are administrators' only.
    ("GET", "/api/people/me", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/people/{victim}/profile", None, {"anon": 401, A: 200, M: 403, C: 403}),
    (
        "PUT",
        "/api/people/{victim}/profile",
        {"date_of_birth": "2015-06-01", "sex": "girl"},
        {"anon": 401, A: 200, M: 403, C: 403},
    ),
    ("GET", "/api/people/links", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("PUT", "/api/people/links/{ada}/{victim}", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("DELETE", "/api/people/links/{ada}/{victim}", None, {"anon": 401, A: 204, M: 403, C: 403}),
    # Usage (issue 30): one's own figures for everyone, everyone's and the caps for admins.
    ("GET", "/api/usage/stats", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/usage/stats?everyone=true", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("GET", "/api/usage/limits", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/usage/caps", None, {"anon": 401, A: 200, M: 403, C: 403}),
    (
        "PUT",
        "/api/usage/caps/{user_kind}/{victim}",
        {"turns_day": 5},
        {"anon": 401, A: 200, M: 403, C: 403},
    ),
    (
        "DELETE",
        "/api/usage/caps/{role_kind}/{role_name}",
        None,
        {"anon": 401, A: 204, M: 403, C: 403},
    ),
    ("GET", "/api/dashboard/health", None, {"anon": 401, A: 200, M: 403, C: 403}),
    # The request log: one's own rows (a request of nobody's: 404), counts for admins.
    ("GET", "/api/requests", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/requests/{no_request}", None, {"anon": 401, A: 404, M: 404, C: 404}),
    ("GET", "/api/admin/requests", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("GET", "/api/privacy", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/requests/settings", None, {"anon": 401, A: 200, M: 200, C: 200}),
    (
        "PUT",
        "/api/requests/settings",
        {"keep_payloads": False},
        {"anon": 401, A: 200, M: 200, C: 200},
    ),
    ("GET", "/api/requests/{no_request}/payload", None, {"anon": 401, A: 404, M: 404, C: 404}),
    # Telegram: the bridge's settings are the admin's; pairing is per member (telegram.use).
    ("GET", "/api/telegram/settings", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("PUT", "/api/telegram/settings", {"enabled": False}, {"anon": 401, A: 200, M: 403, C: 403}),
    ("GET", "/api/telegram/groups", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("PUT", "/api/telegram/groups/{chat}", {"prefix": "x"}, {"anon": 401, A: 200, M: 403, C: 403}),
    ("GET", "/api/telegram/me", None, {"anon": 401, A: 200, M: 200, C: 403}),
    ("POST", "/api/telegram/pair", {"code": "ZZZZZZZZ"}, {"anon": 401, A: 400, M: 400, C: 403}),
    ("POST", "/api/telegram/code", None, {"anon": 401, A: 200, M: 200, C: 403}),
    ("DELETE", "/api/telegram/me", None, {"anon": 401, A: 404, M: 404, C: 403}),
    # System agents and reports (issue 25): runs are the caller's own, health and
    # settings are for admins; a report about tim for his supervisors (mum) is "not
    # found" for everyone else, tim included.
    ("GET", "/api/system-agents", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/system-agents/runs", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/system-agents/health", None, {"anon": 401, A: 200, M: 403, C: 403}),
    (
        "PUT",
        "/api/system-agents/{agent}",
        {"enabled": True, "interval_s": 86400},
        {"anon": 401, A: 204, M: 403, C: 403},
    ),
    (
        "PUT",
        "/api/system-agents/{agent}/members/{ada}",
        {"interval_s": 3600},
        {"anon": 401, A: 204, M: 403, C: 403},
    ),
    ("POST", "/api/system-agents/{agent}/run", None, {"anon": 401, A: 202, M: 403, C: 403}),
    ("GET", "/api/reports", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/reports/unread", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("GET", "/api/reports/{report}", None, {"anon": 401, A: 200, M: 404, C: 404}),
    # Memory upkeep (issue 29 item 4): the household report is the admins'; accepting
    # its suggestion (an approval request in the caller's Inbox) is "not found" for
    # anyone who may not read it.
    ("GET", "/api/reports/{hreport}", None, {"anon": 401, A: 200, M: 404, C: 404}),
    (
        "POST",
        "/api/reports/{hreport}/suggestions/{first}/accept",
        None,
        {"anon": 401, A: 201, M: 404, C: 404},
    ),
    ("GET", "/api/review/lines", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("POST", "/api/review/{victim}/restart", None, {"anon": 401, A: 204, M: 403, C: 403}),
    # Shared folders: `folders.manage` (administrators by default).
    ("GET", "/api/shared-folders", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("POST", "/api/shared-folders", {"name": "F {role}"}, {"anon": 401, A: 201, M: 403, C: 403}),
    (
        "PATCH",
        "/api/shared-folders/{folder}",
        {"description": "d"},
        {"anon": 401, A: 200, M: 403, C: 403},
    ),
    (
        "PUT",
        "/api/shared-folders/{folder}/members/{ada}",
        {"access": "read"},
        {"anon": 401, A: 200, M: 403, C: 403},
    ),
    (
        "DELETE",
        "/api/shared-folders/{folder}/members/{ada}",
        None,
        {"anon": 401, A: 200, M: 403, C: 403},
    ),
    ("POST", "/api/shared-folders/{folder}/restore", None, {"anon": 401, A: 409, M: 403, C: 403}),
    ("DELETE", "/api/shared-folders/{folder}/trash", None, {"anon": 401, A: 409, M: 403, C: 403}),
    ("DELETE", "/api/shared-folders/{folder}", None, {"anon": 401, A: 204, M: 403, C: 403}),
    # Projects: `projects.use`; Ada owns "matrix", mum reads it, tim's role lacks it.
    ("GET", "/api/projects", None, {"anon": 401, A: 200, M: 200, C: 403}),
    ("POST", "/api/projects", {"name": "P {role}"}, {"anon": 401, A: 201, M: 201, C: 403}),
    ("GET", "/api/projects/{owner}/{proj}", None, {"anon": 401, A: 200, M: 200, C: 403}),
    (
        "PATCH",
        "/api/projects/{owner}/{proj}",
        {"description": "d"},
        {"anon": 401, A: 403, M: 200, C: 403},
    ),
    (
        "PUT",
        "/api/projects/{owner}/{proj}/members/{vname}",
        {"access": "read"},
        {"anon": 401, A: 403, M: 200, C: 403},
    ),
    (
        "DELETE",
        "/api/projects/{owner}/{proj}/members/{vname}",
        None,
        {"anon": 401, A: 403, M: 200, C: 403},
    ),
    ("POST", "/api/projects/{owner}/{proj}/chat", None, {"anon": 401, A: 201, M: 201, C: 403}),
    # A project's history: members read (no such revision: 404); a reader's restore meets
    # the write gate (403) before the revision is looked for; only the owner switches.
    (
        "PATCH",
        "/api/projects/{owner}/{proj}",
        {"history": False},
        {"anon": 401, A: 403, M: 200, C: 403},
    ),
    ("GET", "/api/projects/{owner}/{proj}/history", None, {"anon": 401, A: 200, M: 200, C: 403}),
    (
        "GET",
        "/api/projects/{owner}/{proj}/history/{norev}",
        None,
        {"anon": 401, A: 404, M: 404, C: 403},
    ),
    (
        "POST",
        "/api/projects/{owner}/{proj}/history/{norev}/restore",
        {"path": "x.md"},
        {"anon": 401, A: 403, M: 404, C: 403},
    ),
    ("DELETE", "/api/projects/{owner}/{proj}", None, {"anon": 401, A: 403, M: 204, C: 403}),
    # Skills: reading and one's own tree with `files`; the household's with skills.manage.
    ("GET", "/api/skills", None, {"anon": 401, A: 200, M: 200, C: 403}),
    ("GET", "/api/skills/{mine}/{none}", None, {"anon": 401, A: 404, M: 404, C: 403}),
    ("POST", "/api/skills/{mine}/{none}/zip", {}, {"anon": 401, A: 400, M: 400, C: 403}),
    ("POST", "/api/skills/{shared}/{none}/zip", {}, {"anon": 401, A: 403, M: 403, C: 403}),
    ("DELETE", "/api/skills/{mine}/{none}", None, {"anon": 401, A: 404, M: 404, C: 403}),
    # Plugins (plugin.manage: administrators); `ghost` is no plugin. Installing, switching
    # and configuring are refused to members and children before anything is read.
    ("GET", "/api/plugins", None, {"anon": 401, A: 200, M: 403, C: 403}),
    ("POST", "/api/plugins", None, {"anon": 401, A: 400, M: 403, C: 403}),
    ("DELETE", "/api/plugins/{plugin}", None, {"anon": 401, A: 404, M: 403, C: 403}),
    (
        "PUT",
        "/api/plugins/{plugin}/enabled",
        {"enabled": True},
        {"anon": 401, A: 404, M: 403, C: 403},
    ),
    ("GET", "/api/plugins/{plugin}/settings", None, {"anon": 401, A: 404, M: 403, C: 403}),
    (
        "PUT",
        "/api/plugins/{plugin}/settings",
        {"values": {}},
        {"anon": 401, A: 404, M: 403, C: 403},
    ),
    ("GET", "/api/plugins/{plugin}/access", None, {"anon": 401, A: 404, M: 403, C: 403}),
    (
        "PUT",
        "/api/plugins/{plugin}/access/{ada}",
        {"granted": True},
        {"anon": 401, A: 404, M: 403, C: 403},
    ),
    # A member's own settings of a plugin: only a plugin that reaches them (none here).
    ("GET", "/api/plugins/{plugin}/mine", None, {"anon": 401, A: 404, M: 404, C: 404}),
    ("PUT", "/api/plugins/{plugin}/mine", {"values": {}}, {"anon": 401, A: 404, M: 404, C: 404}),
    # A plugin's address with no live route (none here): 404 to every signed-in caller.
    *(
        (method, "/api/plugin/{plugin}/{rest}", None, {"anon": 401, A: 404, M: 404, C: 404})
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE")
    ),
    # API tokens (a web session manages them; the counts are for administrators).
    ("GET", "/api/tokens", None, {"anon": 401, A: 200, M: 200, C: 200}),
    (
        "POST",
        "/api/tokens",
        {"name": "matrix", "scopes": ["chat"]},
        {"anon": 401, A: 201, M: 201, C: 201},
    ),
    ("DELETE", "/api/tokens/{conv}", None, {"anon": 401, A: 404, M: 404, C: 404}),
    ("GET", "/api/admin/tokens", None, {"anon": 401, A: 200, M: 403, C: 403}),
    # /v1 is for tokens: a session may list the models; an empty body is a 400.
    ("GET", "/v1/models", None, {"anon": 401, A: 200, M: 200, C: 200}),
    ("POST", "/v1/chat/completions", {}, {"anon": 401, A: 400, M: 400, C: 400}),
]


async def _install_connectors(runtime: Runtime, victim_id: str) -> None:
    """`clock` for everyone with auto_grant; `private` for the victim alone."""
    # `private` takes an API key, so its secrets route has a field to set.
    feed = simple_feed(
        runtime.core.layout.root.parent / "feed",
        ("clock", "private"),
        private={"scope": "personal", "auth": {"type": "api_key", "fields": [{"name": "api_key"}]}},
    )
    c = on_host(runtime, feed)
    for name in ("clock", "private"):
        await c.installer.install(c.feed(), name)
    for user_id in await c.store.grantees("private"):
        await c.store.revoke("private", user_id)
    await c.store.grant("private", victim_id)


async def _report_about_tim(runtime: Runtime, household: dict[str, str]) -> str:
    """mum supervises tim; a review report about him, for his supervisors."""
    await people.link(runtime.server.db, household["mum"], household["tim"])
    report = NewReport(title="t", summary="s", body="b", audience="supervisors")
    report = dataclasses.replace(report, subject_id=household["tim"])
    return await runtime.server.state(SystemAgents).reports.add(
        report, owner_id=household["mum"], subject_name="tim", producer="test", run_id="r"
    )


async def _household_upkeep_report(runtime: Runtime, household: dict[str, str]) -> str:
    """A household memory upkeep report (for the admins) with one suggestion."""
    fix = Suggestion(
        kind="duplicate", note="shared-memory/x.md", text="t", old_text="a\na", new_text="a"
    )
    report = NewReport(title="t", summary="s", body="b", audience="admins", suggestions=(fix,))
    return await runtime.server.state(SystemAgents).reports.add(
        report,
        owner_id=household["mum"],
        subject_name=None,
        producer="household-memory-upkeep",
        run_id="r",
    )


@pytest.mark.parametrize("who", ["anon", A, M, C])
async def test_role_route_matrix(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, who: str
) -> None:
    victim = await runtime.core.users.create("victim", PASSWORD, "member")
    provider = await runtime.llm.add_provider("Home", "ollama", None, None)
    model = await runtime.llm.add_model(
        provider.id, "llama3", "Llama", "average", ["tools"], 10, True
    )
    await runtime.core.registry.save_group(
        SecurityGroup(name="matrix", display_name="M", description=""), create=True
    )
    rule = await runtime.core.registry.save_rule(
        Rule(0, "matrix", "x", None, "allow", 1, ""), create=True
    )
    await _install_connectors(runtime, victim.user.id)
    await runtime.server.state(SharedFolders).create("Folder")
    projects = runtime.server.state(Projects)
    await projects.set_member(await projects.create(household["ada"], "Matrix"), "mum", "read")
    ids = {
        "clock": "clock",
        "private": "private",
        "rule": str(rule.id),
        "grp": "matrix",
        "ada": household["ada"],
        "victim": victim.user.id,
        "role_name": "member",
        "prov": provider.id,
        "model": model.id,
        "seq": "1",
        "picture": "none.png",
        "lang": "it.json",
        "archive": "none.tar",
        "user_kind": "user",
        "role_kind": "role",
        "no_request": "987654321",
        "norev": "0000000",
        "chat": "-5",
        "agent": "conversation-review",
        "report": await _report_about_tim(runtime, household),
        "hreport": await _household_upkeep_report(runtime, household),
        "first": "1",
        "folder": "folder",
        "owner": "ada",
        "proj": "matrix",
        "vname": "victim",
        "mine": "mine",
        "shared": "shared",
        "none": "none",
        "plugin": "ghost",
        "rest": "motto",
    }
    if who != "anon":
        owner = await make_client()
        await owner.login({"admin": "mum", "member": "ada", "child": "tim"}[who])
        ids["conv"] = (await owner.call("POST", "/api/conversations", json={})).json()["id"]
    else:
        ids["conv"] = "0123abcd"
    covered = {(m, _shape(p)) for m, p, _ in _routes(runtime)}
    in_matrix = set()
    for method, template, body, expected in MATRIX:
        client = await make_client()
        if who != "anon":
            await client.login({"admin": "mum", "member": "ada", "child": "tim"}[who])
        path = template.format(**ids)
        if isinstance(body, dict):
            body = {
                k: (v.format(role=who, **ids) if isinstance(v, str) else v) for k, v in body.items()
            }
        r = await client.call(method, path, json=body)
        assert r.status_code == expected[who], f"{who} {method} {path}: {r.status_code} {r.text}"
        if r.status_code >= 400:
            assert set(r.json()) == {"error"}
        # Put the world back for the next row.
        if r.status_code in (200, 204) and template.endswith("deactivate"):
            await runtime.core.users.activate("victim")
        if r.status_code == 204 and template == "/api/users/{victim}":
            victim = await runtime.core.users.create("victim", PASSWORD, "member")
            ids["victim"] = victim.user.id
        in_matrix.add((method, _shape(template)))
    missing = {
        r
        for r in covered
        if r[0] != "WS"
        and not r[1].startswith(("/api/schema",))
        and r[1] != "/"
        and not r[1].startswith("/{")
        # Each feature's web files: static like "/" (one row below stands for them).
        and not r[1].startswith("/plugins/")
    } - in_matrix
    assert not missing, f"routes without a row in the matrix: {sorted(missing)}"


@pytest.mark.parametrize("who", ["anon", A, M, C])
async def test_health_details_are_for_administrators_only(
    household: dict[str, str], make_client: MakeClient, who: str
) -> None:
    client = await make_client()
    if who != "anon":
        await client.login({"admin": "mum", "member": "ada", "child": "tim"}[who])
    r = await client.call("GET", "/api/health?details=true")
    assert r.status_code == 200
    details = r.json()["admin"]
    if who == A:
        assert details["connectors"] == {"instances": 0, "retained_bytes": 0, "members": []}
    else:
        assert details is None
    assert (await client.call("GET", "/api/health")).json()["admin"] is None


@pytest.mark.parametrize("who", [A, M, C])
async def test_a_token_reaches_only_its_routes_and_never_another_members_data(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, who: str
) -> None:
    """Every route, called with a token holding every scope: a route outside the token
    routes is 403 `token_route` whatever the role; inside them, the victim's
    conversation, its messages and her files stay out of reach (404, or not listed)."""
    from skald.features.tokens.auth import scope_for

    victim = await signed_in(make_client, "ada")
    conv = (await victim.call("POST", "/api/conversations", json={"title": "secret"})).json()["id"]
    r = await victim.call("POST", "/api/file", json={"path": "~/diary.txt", "content": "mine"})
    assert r.status_code == 201
    name = {A: "mum", M: "bob", C: "tim"}[who]
    if who == M:
        await runtime.core.users.create("bob", PASSWORD, "member")
    owner = await signed_in(make_client, name)
    body = {"name": "all", "scopes": ["chat", "files:read", "files:write", "openai"]}
    token = (await owner.call("POST", "/api/tokens", json=body)).json()["token"]
    anonymous = await make_client()
    bearer = {"Authorization": f"Bearer {token}"}
    checked = 0
    for method, path, handler in _routes(runtime):
        if method == "WS" or handler.opt.get("public") or handler.opt.get("ops"):  # type: ignore[attr-defined]
            continue
        if not path.startswith(("/api", "/v1")):
            continue
        concrete = _concrete(path).replace("x1", conv)
        r = await anonymous.http.request(method, concrete, headers=bearer, json={})
        reachable, _ = scope_for(method, concrete)
        if not reachable:
            assert r.status_code == 403, f"{who} {method} {path}: {r.status_code}"
            assert r.json()["error"]["code"] == "token_route"
            continue
        checked += 1
        assert conv not in r.text or r.status_code == 404, f"{who} {method} {concrete}: {r.text}"
        assert "diary.txt" not in r.text, f"{who} {method} {concrete}: {r.text}"
        assert r.status_code != 500
    assert checked >= 12
    # The victim's own token still sees her conversation.
    mine = (await victim.call("POST", "/api/tokens", json=body)).json()["token"]
    r = await anonymous.http.get("/api/conversations", headers={"Authorization": f"Bearer {mine}"})
    assert conv in r.text
