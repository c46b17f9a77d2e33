"""A member's stored connector secret never shows (issue 32, item 2): what a connector
prints to stderr, sends in log notifications and errors, or writes in place of a
message is redacted before it is stored, shown, logged or handed to the model, in every
spelling it reaches us in (JSON- and repr-escaped) and when a cut left only its head.

The end-to-end test runs a real personal stdio connector in the member's container
(tests/mcp_servers/leaky_server.py, which leaks both of its secrets everywhere it can);
the redaction rules themselves are pinned without Docker."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import PASSWORD
from connector_support import python_connector, running, switched_on
from sandbox_support import docker_fixture, sandbox_runtime_fixture  # noqa: F401

from skald.agent import CancelScope, ToolContext
from skald.agent.events import Event
from skald.core.runtime import Runtime
from skald.features.connectors.feedtool import write_index
from skald.features.connectors.redact import MASK, redact
from skald.features.connectors.tools import ConnectorTool, tools_for

TOKEN = "tok_5f3a9c2e7b1d4608a9e2c4f1"
# A password with a quote and a backslash: escaped differently by JSON and by repr.
SECRET_PASSWORD = 'pa"ss\\word-Quokka-42'
SPELLINGS = (
    TOKEN,
    SECRET_PASSWORD,
    json.dumps(SECRET_PASSWORD)[1:-1],
    repr(SECRET_PASSWORD)[1:-1],
    TOKEN[:10],  # the head a cut leaves (the protocol error's 80-character excerpt)
    SECRET_PASSWORD[:8],
)


def _leaks(text: str) -> list[str]:
    return [s for s in SPELLINGS if s in text]


def test_every_spelling_of_a_secret_and_a_cut_off_head_are_redacted() -> None:
    secrets = [TOKEN, SECRET_PASSWORD]
    texts = [
        f"token={TOKEN} password={SECRET_PASSWORD}",
        json.dumps({"token": TOKEN, "password": SECRET_PASSWORD}),
        repr(f"{'x' * 70}{TOKEN} {SECRET_PASSWORD}")[:80],  # cut inside the token
        f"{TOKEN[:12]}",  # a 2000-character stderr line cut 12 characters into it
        f"{SECRET_PASSWORD[:9]}",
    ]
    for text in texts:
        redacted = redact(text, secrets)
        assert _leaks(redacted) == [], (text, redacted)
        assert MASK in redacted
    # Ordinary text is left alone; a secret too short to redact safely is left too.
    assert redact("the clock was read", secrets) == "the clock was read"
    assert redact("abc and abc", ["abc"]) == "abc and abc"
    # Seven characters of a secret are not yet "its head": shorter pieces stay.
    assert redact(TOKEN[:7], secrets) == TOKEN[:7]


def _ignore(event: Event) -> None:
    pass


def _leaky_feed(root: Path) -> Path:
    python_connector(
        root,
        "leaky",
        "leaky_server.py",
        extra={
            "command": ["python3", "{DIR}/leaky_server.py"],
            "env": {"LEAK_TOKEN": "{SECRET:token}", "LEAK_PASSWORD": "{SECRET:password}"},
            "auth": {"type": "api_key", "fields": [{"name": "token"}, {"name": "password"}]},
            "scope": "personal",
        },
    )
    write_index(root, 1)
    return root


@pytest.mark.docker
@pytest.mark.timeout(300)
async def test_a_connectors_leaked_secret_never_reaches_errors_stderr_events_or_the_log(
    sandbox_runtime: Runtime, docker: Any, tmp_path: Path, logged: io.StringIO
) -> None:
    runtime = sandbox_runtime
    created = await runtime.core.users.create("ada", PASSWORD, "member")
    ada = created.user.id
    c = await switched_on(runtime, ada, _leaky_feed(tmp_path / "feed"), "leaky")
    handle = await runtime.core.users.unlock("ada", PASSWORD)
    await c.secrets(handle.db).put("leaky", "token", TOKEN)
    await c.secrets(handle.db).put("leaky", "password", SECRET_PASSWORD)
    await runtime.attach(handle)
    inst = await running(runtime, ada, "leaky", 120)
    member = runtime.user_runtimes[ada]
    tools = {
        t.tool: t
        for t in tools_for({"leaky": inst}, member.facade, 3)
        if isinstance(t, ConnectorTool)
    }
    ctx = ToolContext(
        conversation_id="conv", call_id="c", depth=0, cancel=CancelScope(), sink=_ignore
    )
    shown = []
    for name in ("leak", "fail"):
        result = await tools[name].run({}, ctx)
        assert result.is_error and MASK in result.content
        shown.append(result.content)
    # The server's log notifications are in (they come before the answer to `leak`).
    assert sum(e.kind == "log" for e in inst.events) == 2
    await tools["crash"].run({}, ctx)  # garbage on stdout, then the process exits
    for _ in range(300):
        row = await c.store.require("leaky")
        if row.last_stderr and row.last_error:
            break
        await asyncio.sleep(0.1)
    assert row.last_error is not None and "protocol error" in row.last_error
    assert row.last_stderr is not None and "auth failed with token=***" in row.last_stderr
    events = "\n".join(e.text for e in inst.events)
    assert MASK in events
    for text in (*shown, row.last_error, row.last_stderr, events, logged.getvalue()):
        assert _leaks(text) == [], text
