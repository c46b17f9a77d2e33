"""The streamable-HTTP session id: taken from the initialize answer only, and a 404 on a
request carrying it ends the session: nothing is sent on the dead id again, and only the
request that met the 404 (the server did not run it) is marked `SessionExpired`, so the
caller may send it once more on a new session, after a fresh initialize.

The server is a small scripted HTTP double on 127.0.0.1 (tests/mcp_session_double.py: a
real socket, a real httpx client)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import pytest
from mcp_session_double import SessionDouble, session_double

from skald.mcp import Disconnected, HttpTransport, McpSession, SessionExpired, connect


@pytest.fixture
def double() -> Iterator[SessionDouble]:
    with session_double() as server:
        yield server


@contextlib.asynccontextmanager
async def _session(double: SessionDouble) -> AsyncIterator[McpSession]:
    """A new session with the double over streamable HTTP, closed afterwards."""
    session = await connect(HttpTransport(double.url), name="double")
    try:
        yield session
    finally:
        await session.close()


async def test_the_session_id_is_the_initialize_answers_and_a_later_one_never_replaces_it(
    double: SessionDouble,
) -> None:
    transport = HttpTransport(double.url)
    session = await connect(transport, name="double")
    try:
        double.later_id = "second"  # every later answer names another session
        await session.list_tools()
        await session.ping()
        await session.ping()
        assert transport.session_id == "s1"
        after = double.seen[1:]
        assert [m for m, _, _ in after] == [
            "notifications/initialized",
            "tools/list",
            "ping",
            "ping",
        ]
        assert {carried for _, carried, _ in after} == {"s1"}
    finally:
        await session.close()


async def test_a_404_ends_the_session_and_nothing_is_sent_again_on_the_dead_id(
    double: SessionDouble,
) -> None:
    async with _session(double) as session:
        await session.ping()
        double.forget_all()
        # The request that met the 404 was not run: it says so (a caller may resend it).
        with pytest.raises(SessionExpired, match="HTTP 404"):
            await session.call_tool("now", {})
        failure = await session.wait_closed()
        assert failure is not None and "ended the session (HTTP 404)" in failure.reason
        assert not isinstance(failure, SessionExpired)  # the session's end is a plain one
        # Nothing more goes to the dead id: the next call fails here, at once.
        with pytest.raises(Disconnected) as later:
            await session.ping()
        assert not isinstance(later.value, SessionExpired)
        assert double.sent_on("s1")[-1] == ("tools/call", 404)
        assert [m for m, _ in double.sent_on("s1")].count("ping") == 1
    # A new session starts with a fresh initialize (no id) and gets a new id.
    async with _session(double) as fresh:
        result = await fresh.call_tool("now", {})
        assert result.text() == "ran on s2"
        initializes = [carried for m, carried, _ in double.seen if m == "initialize"]
        assert initializes == [None, None]
        assert double.sent_on("s1")[-1] == ("tools/call", 404)  # still nothing after it


async def test_a_call_in_flight_when_another_meets_the_404_is_not_marked_as_not_run(
    double: SessionDouble,
) -> None:
    """It may have run (tool calls are not idempotent): only the refused one may be resent."""
    async with _session(double) as session:
        try:
            held = asyncio.create_task(session.call_tool("hold", {}))
            while "hold" not in double.arrived:  # noqa: ASYNC110 - the server thread appends
                await asyncio.sleep(0.01)
            double.forget_all()
            with pytest.raises(SessionExpired):
                await session.call_tool("now", {})
            with pytest.raises(Disconnected) as in_flight:
                await held
            assert not isinstance(in_flight.value, SessionExpired)
        finally:
            double.release.set()
