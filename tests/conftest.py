"""Shared fixtures: a data directory, the registry and a user manager on the light KDF;
and the pytest-xdist groups (`pytest -n 2 --dist loadgroup`, see `xdist_group_of`).

The rule: a test that uses a machine-wide resource runs on one worker with every other
test of that resource, so two never fight over it. The trap: a module-scoped fixture is
built once per worker that runs a test of the module, so such a module stays whole on
one worker (two workers would build it twice, and write its shared cache at once)."""

from __future__ import annotations

import asyncio
import io
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import structlog
from fake_llm import FakeLLM, fake_llm_fixture  # noqa: F401  (registers the `fake_llm` fixture)
from ui_support import browser_fixture, fake_fixture  # noqa: F401  (the browser tests' `browser`, `fake`)

from skald.api.app import create_app
from skald.cli import main
from skald.config import load_config
from skald.core.keys import TEST_KDF
from skald.core.runtime import Runtime
from skald.core.users import UserManager
from skald.log import configure_logging
from skald.paths import DataLayout
from skald.store.registry import Registry

# -- pytest-xdist groups ----------------------------------------------------------------

# The systemd box, the Docker tests and the browser tests are one group: Chromium drops
# page and module loads with net::ERR_NETWORK_CHANGED whenever Docker adds a network or
# an interface, so a browser test must never run beside a container being made (seen in
# the first parallel CI run).
ENGINE, REAL_MODEL = "engine", "real_model"
SYSTEMD_BOX = DOCKER = BROWSER = ENGINE
_FIRST = {ENGINE: 0, REAL_MODEL: 1}


def _uses_support(item: pytest.Item, support: str) -> bool:
    """Whether the test's module imported something from the helper module `support`."""
    module = getattr(item, "module", None)
    return any(getattr(v, "__module__", None) == support for v in vars(module or {}).values())


def xdist_group_of(item: pytest.Item) -> str | None:
    """The resource group of one test, or None when it may run beside anything: one
    llama.cpp (two threads of the 2 cores), one systemd box at a time, the Docker engine
    (one runtime image, its address pools, the leftover check's label baseline), one
    Chromium (its memory)."""
    if item.get_closest_marker("real_model"):
        return REAL_MODEL
    if _uses_support(item, "systemd_support"):
        return SYSTEMD_BOX
    if item.get_closest_marker("docker"):
        return DOCKER
    if _uses_support(item, "ui_support"):
        return BROWSER
    return None


def _has_module_fixture(item: pytest.Item, path: str) -> bool:
    """Whether the test uses a module-scoped fixture of its own module (not a plugin's)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info else ()
    return any(d[-1].scope == "module" and d[-1].baseid == path for d in defs if d)


def _tag_group(item: pytest.Item, group: str) -> None:
    """Give the test id the `@group` suffix through which `--dist loadgroup` tells the
    controller a test's group. xdist 3.8 writes `item._nodeid`, which pytest 9.2 no
    longer reads (pytest-xdist issue #1386): every group would silently spread over the
    workers. So it is done here, and checked; xdist's own suffix on an older pytest makes
    `id@g@g`, whose group (the part after the last `@`) is the same."""
    tagged = f"{item.nodeid}@{group}"
    if hasattr(item, "_id"):  # pytest >= 9.2: a structured id
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(tagged)
    else:
        item._nodeid = tagged
    if item.nodeid != tagged:
        raise pytest.UsageError(f"cannot give {item.nodeid} its xdist group {group}")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return
    groups = {item: xdist_group_of(item) for item in items}
    by_module: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_module.setdefault(item.nodeid.split("::")[0], []).append(item)
    for path, module_items in by_module.items():
        if any(_has_module_fixture(i, path) for i in module_items):
            found = [g for i in module_items if (g := groups[i])]
            whole = found[0] if found else path
            groups.update(dict.fromkeys(module_items, whole))
    loadgroup = getattr(config.option, "loadgroup", False)  # set on the workers only
    for item, group in groups.items():
        # A test that names its own group (a resource only it and its peers share) keeps it.
        if group and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(group))
        if loadgroup and (mark := item.get_closest_marker("xdist_group")):
            _tag_group(item, str(mark.args[0] if mark.args else mark.kwargs["name"]))
    if hasattr(config, "workerinput"):
        # On a worker (the controller schedules in this order, ci/test.sh turns off
        # xdist's reordering by size): the longest groups start first, the many short
        # plain tests fill the gaps at the end.
        items.sort(key=lambda item: _FIRST.get(groups[item] or "", 5 if groups[item] else 6))


_GROUP_SECONDS: dict[str, list[float]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Sum each group's time (setup, call, teardown) as reports reach the controller: a
    group runs on one worker, so its sum is the least the whole run can take."""
    group = report.nodeid.rpartition("@")[2] if "@" in report.nodeid else "(any worker)"
    spent = _GROUP_SECONDS.setdefault(group, [0.0, 0.0])
    spent[0] += report.duration
    spent[1] += report.when == "call"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if len(_GROUP_SECONDS) < 2:
        return
    terminalreporter.section("time per xdist group (one worker each)")
    for group, (seconds, tests) in sorted(_GROUP_SECONDS.items(), key=lambda kv: -kv[1][0]):
        terminalreporter.write_line(f"{seconds:8.0f} s  {int(tests):5d} tests  {group}")


# The memory-hard default KDF would make every test take a second; the CLI and server
# read this variable through the config loader, like any other setting.
os.environ.setdefault("SKALD_SECURITY_KDF_PROFILE", "test")


@pytest.fixture
def layout(tmp_path: Path) -> DataLayout:
    return DataLayout(tmp_path / "data").ensure()


@pytest.fixture
async def registry(layout: DataLayout) -> AsyncIterator[Registry]:
    reg = await Registry.open(layout.system_db)
    yield reg
    await reg.close()


@pytest.fixture
async def users(registry: Registry, layout: DataLayout) -> AsyncIterator[UserManager]:
    manager = UserManager(registry, layout, TEST_KDF)
    yield manager
    await manager.lock_all()


# -- the web API, in process ------------------------------------------------------------

TEST_ENV = {
    "SKALD_SECURITY_KDF_PROFILE": "test",
    "SKALD_AUTH_LOGIN_BACKOFF_BASE_S": "0.05",
    "SKALD_AUTH_LOGIN_BACKOFF_MAX_S": "0.4",
    # Sandbox containers only where a test asks for them (tests/sandbox_helpers.py).
    "SKALD_SANDBOX_ENABLED": "false",
}
PASSWORD = "a household password"


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    layout = DataLayout(tmp_path / "data")
    rt = await Runtime.boot(layout, load_config(layout.root, TEST_ENV), announce=io.StringIO())
    yield rt
    await rt.shutdown()


class Client:
    """An in-process client that behaves like the SPA: cookie plus CSRF header."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self.csrf = ""

    async def login(self, username: str, password: str = PASSWORD) -> dict[str, Any]:
        r = await self.http.post(
            "/api/auth/login", json={"username": username, "password": password}
        )
        assert r.status_code == 200, r.text
        me: dict[str, Any] = r.json()
        self.csrf = me["csrf_token"]
        return me

    async def call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"X-CSRF-Token": self.csrf} if self.csrf else {}
        headers.update(kw.pop("headers", {}))
        return await self.http.request(method, path, headers=headers, **kw)


MakeClient = Callable[[], Awaitable[Client]]


def asgi_scope(
    client: Client, method: str, path: str, query: str, *headers: tuple[bytes, bytes]
) -> dict[str, Any]:
    """The ASGI scope of a request of the signed-in `client` (its session cookie, and
    `headers`), for a test that calls the app itself to see every message it sends or
    receives (httpx's in-process transport joins the bodies)."""
    token = client.http.cookies["skald_session"]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [
            (b"host", b"testserver"),
            (b"cookie", f"skald_session={token}".encode()),
            *headers,
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }


async def member_quota(admin: Client, mb: int) -> None:
    """The `member` role's storage quota set to `mb` MiB, by an administrator's client."""
    roles = (await admin.call("GET", "/api/roles")).json()
    attrs = next(r for r in roles if r["name"] == "member")["attributes"]
    quota = {"attributes": {**attrs, "storage_quota_mb": mb}}
    assert (await admin.call("PATCH", "/api/roles/member", json=quota)).status_code == 200


async def signed_in(make_client: MakeClient, username: str, password: str = PASSWORD) -> Client:
    """A new client (from the `make_client` fixture) signed in as `username`."""
    client = await make_client()
    await client.login(username, password)
    return client


async def add_models(
    runtime: Runtime, fake: FakeLLM, *names: str, capabilities: tuple[str, ...] = ("tools",)
) -> list[str]:
    """The fake as one OpenAI-compatible provider and these models, priority in order
    (straight through the LLM service, for tests that do not test the admin API); ids."""
    provider = await runtime.llm.add_provider(
        f"Fake {names[0]}", "openai_compatible", fake.base_url_openai, "sk-test-123"
    )
    out = []
    for priority, name in enumerate(names, 1):
        row = await runtime.llm.add_model(
            provider.id, name, name, "average", list(capabilities), priority, True
        )
        out.append(row.id)
    return out


async def set_quota(runtime: Runtime, role_name: str, mb: int | None) -> None:
    """The role's storage quota, in MB (None: the instance default)."""
    role = await runtime.core.registry.get_role(role_name)
    assert role is not None
    attrs = msgspec.structs.replace(role.attributes, storage_quota_mb=mb)
    await runtime.core.registry.save_role(
        msgspec.structs.replace(role, attributes=attrs), create=False
    )


async def admin_adds_models(
    make_client: MakeClient,
    fake: FakeLLM,
    models: list[tuple[str, str]],
    capabilities: tuple[str, ...] = ("tools", "vision"),
    **extra: Any,
) -> Client:
    """The admin `mum` adds the fake as a provider per api ("openai"|"anthropic") and these
    (wire model id, api) models through the API, priority in order; her client."""
    admin = await signed_in(make_client, "mum")
    providers: dict[str, str] = {}
    for api in dict.fromkeys(api for _, api in models):
        name, kind, url = (
            ("Fake OpenAI", "openai_compatible", fake.base_url_openai)
            if api == "openai"
            else ("Fake Anthropic", "anthropic", fake.base_url_anthropic)
        )
        body = {"name": name, "kind": kind, "base_url": url, "api_key": "sk-test-123"}
        r = await admin.call("POST", "/api/llm/providers", json=body)
        assert r.status_code == 201, r.text
        assert "sk-" not in r.text and r.json()["has_api_key"] is True
        providers[api] = r.json()["id"]
    for priority, (wire, api) in enumerate(models, start=1):
        body = {
            "provider_id": providers[api],
            "model": wire,
            "name": wire,
            "priority": priority,
            "capabilities": list(capabilities),
            **extra,
        }
        r = await admin.call("POST", "/api/llm/models", json=body)
        assert r.status_code == 201, r.text
    return admin


async def post_chat(
    client: Client, text: str, conversation_id: str | None = None
) -> dict[str, Any]:
    """`POST /api/chat` (a new conversation unless `conversation_id`); its 200 answer."""
    body: dict[str, Any] = {"text": text}
    if conversation_id:
        body["conversation_id"] = conversation_id
    r = await client.call("POST", "/api/chat", json=body)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


async def wait_idle(client: Client, cid: str) -> None:
    """Until the conversation `cid` is idle (its turn, and any resumed one, ended)."""
    async with asyncio.timeout(10):
        while True:
            convs = {c["id"]: c for c in (await client.call("GET", "/api/conversations")).json()}
            if convs[cid]["status"] == "idle":
                return
            await asyncio.sleep(0.05)


@pytest.fixture
async def make_client(runtime: Runtime) -> AsyncIterator[Callable[[], Awaitable[Client]]]:
    # httpx's ASGI transport runs the app on this test's own loop, where the runtime lives
    # (Litestar's test client would run it on a loop in another thread).
    opened: list[httpx.AsyncClient] = []
    transport = httpx.ASGITransport(app=create_app(runtime), client=("127.0.0.1", 50000))

    async def make() -> Client:
        http = httpx.AsyncClient(transport=transport, base_url="http://testserver")
        opened.append(http)
        return Client(http)

    yield make
    for http in opened:
        await http.aclose()


@pytest.fixture
async def household(runtime: Runtime) -> dict[str, str]:
    """An admin, a member and a child; returns username -> user id."""
    ids = {}
    for name, role in (("mum", "admin"), ("ada", "member"), ("tim", "children")):
        created = await runtime.core.users.create(name, PASSWORD, role)
        ids[name] = created.user.id
    return ids


@pytest.fixture
async def ada(runtime: Runtime, household: dict[str, str]) -> str:
    """ada's user id, with her data unlocked (as a sign-in would leave it)."""
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    return household["ada"]


@pytest.fixture
async def llm(runtime: Runtime, fake_llm: FakeLLM) -> FakeLLM:
    """`fake_llm`, added as the runtime's one model, `model-a` (see `add_models`)."""
    await add_models(runtime, fake_llm, "model-a")
    return fake_llm


Cli = Callable[..., int]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """`skald --data <tmp_path>/data ARGV...` run in this process on the light KDF, given
    `stdin` (its output dropped); its exit code."""
    environ = {"HOME": str(tmp_path), "SKALD_SECURITY_KDF_PROFILE": "test"}

    def run(*argv: str, stdin: str = "") -> int:
        return main(
            ["--data", str(tmp_path / "data"), *argv],
            environ=environ,
            stdin=io.StringIO(stdin),
            stdout=io.StringIO(),
        )

    return run


@pytest.fixture
def logged() -> Iterator[io.StringIO]:
    """The JSON log lines written during the test (logging is process-wide state: other
    tests may have pointed it elsewhere, so capturing the process's output proves
    nothing; it is put back afterwards)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    buffer = io.StringIO()
    configure_logging("info", "json", buffer)
    yield buffer
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()
