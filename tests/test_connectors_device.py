"""QR/device sign-in of a connector (`auth: qr`) against a real MCP server built with
the official Python SDK (tests/mcp_servers/device_server.py, streamable HTTP on
127.0.0.1): the member's Connectors page calls the connector's `login_status` and
`logout` tools through the supervisor, on the member's own instance; the model is never
offered those two tools."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
from conftest import MakeClient, signed_in
from connector_support import SERVERS, running, simple_feed
from mcp_support import free_port, serving

from skald.agent import CancelScope, ToolContext
from skald.agent.events import Event
from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.tools import tools_for

PENDING = 2  # login_status answers a QR code twice, then "signed in as ada"


def _ignore(event: Event) -> None:
    pass


@contextmanager
def device_server() -> Iterator[str]:
    port = free_port()
    with serving(port, SERVERS / "device_server.py", str(port), str(PENDING)) as url:
        yield url


@contextmanager
def device_feed(tmp_path: Path) -> Iterator[Path]:
    """The device server running, offered by a feed as ada's QR-signed connector `phone`
    (here and in tests/test_ui_connectors_e2e.py)."""
    with device_server() as url:
        phone = {"scope": "personal", "transport": "http", "url": url, "auth": {"type": "qr"}}
        yield simple_feed(tmp_path / "feed", ("phone",), phone=phone)


async def test_qr_sign_in_shows_the_code_until_signed_in_and_the_model_never_sees_the_tools(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    with device_feed(tmp_path) as feed:
        c = service.require(runtime.server)
        c.config = msgspec.structs.replace(c.config, feed=str(feed))
        await c.installer.install(c.feed(), "phone")
        ada = await signed_in(make_client, "ada")
        r = await ada.call("POST", "/api/connectors/phone/activate")
        assert r.status_code == 200, r.text
        inst = await running(runtime, household["ada"], "phone")

        # The model: the connector's ordinary tool, never the sign-in ones.
        assert [t.name for t in inst.tools] == ["whoami"]
        mine = runtime.user_runtimes[household["ada"]]
        model_tools = {t.name for t in mine.all_tools() if t.name.startswith("mcp__phone")}
        assert model_tools == {"mcp__phone__whoami"}
        # The catalogue shape (many connectors) hides them too: not listed, not callable.
        activate, call = tools_for({"phone": inst}, mine.facade, catalogue_above=0)
        ctx = ToolContext(
            conversation_id="conv", call_id="c", depth=0, cancel=CancelScope(), sink=_ignore
        )
        listing = (await activate.run({"connector": "phone"}, ctx)).content
        assert "whoami" in listing and "login_status" not in listing and "logout" not in listing
        for hidden in ("login_status", "logout"):
            refused = await call.run({"connector": "phone", "tool": hidden, "arguments": {}}, ctx)
            assert refused.is_error and "has no tool" in refused.content
        listed = (await ada.call("GET", "/api/connectors/phone")).json()
        assert listed["auth"] == "qr" and [t["name"] for t in listed["tools"]] == [
            "mcp__phone__whoami"
        ]

        # The page: a QR code (a real PNG) and a pairing code, until the server says signed in.
        for _ in range(PENDING):
            r = await ada.call("POST", "/api/connectors/phone/login-status")
            assert r.status_code == 200, r.text
            status = r.json()
            assert status["signed_in"] is False
            assert "4242-ABCD" in status["text"]
            [image] = status["images"]
            assert image["mime_type"] == "image/png"
            assert base64.b64decode(image["data"]).startswith(b"\x89PNG\r\n\x1a\n")
        # Another member (here an administrator, who may use every connector) reaches no
        # instance of ada's: nothing is called, her sign-in does not advance.
        mum = await signed_in(make_client, "mum")
        r = await mum.call("POST", "/api/connectors/phone/login-status")
        assert r.status_code == 409 and "switch phone on" in r.text
        status = (await ada.call("POST", "/api/connectors/phone/login-status")).json()
        assert status == {
            "signed_in": True,
            "text": "signed in as ada",
            "images": [],
            "is_error": False,
        }

        # Sign out: the connector's own logout; the next status asks for a code again.
        r = await ada.call("POST", "/api/connectors/phone/logout")
        assert r.status_code == 200 and r.json()["text"] == "signed out"
        again = (await ada.call("POST", "/api/connectors/phone/login-status")).json()
        assert again["signed_in"] is False and len(again["images"]) == 1

        # Switched off, there is no instance to ask.
        await ada.call("POST", "/api/connectors/phone/deactivate")
        r = await ada.call("POST", "/api/connectors/phone/login-status")
        assert r.status_code == 409
