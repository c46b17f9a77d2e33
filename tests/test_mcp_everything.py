"""Skald's MCP client against the reference server (`@modelcontextprotocol/server-everything`
from npm), over stdio and over streamable HTTP on 127.0.0.1: real processes, no doubles."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from mcp_support import Recorder, everything_http, everything_stdio

from skald.mcp import (
    ElicitRequestParams,
    ElicitResult,
    Handlers,
    HttpTransport,
    LogRecord,
    McpSession,
    Related,
    RemoteError,
    connect,
    tool_specs,
)
from skald.mcp.wire import URL_ELICITATION_REQUIRED, CancelledParams, to_builtins

pytestmark = pytest.mark.timeout(120)

LONG = "trigger-long-running-operation"


class Seen:
    def __init__(self) -> None:
        self.tools_changed = asyncio.Event()
        self.logs: list[LogRecord] = []
        self.log_arrived = asyncio.Event()
        self.elicitations: list[ElicitRequestParams] = []
        self.related: list[Related] = []

    async def elicit(self, params: ElicitRequestParams, related: Related) -> ElicitResult:
        self.elicitations.append(params)
        self.related.append(related)
        return ElicitResult(action="accept", content={"name": "Ada Lovelace"})

    def on_log(self, record: LogRecord) -> None:
        self.logs.append(record)
        self.log_arrived.set()

    def handlers(self) -> Handlers:
        return Handlers(
            elicit=self.elicit, on_tools_changed=self.tools_changed.set, on_log=self.on_log
        )


@contextlib.asynccontextmanager
async def everything(kind: str, seen: Seen) -> AsyncIterator[tuple[McpSession, Recorder]]:
    with contextlib.ExitStack() as stack:
        if kind == "stdio":
            recorder = Recorder(everything_stdio())
        else:
            recorder = Recorder(HttpTransport(stack.enter_context(everything_http()), {}))
        session = await connect(recorder, name="everything", handlers=seen.handlers())
        try:
            yield session, recorder
        finally:
            await session.close()


@pytest.fixture(params=["stdio", "http"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_the_reference_server_lists_its_tools_calls_one_and_announces_new_ones(
    kind: str,
) -> None:
    seen = Seen()
    async with everything(kind, seen) as (session, _):
        assert session.protocol_version == "2025-11-25"
        # It registers the elicitation tools once it knows our capabilities, and says so.
        await asyncio.wait_for(seen.tools_changed.wait(), 30)
        tools = {tool.name: tool for tool in await session.list_tools()}
        assert {"get-sum", LONG, "trigger-elicitation-request", "echo"} <= set(tools)
        specs, refused = tool_specs("everything", list(tools.values()))
        assert "mcp__everything__get-sum" in {s.name for s in specs}
        assert refused == []
        result = await session.call_tool("get-sum", {"a": 2, "b": 40})
        assert not result.is_error
        assert "42" in result.text()


async def test_a_long_call_reports_progress_and_a_cancelled_one_is_dropped_by_the_server(
    kind: str,
) -> None:
    seen = Seen()
    async with everything(kind, seen) as (session, recorder):
        steps: list[tuple[float, float | None]] = []
        result = await session.call_tool(
            LONG, {"duration": 0.6, "steps": 3}, on_progress=lambda p, t, _m: steps.append((p, t))
        )
        assert steps == [(1, 3), (2, 3), (3, 3)]
        assert "completed" in result.text()

        first_progress = asyncio.Event()
        call = asyncio.create_task(
            session.call_tool(
                LONG, {"duration": 2, "steps": 20}, on_progress=lambda *_: first_progress.set()
            )
        )
        await asyncio.wait_for(first_progress.wait(), 30)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        calls = [m for m in recorder.sent if m.method == "tools/call"]
        cancelled_id = calls[-1].id
        notes = [m for m in recorder.sent if m.method == "notifications/cancelled"]
        assert [n.params["requestId"] for n in notes if n.params] == [cancelled_id]

        # A call that ends after the cancelled one would have: the server keeps order on
        # its stream, so had it not seen the cancellation, its answer would be in by then.
        after = await session.call_tool(LONG, {"duration": 2.5, "steps": 1})
        assert "completed" in after.text()
        answered = {m.id for m in recorder.received if m.is_response}
        # (Over HTTP the cancelled call's stream is closed by us, so its absence proves
        # nothing there; test_mcp_client.py shows an HTTP server seeing the cancel.)
        if kind == "stdio":
            assert cancelled_id not in answered
        assert not session.closed


async def test_an_elicitation_reaches_the_handler_and_the_answer_returns_to_the_server(
    kind: str,
) -> None:
    seen = Seen()
    async with everything(kind, seen) as (session, _):
        await asyncio.wait_for(seen.tools_changed.wait(), 30)
        result = await session.call_tool("trigger-elicitation-request", {}, context="the call")
        assert len(seen.elicitations) == 1
        # HTTP: the reference server sends it on the call's own stream, so it is known to
        # belong to that call; stdio cannot tell (the product then must not guess).
        expected = Related(known=True, context="the call") if kind == "http" else Related(False)
        assert seen.related == [expected]
        assert seen.elicitations[0].mode == "form"
        assert "name" in seen.elicitations[0].requested_schema["properties"]  # type: ignore[index]
        # The server reports what it received: our answer made the round trip.
        assert "Ada Lovelace" in result.text()
        assert '"action": "accept"' in result.text()


async def test_the_servers_log_notifications_are_recorded(kind: str) -> None:
    seen = Seen()
    async with everything(kind, seen) as (session, _):
        await session.set_log_level("debug")
        seen.logs.clear()
        seen.log_arrived.clear()
        await session.call_tool("toggle-simulated-logging", {})

        async def a_level_message() -> None:
            # Other records (about the toggle itself) may come first on a busy machine.
            while not any("-level message" in r.text for r in seen.logs):
                seen.log_arrived.clear()
                await seen.log_arrived.wait()

        await asyncio.wait_for(a_level_message(), 30)
        assert list(session.logs)[-len(seen.logs) :] == seen.logs


async def test_the_cancelled_notification_names_the_request_and_says_why() -> None:
    params = CancelledParams(request_id=7, reason="cancelled by the user")
    assert to_builtins(params) == {"requestId": 7, "reason": "cancelled by the user"}


async def test_a_url_elicitation_reaches_the_handler_with_its_url_and_the_answer_returns() -> None:
    seen = Seen()
    async with everything("stdio", seen) as (session, _):
        await asyncio.wait_for(seen.tools_changed.wait(), 30)
        args = {"url": "https://example.org/sign-in", "elicitationId": "el-1"}
        result = await session.call_tool("trigger-url-elicitation", args)
        [asked] = seen.elicitations
        assert (asked.mode, asked.url, asked.elicitation_id) == ("url", args["url"], "el-1")
        assert "accept" in result.text()
        # The error path: the call is refused with -32042 and the URL to open in `data`.
        with pytest.raises(RemoteError) as caught:
            await session.call_tool(
                "trigger-url-elicitation", {**args, "errorPath": True, "elicitationId": "el-2"}
            )
        assert caught.value.code == URL_ELICITATION_REQUIRED
        assert "elicitations" in caught.value.data
