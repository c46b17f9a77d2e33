"""Skald's MCP client (`skald.mcp`) against servers written with the official Python SDK
(tests/mcp_servers/sdk_server.py): paging, the requests a server makes of us, and the bad
cases (garbage, a wrong protocol version, a hang in the handshake, a death mid-call),
each killed and reaped. Real processes throughout."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from mcp_support import (
    alive,
    child_env,
    child_pids,
    markers,
    open_fds,
    sdk_http,
    sdk_stdio,
    settle,
    wait_markers,
)

from skald.mcp import (
    Disconnected,
    ElicitRequestParams,
    ElicitResult,
    Handlers,
    HttpTransport,
    Related,
    RequestTimeout,
    Root,
    SchemaError,
    StdioTransport,
    Timeouts,
    Tool,
    connect,
    tool_spec,
    tool_specs,
)

pytestmark = pytest.mark.timeout(180)


async def _ask(_params: ElicitRequestParams, _related: Related) -> ElicitResult:
    return ElicitResult(action="accept", content={"colour": "teal"})


async def test_tools_are_listed_across_every_page_of_cursors() -> None:
    session = await connect(sdk_stdio("ok"), name="sdk")
    try:
        names = [tool.name for tool in await session.list_tools()]
    finally:
        await session.close()
    # 7 tools, 3 a page: three requests, one list in the server's order.
    assert names == ["echo", "wait", "sample", "roots", "ask", "six", "seven"]


async def test_sampling_is_refused_roots_come_from_the_caller_and_a_form_gets_its_defaults() -> (
    None
):
    async def roots() -> list[Root]:
        return [Root(uri="file:///home/ada/notes", name="notes")]

    session = await connect(
        sdk_stdio("ok"), name="sdk", handlers=Handlers(elicit=_ask, roots=roots)
    )
    try:
        sampled = await session.call_tool("sample", {})
        assert "sampling refused" in sampled.text()
        assert "does not offer sampling" in sampled.text()
        assert (await session.call_tool("roots", {})).text() == "file:///home/ada/notes"
        # The member typed only the colour; the schema's default fills the shade (SEP-1034).
        answer = (await session.call_tool("ask", {})).text()
        assert answer == "accept: {'colour': 'teal', 'shade': 'dark'}"
    finally:
        await session.close()


async def test_without_an_elicitation_handler_the_request_is_declined() -> None:
    session = await connect(sdk_stdio("ok"), name="sdk")
    try:
        assert (await session.call_tool("ask", {})).text().startswith("decline")
    finally:
        await session.close()


@pytest.mark.parametrize("kind", ["stdio", "http"])
async def test_cancelling_the_awaiting_task_cancels_the_call_on_the_server(
    kind: str, tmp_path: Path
) -> None:
    async def run(session_transport: StdioTransport | HttpTransport) -> None:
        session = await connect(session_transport, name="sdk")
        try:
            call = asyncio.create_task(session.call_tool("wait", {}))
            # Once the server's handler runs, Stop is pressed.
            assert await wait_markers(tmp_path, "started-*") == ["running"]
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            # The server writes its marker when the SDK cancels the handler; a ping
            # afterwards shows the session is still fine.
            await wait_markers(tmp_path)
            await session.ping()
        finally:
            await session.close()

    if kind == "stdio":
        await run(sdk_stdio("ok", tmp_path))
    else:
        with sdk_http(tmp_path) as url:
            await run(HttpTransport(url, {}))
    assert markers(tmp_path) == ["seen"]


async def test_a_server_without_a_get_stream_does_not_hold_up_the_handshake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The handshake waits for the GET stream to open *or fail*; were it to wait for the
    # bound instead, this connect would hang for an hour.
    monkeypatch.setattr("skald.mcp.http.GET_STREAM_WAIT_SECONDS", 3600.0)
    with sdk_http(tmp_path, "http-stateless") as url:
        session = await asyncio.wait_for(connect(HttpTransport(url, {}), name="sdk"), 60)
        try:
            assert len(await session.list_tools()) == 7
        finally:
            await session.close()


async def test_a_request_that_times_out_is_cancelled_and_the_session_lives_on(
    tmp_path: Path,
) -> None:
    session = await connect(sdk_stdio("ok", tmp_path), name="sdk")
    try:
        with pytest.raises(RequestTimeout) as caught:
            await session.call_tool("wait", {}, timeout=2)
        assert str(caught.value) == "connector 'sdk' did not answer tools/call within 2 s"
        assert markers(tmp_path, "started-*") == ["running"]
        assert (await session.call_tool("echo", {"text": "still here"})).text() == "still here"
        assert await wait_markers(tmp_path) == ["seen"]
    finally:
        await session.close()


async def test_a_server_that_dies_mid_call_fails_the_call_with_the_disconnect_text() -> None:
    transport = sdk_stdio("die")
    session = await connect(transport, name="notes", handlers=Handlers(elicit=_ask))
    pid = transport.pid
    assert pid is not None
    with pytest.raises(Disconnected) as caught:
        await session.call_tool("echo", {"text": "x"})
    assert str(caught.value) == "connector 'notes' disconnected: the process exited with status 3"
    assert session.closed
    assert not alive(pid)
    with pytest.raises(Disconnected, match=r"^connector 'notes' disconnected: "):
        await session.list_tools()


async def test_a_supervisor_can_wait_for_a_session_to_end_and_learn_why() -> None:
    session = await connect(sdk_stdio("die"), name="notes")
    waiter = asyncio.create_task(session.wait_closed())
    with pytest.raises(Disconnected):
        await session.call_tool("echo", {"text": "x"})
    failure = await asyncio.wait_for(waiter, 30)
    assert str(failure) == "connector 'notes' disconnected: the process exited with status 3"

    session = await connect(sdk_stdio("ok"), name="notes")
    waiter = asyncio.create_task(session.wait_closed())
    await session.close()
    assert await asyncio.wait_for(waiter, 30) is None  # closed by us: no failure


async def test_garbage_on_stdout_is_a_protocol_error_and_the_server_is_killed() -> None:
    transport = sdk_stdio("banner")
    with pytest.raises(Disconnected) as caught:
        await connect(transport, name="chatty")
    text = str(caught.value)
    assert text.startswith("connector 'chatty' disconnected: protocol error: ")
    assert "my-server 1.0 starting up" in text
    assert transport.pid is not None and not alive(transport.pid)


async def test_a_bad_handshake_is_a_protocol_error_and_the_waiting_server_is_reaped() -> None:
    transport = sdk_stdio("badversion")
    with pytest.raises(Disconnected) as caught:
        await connect(transport, name="old", timeouts=Timeouts(handshake=20))
    assert str(caught.value).startswith(
        "connector 'old' disconnected: protocol error: the server speaks protocol version '1999-01-01'"
    )
    assert transport.pid is not None and not alive(transport.pid)
    assert transport.pid not in child_pids()


async def test_a_server_hanging_in_the_handshake_times_out_and_its_whole_group_is_killed(
    tmp_path: Path,
) -> None:
    transport = sdk_stdio("hang", tmp_path)
    with pytest.raises(Disconnected) as caught:
        await connect(transport, name="stuck", timeouts=Timeouts(handshake=6))
    assert str(caught.value) == "connector 'stuck' disconnected: no answer to initialize within 6 s"
    # It ignored SIGTERM and started a child of its own: both are gone.
    assert transport.pid is not None and not alive(transport.pid)
    grandchild = int(markers(tmp_path, "grandchild")[0])
    for _ in range(100):  # the grandchild is reaped by init, not by us
        if not alive(grandchild):
            break
        await asyncio.sleep(0.05)
    assert not alive(grandchild)


async def test_a_refused_initialize_is_a_disconnect_with_the_servers_words() -> None:
    answer = '{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"unknown client"}}'
    transport = StdioTransport(
        ["/bin/sh", "-c", f"read line; echo '{answer}'; sleep 30"], env=child_env()
    )
    with pytest.raises(Disconnected) as caught:
        await connect(transport, name="picky")
    assert str(caught.value) == (
        "connector 'picky' disconnected: the server refused to start a session: unknown client"
    )
    assert transport.pid is not None and not alive(transport.pid)


async def test_a_command_that_does_not_exist_is_a_disconnect_naming_it() -> None:
    transport = StdioTransport(["/nonexistent/mcp-server"], env=child_env())
    with pytest.raises(Disconnected) as caught:
        await connect(transport, name="ghost")
    assert str(caught.value) == (
        "connector 'ghost' disconnected: cannot start '/nonexistent/mcp-server': "
        "No such file or directory"
    )


async def test_an_http_server_that_is_not_there_is_a_disconnect() -> None:
    from mcp_support import free_port

    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(Disconnected, match=r"^connector 'gone' disconnected: cannot reach "):
        await connect(HttpTransport(url, {}), name="gone")


async def test_stderr_is_kept_in_a_bounded_ring_for_the_admins() -> None:
    script = "import sys\nfor i in range(1000): print('line', i, file=sys.stderr)\nsys.exit(1)"
    transport = StdioTransport([sys.executable, "-c", script], env=child_env())
    with pytest.raises(Disconnected, match=r"exited with status 1$"):
        await connect(transport, name="noisy")
    tail = transport.stderr_tail(3)
    assert tail == ["line 997", "line 998", "line 999"]
    assert len(transport.stderr_tail(10_000)) == 200


FAILED_STARTS = [
    # exits at once, writes garbage, does not exist, answers with a wrong version
    [sys.executable, "-c", "import sys; sys.exit(2)"],
    ["/bin/sh", "-c", "echo 'hello world'; sleep 30"],
    ["/nonexistent/server"],
    [
        "/bin/sh",
        "-c",
        'read line; echo \'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1999-01-01",'
        '"capabilities":{},"serverInfo":{"name":"x"}}}\'; sleep 30',
    ],
]


async def test_two_hundred_failed_starts_leave_fd_and_child_counts_flat() -> None:
    # One start first, so lazily created things (the child watcher, codecs) exist.
    with pytest.raises(Disconnected):
        await connect(StdioTransport(FAILED_STARTS[0], env=child_env()), name="warm")
    await settle()
    fds, children = open_fds(), child_pids()
    reasons: set[str] = set()
    for i in range(200):
        argv = FAILED_STARTS[i % len(FAILED_STARTS)]
        with pytest.raises(Disconnected) as caught:
            await connect(StdioTransport(argv, env=child_env()), name="bad")
        reasons.add(caught.value.reason[:30])
    await settle()
    # Never more than before: a leak grows the counts. (Fewer is fine: in a test worker
    # that ran other tests first, their leftovers may close or be reaped meanwhile.)
    assert open_fds() <= fds
    assert child_pids() <= children
    assert len(reasons) == 4  # every kind of failure was really exercised


async def test_a_server_gone_before_the_first_write_is_reported_by_its_exit_status() -> None:
    """A server that has closed its input before Skald writes, then exits with status 3.
    The refused write comes before the exit can be read. The reason must still say
    how the process ended, not "cannot write" (which one won was a race: the 200
    failed starts above once saw both)."""
    script = "exec 0<&-; echo closed >&2; sleep 0.3; exit 3"

    async def start(limit: int) -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            script,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=child_env(),
            start_new_session=True,
            limit=limit,
        )
        assert proc.stderr is not None
        assert await proc.stderr.readline() == b"closed\n"  # its input is closed now
        return proc

    with pytest.raises(Disconnected) as caught:
        await connect(StdioTransport(["sh"], env=child_env(), start=start), name="gone")
    assert caught.value.reason == "the process exited with status 3"


def _nested(levels: int) -> dict[str, object]:
    schema: dict[str, object] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "array", "items": schema}
    return schema


def _tool(name: str, schema: object, description: str = "does things") -> Tool:
    return Tool(name=name, description=description, input_schema=schema)  # type: ignore[arg-type]


def test_a_tool_becomes_a_model_tool_named_after_its_connector() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    spec = tool_spec("web search", _tool("find.pages/v2", schema))
    assert spec.name == "mcp__web_search__find_pages_v2"
    assert spec.description == "does things"
    assert spec.parameters == schema


@pytest.mark.parametrize(
    ("schema", "description", "problem"),
    [
        ({"type": "string"}, "x", "not a JSON object schema"),
        ({"type": "object", "properties": []}, "x", '"properties" must map'),
        ({"type": "object", "required": "q"}, "x", '"required" must be a list'),
        (
            {
                "type": "object",
                "properties": {
                    f"p{i}": {"type": "string", "description": "d" * 100} for i in range(400)
                },
            },
            "x",
            "over the limit",
        ),
        ({"type": "object", "properties": {"a": _nested(20)}}, "x", "nests deeper"),
        ({"type": "object"}, "y" * 5000, "the description is 5000 characters"),
    ],
)
def test_a_malformed_or_oversized_tool_is_refused_with_a_message_naming_it(
    schema: object, description: str, problem: str
) -> None:
    with pytest.raises(SchemaError) as caught:
        tool_spec("files", _tool("read", schema, description))
    assert str(caught.value).startswith("connector 'files' tool 'read' cannot be offered: ")
    assert problem in str(caught.value)


def test_the_good_tools_of_a_server_are_offered_when_one_is_refused() -> None:
    good = _tool("ok", {"type": "object"})
    bad = _tool("bad", {"type": "array"})
    twin = _tool("o.k", {"type": "object"})  # sanitises to the same name as "ok"... no: o_k
    long_name = _tool("x" * 70, {"type": "object"})
    specs, refused = tool_specs("srv", [good, bad, twin, long_name])
    assert [s.name for s in specs] == ["mcp__srv__ok", "mcp__srv__o_k"]
    assert [e.tool for e in refused] == ["bad", "x" * 70]


async def test_fifty_failed_http_connects_leave_the_fd_count_flat() -> None:
    from mcp_support import free_port

    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(Disconnected):
        await connect(HttpTransport(url, {}), name="warm")
    await settle()
    fds = open_fds()
    for _ in range(50):
        with pytest.raises(Disconnected):
            await connect(HttpTransport(url, {}), name="gone")
    await settle()
    assert open_fds() <= fds  # fewer: another test's leftovers closed meanwhile
