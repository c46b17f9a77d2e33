"""Adding a server without writing a feed (issue 23 item 6): an administrator adds a
connector by npm package, PyPI package, command line or URL, Tests it (a throwaway
instance that lists its tools), saves it into the household's own feed (a registry
table), and members use it like any feed item, with no restart; several feeds at once,
each item naming where it came from; only administrators add, test or remove, and
secrets never come back.

Real servers: `@modelcontextprotocol/server-memory` resolved and installed by npm (the
product's own lock resolution and `npm ci`), the SDK clock server over stdio and
streamable HTTP.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import PASSWORD, Client, signed_in
from connector_support import SERVERS, running, simple_feed
from fake_llm import Call, FakeLLM
from prerequisites import unavailable
from sandbox_support import docker_fixture, sandbox_runtime_fixture  # noqa: F401

from skald.approvals.rules import Rule
from skald.core.conversations import Sent
from skald.core.runtime import Runtime
from skald.errors import ConflictError
from skald.features.connectors import service
from skald.features.connectors.household_box import LABEL_CONNECTOR
from skald.features.connectors.own import OwnIn, build
from skald.features.connectors.service import DEFAULT_FEED, ConnectorsConfig
from skald.features.connectors.trial import trial
from skald.sandbox.manager import LABEL_INSTANCE

MakeClient = Callable[[], Awaitable[Client]]
MEMORY = "@modelcontextprotocol/server-memory@2026.8.31"


def _config(runtime: Runtime, **fields: Any) -> service.Connectors:
    c = service.require(runtime.server)
    c.config = ConnectorsConfig(household_on_host=True, **fields)
    return c


def _clock(name: str = "clock", **fields: Any) -> dict[str, Any]:
    line = f"{sys.executable} {SERVERS / 'clock_server.py'}"
    return {"name": name, "kind": "command", "command": line, "scope": "household", **fields}


async def test_an_admin_adds_server_memory_by_package_name_tests_it_and_a_member_uses_it(
    runtime: Runtime,
    make_client: MakeClient,
    household: dict[str, str],
    fake_llm: FakeLLM,
    tmp_path: Path,
) -> None:
    if shutil.which("npm") is None or shutil.which("node") is None:
        unavailable("node and npm are required for server-memory")
    _config(runtime)
    shipped = sorted(p.name for p in DEFAULT_FEED.iterdir())
    memory_file = tmp_path / "memory.jsonl"
    item = {
        "name": "memory",
        "kind": "npm",
        "package": MEMORY,
        "scope": "household",
        "env": {"MEMORY_FILE_PATH": str(memory_file)},
    }
    mum = await signed_in(make_client, "mum")
    r = await mum.call("POST", "/api/connector-items/test", json={"item": item})
    assert r.status_code == 200, r.text
    assert r.json()["ok"] is True, r.json()
    assert {"create_entities", "read_graph"} <= {t["name"] for t in r.json()["tools"]}
    # The test left nothing installed.
    assert (await mum.call("GET", "/api/connectors")).json() == []
    r = await mum.call("POST", "/api/connector-items", json=item)
    assert r.status_code == 201, r.text
    listing = {i["folder"]: i for i in (await mum.call("GET", "/api/marketplace")).json()}
    assert listing["memory"]["source"] == "household"
    assert listing["memory"]["installed_version"] == 1
    assert listing["time"]["source"] == "shipped"
    # No feed was written: the shipped one is as it was.
    assert sorted(p.name for p in DEFAULT_FEED.iterdir()) == shipped
    ada = await signed_in(make_client, "ada")
    assert (await ada.call("POST", "/api/connectors/memory/activate")).json()["active"] is True
    inst = await running(runtime, "", "memory", 120)
    assert "mcp__memory__create_entities" in {s.name for s in inst.specs}
    await runtime.core.registry.save_rule(
        Rule(0, "default", "@mcp:memory", None, "allow", 5, "test"), create=True
    )
    provider = await runtime.llm.add_provider(
        "Fake", "openai_compatible", fake_llm.base_url_openai, "sk-test-123"
    )
    await runtime.llm.add_model(provider.id, "m", "m", "average", ["tools"], 1, True)
    entity = {"name": "Ada", "entityType": "person", "observations": ["likes tea"]}
    fake_llm.script(
        "m", [[Call("mcp__memory__create_entities", {"entities": [entity]})], "remembered"]
    )
    svc = runtime.conversations
    conversation = await svc.create(household["ada"])
    sent = await svc.send(household["ada"], conversation.id, "remember that I like tea")
    assert isinstance(sent, Sent)
    assert (await svc.wait(household["ada"], sent)).reply == "remembered"
    assert "likes tea" in memory_file.read_text()


async def test_a_stdio_command_and_a_url_are_tested_saved_and_listed_with_their_source(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str]
) -> None:
    _config(runtime)
    mum = await signed_in(make_client, "mum")
    r = await mum.call("POST", "/api/connector-items/test", json={"item": _clock()})
    assert r.status_code == 200 and r.json()["ok"] is True, r.text
    assert "now" in {t["name"] for t in r.json()["tools"]}
    # A server that cannot start is an answer, not a failed request.
    broken = _clock(command=f"{sys.executable} -c 'import sys; sys.exit(3)'")
    r = await mum.call("POST", "/api/connector-items/test", json={"item": broken})
    assert r.status_code == 200 and r.json()["ok"] is False and r.json()["error"]
    assert (await mum.call("POST", "/api/connector-items", json=_clock())).status_code == 201
    ada = await signed_in(make_client, "ada")
    assert [c["name"] for c in (await ada.call("GET", "/api/connectors")).json()] == ["clock"]
    assert (await ada.call("POST", "/api/connectors/clock/activate")).json()["active"] is True
    await running(runtime, "", "clock", 120)
    # Saved again: the next version, installed over the old one.
    again = _clock(display_name="Tick tock")
    r = await mum.call("POST", "/api/connector-items", json=again)
    assert r.status_code == 201, r.text
    assert (r.json()["version"], r.json()["display_name"]) == (2, "Tick tock")
    await running(runtime, "", "clock", 120)
    # Removing it uninstalls it and drops it from the household's feed.
    assert (await mum.call("DELETE", "/api/connector-items/clock")).status_code == 204
    assert (await ada.call("GET", "/api/connectors")).json() == []
    assert "clock" not in {i["folder"] for i in (await mum.call("GET", "/api/marketplace")).json()}
    assert (await mum.call("DELETE", "/api/connector-items/clock")).status_code == 404


async def test_only_administrators_add_test_or_remove_and_members_get_403(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str]
) -> None:
    _config(runtime)
    ada = await signed_in(make_client, "ada")
    tim = await signed_in(make_client, "tim")
    for client in (ada, tim):
        r = await client.call("POST", "/api/connector-items/test", json={"item": _clock()})
        assert r.status_code == 403
        assert (await client.call("POST", "/api/connector-items", json=_clock())).status_code == 403
        assert (await client.call("DELETE", "/api/connector-items/clock")).status_code == 403
    assert await service.require(runtime.server).own.all() == []


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ({"kind": "npm", "package": "Not A Package!"}, "not an npm package"),
        ({"kind": "pip", "package": "x; rm -rf /"}, "not a PyPI package"),
        ({"kind": "command", "command": "node 'unclosed"}, "not a valid command line"),
        ({"kind": "command", "command": "  "}, "empty"),
        ({"kind": "url", "url": "ftp://example.org/mcp"}, "http"),
        ({"kind": "command", "command": "x", "headers": {"A": "b"}}, "headers"),
        ({"kind": "url", "url": "http://h/{SECRET:KEY}", "scope": "household"}, "household"),
        ({"kind": "url", "url": "http://h/", "colour": "red"}, "colour"),
        ({"kind": "command", "command": "x", "name": "Bad Name"}, "name"),
    ],
)
async def test_bad_input_is_a_clear_400_and_nothing_is_stored(
    runtime: Runtime,
    make_client: MakeClient,
    household: dict[str, str],
    item: dict[str, Any],
    says: str,
) -> None:
    _config(runtime)
    mum = await signed_in(make_client, "mum")
    body = {"name": "thing", **item}
    for path, payload in (
        ("/api/connector-items/test", {"item": body}),
        ("/api/connector-items", body),
    ):
        r = await mum.call("POST", path, json=payload)
        assert r.status_code == 400, r.text
        assert says.lower() in r.text.lower()
    assert await service.require(runtime.server).own.all() == []


async def test_a_name_another_feed_offers_is_refused_and_extra_feeds_list_with_their_source(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    extra = simple_feed(tmp_path / "extra", ("clock", "time"))
    _config(runtime, feeds=[str(extra), str(tmp_path / "missing")])
    mum = await signed_in(make_client, "mum")
    r = await mum.call("POST", "/api/connector-items", json=_clock("time"))
    assert r.status_code == 409 and "shipped" in r.text
    r = await mum.call("POST", "/api/connector-items", json=_clock("clock"))
    assert r.status_code == 409 and str(extra) in r.text
    assert (await mum.call("POST", "/api/connector-items", json=_clock("tick"))).status_code == 201
    listing = [
        (i["folder"], i["source"], i["refused"])
        for i in (await mum.call("GET", "/api/marketplace")).json()
    ]
    sources = {(f, s) for f, s, _ in listing}
    assert {("time", "shipped"), ("clock", str(extra)), ("tick", "household")} <= sources
    # The extra feed's "time" is shadowed by the shipped one, and says so.
    assert ("time", str(extra), "shipped already offers time") in listing
    r = await mum.call("POST", "/api/marketplace/clock/install")
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "clock"


async def test_secrets_become_member_fields_and_never_come_back_from_a_test(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str]
) -> None:
    _config(runtime)
    mum = await signed_in(make_client, "mum")
    secret = "sk-very-secret-value-123456"
    item = {
        "name": "remote",
        "kind": "url",
        "url": "http://127.0.0.1:1/mcp?key={SECRET:KEY}",
        "headers": {"Authorization": "Bearer {SECRET:TOKEN}"},
        "scope": "personal",
    }
    r = await mum.call(
        "POST",
        "/api/connector-items/test",
        json={"item": item, "secrets": {"KEY": secret, "TOKEN": secret}},
    )
    assert r.status_code == 200 and r.json()["ok"] is False
    assert secret not in r.text
    # A secret the test was not given is the request's fault.
    r = await mum.call("POST", "/api/connector-items/test", json={"item": item})
    assert r.status_code == 400 and "KEY" in r.text
    r = await mum.call("POST", "/api/connector-items", json=item)
    assert r.status_code == 201, r.text
    assert r.json()["auth"] == "api_key"
    assert {f["name"] for f in r.json()["secret_fields"]} == {"KEY", "TOKEN"}
    ada = await signed_in(make_client, "ada")
    r = await ada.call("PUT", "/api/connectors/remote/secrets", json={"values": {"KEY": secret}})
    assert r.status_code == 200, r.text
    assert secret not in r.text
    assert secret not in (await mum.call("GET", "/api/connectors/remote")).text
    assert secret not in json.dumps((await mum.call("GET", "/api/marketplace")).json())


async def _memory_passes_its_test(c: service.Connectors, admin: str, scope: str) -> None:
    """server-memory as the `admin`'s own npm item in `scope` passes its Test, where it
    lists its tools."""
    manifest, files = await build(OwnIn(name="memory", kind="npm", package=MEMORY, scope=scope))
    out = await trial(c, admin, manifest, files, {})
    assert out.ok, out
    assert "read_graph" in {t.name for t in out.tools}


@pytest.mark.docker
async def test_a_personal_item_is_tested_inside_the_admins_own_container(
    sandbox_runtime: Runtime, docker: Any
) -> None:
    """The Test of a personal npm item installs and runs it in the administrator's
    container, as a member's first start does, and leaves nothing running there."""
    if shutil.which("npm") is None:
        unavailable("npm is required to resolve server-memory")
    runtime = sandbox_runtime
    created = await runtime.core.users.create("mum", PASSWORD, "admin")
    c = service.require(runtime.server)
    ca = os.environ.get("NODE_EXTRA_CA_CERTS") or os.environ.get("SSL_CERT_FILE") or ""
    c.config = ConnectorsConfig(extra_ca_file=ca)
    await runtime.attach(await runtime.core.users.unlock("mum", PASSWORD))
    await _memory_passes_its_test(c, created.user.id, "personal")
    assert runtime.sandbox is not None
    deps = runtime.sandbox.homes_dir / created.user.id / ".skald" / "connectors" / "deps"
    assert any(
        (d / "node_modules" / "@modelcontextprotocol" / "server-memory").is_dir()
        for d in deps.iterdir()
    )
    container = docker.containers.get(await runtime.sandbox.container_id(created.user.id))
    assert "server-memory" not in json.dumps(container.top(ps_args="-eww -o pid,args"))
    assert list((c.root / ".trials").iterdir()) == []


async def test_a_personal_test_while_the_admins_data_is_locked_is_a_409_not_a_crash(
    runtime: Runtime, household: dict[str, str]
) -> None:
    c = _config(runtime)
    manifest, files = await build(OwnIn(name="tick", kind="command", command="node x.js"))
    with pytest.raises(ConflictError, match="locked"):
        await trial(c, household["mum"], manifest, files, {})


async def test_a_pypi_package_runs_as_its_module_from_the_dependencies_folder() -> None:
    manifest, files = await build(
        OwnIn(
            name="time",
            kind="pip",
            package="mcp-server-time==2025.9.25",
            args="--local-timezone UTC",
        )
    )
    assert manifest.command == ["python3", "-m", "mcp_server_time", "--local-timezone", "UTC"]
    assert manifest.env == {"PYTHONPATH": "{DEPS}/python"}
    assert (manifest.dependencies, files) == (
        "pip",
        {"requirements.txt": b"mcp-server-time==2025.9.25\n"},
    )
    named, _ = await build(
        OwnIn(name="git", kind="pip", package="mcp-server-git", module="mcp_server_git.cli")
    )
    assert named.command == ["python3", "-m", "mcp_server_git.cli"]


@pytest.mark.docker
async def test_a_household_item_is_tested_in_a_box_of_its_own_that_is_gone_afterwards(
    sandbox_runtime: Runtime, docker: Any
) -> None:
    if shutil.which("npm") is None:
        unavailable("npm is required to resolve server-memory")
    runtime = sandbox_runtime
    created = await runtime.core.users.create("mum", PASSWORD, "admin")
    c = service.require(runtime.server)
    c.config = ConnectorsConfig()  # household stdio connectors in boxes
    await _memory_passes_its_test(c, created.user.id, "household")
    assert runtime.sandbox is not None
    labels = [f"{LABEL_INSTANCE}={runtime.sandbox.instance_id}", LABEL_CONNECTOR]
    assert docker.containers.list(all=True, filters={"label": labels}) == []
