"""A plugin adds a tool, a route, a migration, a capability, a config section, a mount
and an approval fact through the hooks alone, and each works end to end."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
import structlog.testing
from conftest import PASSWORD, TEST_ENV, MakeClient, admin_adds_models, post_chat, signed_in
from fake_llm import Call, FakeLLM, Text
from plugins import sample_plugin

from skald.approvals.rules import Rule
from skald.cli import plugin_sections
from skald.config import load_config
from skald.core.approvals import decide
from skald.core.prompt_blocks import RESERVED_PLACEHOLDERS
from skald.core.runtime import Runtime
from skald.errors import ConfigError
from skald.files.mounts import MemberMount
from skald.files.router import PathDeniedError, ReadOnlyError, Resolved, Virtual
from skald.llm.types import ToolCall
from skald.paths import DataLayout
from skald.permissions import declared
from skald.plugins import hookimpl
from skald.plugins.manager import Plugins
from skald.store.migrations import ledger
from skald.store.rows import Role, RoleAttributes, User

MODULE = "plugins.sample_plugin"
CONFIG = f"""
[plugins]
modules = ["{MODULE}"]

[sample]
greeting = "Ahoy"
"""


def _write_config(layout: DataLayout, text: str) -> None:
    layout.root.mkdir(parents=True, exist_ok=True)
    (layout.root / "config.toml").write_text(text)


async def _boot(layout: DataLayout) -> Runtime:
    config = load_config(layout.root, TEST_ENV, plugin_sections)
    return await Runtime.boot(layout, config, announce=io.StringIO())


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    """A runtime with the sample plugin loaded from config.toml."""
    layout = DataLayout(tmp_path / "data")
    _write_config(layout, CONFIG)
    rt = await _boot(layout)
    yield rt
    await rt.shutdown()


@pytest.fixture
async def household(runtime: Runtime) -> dict[str, str]:
    ids = {}
    for name, role in (("mum", "admin"), ("ada", "member")):
        ids[name] = (await runtime.core.users.create(name, PASSWORD, role)).user.id
    return ids


async def test_the_plugins_tool_is_used_in_a_scripted_turn(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script(
        "model-a", [[Call("sample_stamp", {"text": "bread is baked"})], Text("Stamped.")]
    )
    ada = await signed_in(make_client, "ada")
    out = await post_chat(ada, "Stamp it")
    assert out["status"] == "done" and out["reply"] == "Stamped."
    # The model was offered the tool, and its result (with the configured greeting) went back.
    tools = [t["function"]["name"] for t in fake_llm.bodies("openai")[0]["tools"]]
    assert "sample_stamp" in tools and "read_file" in tools
    items = (await ada.call("GET", f"/api/conversations/{out['conversation_id']}/messages")).json()
    tool_message = next(i for i in items if i["role"] == "tool")
    assert "Ahoy: bread is baked" in tool_message["text"]
    # Its prompt block reaches the member's prompt values too, under a declared name.
    mine = await runtime.user_runtime(await runtime.core.users.get("ada"))
    assert "sample/" in (await mine.plugins.prompt_blocks(mine))["SAMPLE_SHELF"]
    assert "SAMPLE_SHELF" in mine.plugins.placeholders()


async def test_every_placeholder_filled_is_declared_and_every_declared_one_is_filled_or_reserved(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    # An admin (who may read shared notes and run commands) and a member.
    for name in ("mum", "ada"):
        client = await make_client()
        await client.login(name)
        mine = await runtime.user_runtime(await runtime.core.users.get(name))
        declared_names = mine.plugins.placeholders()
        filled = await mine.plugins.prompt_blocks(mine)
        assert set(filled) <= set(declared_names)
        assert set(declared_names) - set(filled) == set(RESERVED_PLACEHOLDERS)
        assert all(text.strip() for text in declared_names.values())


def test_a_placeholder_declared_twice_or_misnamed_stops_the_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plugins = Plugins.load([MODULE], entry_points=False)
    monkeypatch.setattr(
        sample_plugin,
        "skald_placeholders",
        hookimpl(lambda: {"DATETIME": "the sample's own clock"}),
    )
    clash = Plugins.load([MODULE], entry_points=False)
    with pytest.raises(ConfigError, match="two plugins declare the placeholder DATETIME"):
        clash.placeholders()
    monkeypatch.setattr(
        sample_plugin, "skald_placeholders", hookimpl(lambda: {"sample-shelf": "x"})
    )
    misnamed = Plugins.load([MODULE], entry_points=False)
    with pytest.raises(ConfigError, match="'sample-shelf' is not a placeholder name"):
        misnamed.placeholders()
    assert "SAMPLE_SHELF" in plugins.placeholders()


async def test_the_plugins_route_needs_sign_in_and_its_capability(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    anonymous = await make_client()
    assert (await anonymous.call("GET", "/api/sample/widgets")).status_code == 401
    ada = await signed_in(make_client, "ada")
    assert (await ada.call("GET", "/api/sample/widgets")).status_code == 403

    # Declared by the plugin, mirrored for roles, and grantable like any capability.
    assert sample_plugin.WIDGETS in declared()
    assert (
        "sample.widgets",
        "Use the sample widgets",
    ) in await runtime.core.registry.list_capabilities()
    member = await runtime.core.registry.get_role("member")
    assert member is not None
    granted = msgspec.structs.replace(member, capabilities=[*member.capabilities, "sample.widgets"])
    await runtime.core.registry.save_role(granted, create=False)
    await runtime.core.registry.db.call(
        lambda c: c.execute("INSERT INTO sample_widgets(name, colour) VALUES ('sprocket', 'red')")
    )
    r = await ada.call("GET", "/api/sample/widgets")
    assert r.status_code == 200, r.text
    assert r.json() == {"greeting": "Ahoy", "widgets": ["sprocket"]}


async def test_the_plugins_migration_runs_once_and_again_is_a_no_op(tmp_path: Path) -> None:
    layout = DataLayout(tmp_path / "data")
    rt = await Runtime.boot(layout, load_config(layout.root, TEST_ENV), announce=io.StringIO())
    try:  # first without the plugin: a database from before it was installed
        assert "sample" not in await rt.core.registry.db.call(ledger)
    finally:
        await rt.shutdown()
    _write_config(layout, CONFIG)
    for _ in range(2):
        rt = await _boot(layout)
        try:
            assert (await rt.core.registry.db.call(ledger))["sample"] == 2
            count = await rt.core.registry.db.call(
                lambda c: c.execute("SELECT count(*) FROM sample_widgets").fetchall()[0][0]
            )
            if count == 0:
                await rt.core.registry.db.call(
                    lambda c: c.execute("INSERT INTO sample_widgets(name) VALUES ('kept')")
                )
            else:  # the second boot migrated nothing: the row is still there
                assert count == 1
        finally:
            await rt.shutdown()


def test_the_plugins_config_section_is_checked_with_a_clear_error(tmp_path: Path) -> None:
    layout = DataLayout(tmp_path / "data")
    _write_config(layout, CONFIG + "max_widgets = 0\n")
    with pytest.raises(ConfigError) as bad:
        load_config(layout.root, TEST_ENV, plugin_sections)
    assert str(bad.value) == (
        f"{layout.root / 'config.toml'} line 7: sample.max_widgets: expected an integer >= 1, got 0"
    )
    _write_config(layout, CONFIG + "colour = 'red'\n")
    with pytest.raises(ConfigError, match=r"line 7: unknown key sample\.colour$"):
        load_config(layout.root, TEST_ENV, plugin_sections)
    # Without the plugin, its section is a table nobody owns, as any typo would be.
    _write_config(layout, "[sample]\ngreeting = 'x'\n")
    with pytest.raises(ConfigError, match=r"line 1: unknown key sample$"):
        load_config(layout.root, TEST_ENV, plugin_sections)
    _write_config(layout, CONFIG)
    config = load_config(layout.root, TEST_ENV, plugin_sections)
    assert config.section("sample", sample_plugin.SampleConfig).greeting == "Ahoy"


async def test_a_plugin_that_does_not_import_is_marked_failed_and_the_server_starts(
    tmp_path: Path,
) -> None:
    layout = DataLayout(tmp_path / "data")
    _write_config(layout, '[plugins]\nmodules = ["plugins.no_such_plugin"]\n')
    rt = await _boot(layout)
    try:
        error = rt.plugins.switches.failed("plugins.no_such_plugin")
        assert error is not None and "No module named 'plugins.no_such_plugin'" in error
        assert "plugins.no_such_plugin" not in rt.plugins.names()
    finally:
        await rt.shutdown()


async def test_the_plugins_mount_is_reached_by_the_file_tools_read_only(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    shelf = sample_plugin.shelf(runtime.core.layout, household["ada"])
    shelf.mkdir(parents=True)
    (shelf / "hello.txt").write_text("on the shelf\n")
    ada = await signed_in(make_client, "ada")
    mine = await runtime.user_runtime(await runtime.core.users.get("ada"))
    tools = {t.name: t for t in mine.all_tools()}
    from skald.agent import CancelScope, ToolContext

    ctx = ToolContext(conversation_id="c", call_id="x", depth=0, cancel=CancelScope(), sink=None)  # type: ignore[arg-type]
    for path in ("sample/hello.txt", "~/sample/hello.txt", "/srv/sample/hello.txt"):
        read = await tools["read_file"].run({"path": path}, ctx)
        assert not read.is_error and "on the shelf" in read.content, (path, read.content)
    write = await tools["write_file"].run({"path": "sample/new.txt", "content": "x"}, ctx)
    assert write.is_error and "read-only" in write.content
    assert not (shelf / "new.txt").exists()
    with pytest.raises(ReadOnlyError):
        mine.router.writable("sample/new.txt")
    # The Files API lists it among the member's places, and reads it.
    places = (await ada.call("GET", "/api/files/places")).json()
    assert next(p for p in places if p["name"] == "sample")["writable"] is False
    r = await ada.call("GET", "/api/file", params={"path": "sample/hello.txt"})
    assert r.status_code == 200 and r.text == "on the shelf\n"


async def test_the_plugins_approval_fact_reaches_the_rules(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    await (await make_client()).login("ada")
    mine = await runtime.user_runtime(await runtime.core.users.get("ada"))
    read = next(t for t in mine.all_tools() if t.name == "read_file")
    rules = [Rule(1, "default", sample_plugin.FACT, None, "deny", 1, "not on the shelf")]
    on_shelf = ToolCall(id="1", name="read_file", arguments={"path": "sample/hello.txt"})
    at_home = ToolCall(id="2", name="read_file", arguments={"path": "~/hello.txt"})
    extra = mine.gate.extra_facts
    assert extra is not None
    assert sample_plugin.FACT in extra(on_shelf, read)
    assert sample_plugin.FACT not in extra(at_home, read)
    from skald.core.approvals import explain

    assert explain(on_shelf, read, rules, "default", extra).action == "deny"
    assert explain(at_home, read, rules, "default", extra).action == "require"  # no rule
    assert decide(at_home, read).__class__.__name__ == "Allow"  # the shipped defaults


async def test_the_rules_dry_run_counts_a_plugins_approval_fact(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    # The Approvals page's dry run reads the plugins' facts as the member's gate does.
    # (A plugin's category is seeded in code: the admin API accepts the built-in ones.)
    rule = Rule(0, "default", sample_plugin.FACT, None, "deny", 1, "not on the shelf")
    made = (await runtime.core.registry.save_rule(rule, create=True)).id
    mum = await signed_in(make_client, "mum")
    for path, action, rule_id in (("sample/hello.txt", "deny", made), ("~/a.txt", "allow", None)):
        body = {"group": "default", "tool": "read_file", "arguments": {"path": path}}
        out = (await mum.call("POST", "/api/approvals/test", json=body)).json()
        assert out["action"] == action, (path, out)
        assert rule_id is None or out["rule_id"] == rule_id


def test_the_built_in_features_are_plugins_like_any_other() -> None:
    plugins = Plugins.load([MODULE], entry_points=False)
    names = plugins.names()
    assert names[:2] == ["skald.features.accounts.hooks", "skald.features.files.hooks"]
    assert MODULE in names
    # Loading it twice (by name and as already registered) registers it once.
    again = Plugins.load([MODULE, MODULE], entry_points=False)
    assert again.names().count(MODULE) == 1
    # Handlers, and routers grouping handlers that share a layer (`skald.api.deps.group`);
    # a plugin's own come apart, each mounted behind its switch (at its declared paths).
    assert any(r.__class__.__name__ == "Router" for r in plugins.routes())
    prefix, handlers = plugins.plugin_routes()[MODULE]
    assert prefix == "/" and any("/api/sample/widgets" in getattr(r, "paths", ()) for r in handlers)


class _Shelves:
    """A plugin whose mount answer changes between calls (what it holds now)."""

    def __init__(self) -> None:
        self.answer: list[MemberMount] = []

    @hookimpl
    def skald_mounts(self) -> list[MemberMount]:
        return list(self.answer)


def test_a_changed_mount_answer_is_checked_again_never_served_from_the_last_check(
    tmp_path: Path,
) -> None:
    layout = DataLayout(tmp_path / "data")
    plugins = Plugins.builtin()
    shelves = _Shelves()
    plugins.pm.register(shelves, "shelves")
    user, role = _member()

    def names() -> list[str]:
        return [m.name for m in plugins.mounts(user, role, layout)]

    assert "extra" not in names()
    extra = MemberMount(
        name="extra",
        prefix="extra",
        label="Extra",
        host_path=tmp_path,
        container_path=None,
        read_only=True,
    )
    shelves.answer = [extra]
    assert names().count("extra") == 1
    assert names() == names()  # the same answer: the same list (kept)
    plugins.mounts(user, role, layout).clear()  # a caller's list is its own
    assert names().count("extra") == 1
    # An answer no member could use is refused every time, after a good one too.
    shelves.answer = [extra, extra]
    for _ in range(2):
        with pytest.raises(ConfigError, match="two mounts share the name extra"):
            plugins.mounts(user, role, layout)
    shelves.answer = []
    assert "extra" not in names()


def _member() -> tuple[User, Role]:
    user = User(
        id="a1", username="ada", display_name="Ada", role="member", encrypted=False,
        active=True, locale="en", created_at="t", updated_at="t", profile={},
    )  # fmt: skip
    role = Role(
        name="member", display_name="M", builtin=True, capabilities=[], attributes=RoleAttributes()
    )
    return user, role


def test_a_router_refuses_what_leaves_the_plugins_mount(tmp_path: Path) -> None:
    layout = DataLayout(tmp_path / "data")
    plugins = Plugins.load([MODULE], entry_points=False)
    user, role = _member()
    from skald.files.router import PathRouter

    router = PathRouter(mounts=plugins.mounts(user, role, layout))
    assert [m.name for m in router.member_mounts][:1] == ["home"]
    shelf = sample_plugin.shelf(layout, "a1")
    shelf.mkdir(parents=True)
    (shelf / "link").symlink_to(layout.root)
    found = router.resolve("/srv/sample")
    assert isinstance(found, Resolved) and found.mount == "sample" and found.agent_path == "sample"
    with pytest.raises(PathDeniedError):
        router.resolve("sample/link/config.toml")
    with pytest.raises(PathDeniedError):
        router.resolve("/srv/other/x")
    assert isinstance(router.resolve("user-memory/x.md"), Virtual)


async def test_the_built_in_tools_come_first_in_their_order_then_the_plugins(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    # The order is part of every request's prefix (provider prompt caches key on it).
    await runtime.core.users.create("tim", PASSWORD, "children")
    names = {}
    for who in ("ada", "tim"):
        await (await make_client()).login(who)
        mine = await runtime.user_runtime(await runtime.core.users.get(who))
        names[who] = [t.name for t in mine.all_tools()]
    assert names["ada"] == [
        "read_file", "write_file", "edit_file", "list_files", "memory_search", "grep",
        "glob", "show_file", "append_file", "insert_at_line", "replace_lines", "search_file",
        "get_outline", "execute_task", "ask_user", "notify", "schedule",
        "background_task", "skill_read", "skill_register", "skill_delete", "sample_stamp",
    ]  # fmt: skip
    # Without `files` (children): the note tools alone, from the memory feature; and no
    # plugin tool: the children's role has no `auto_grant`, so the plugin is not theirs.
    assert names["tim"] == [
        "read_file", "write_file", "edit_file", "list_files", "memory_search",
        "execute_task", "ask_user", "notify", "skill_read",
    ]  # fmt: skip


async def test_the_plugins_service_runs_under_the_runner_and_stops_at_shutdown(
    tmp_path: Path,
) -> None:
    sample_plugin.SERVICE_LOG.clear()
    layout = DataLayout(tmp_path / "data")
    _write_config(layout, CONFIG)
    rt = await _boot(layout)
    try:
        for _ in range(100):
            if sample_plugin.SERVICE_LOG:
                break
            await asyncio.sleep(0.01)
        assert sample_plugin.SERVICE_LOG == ["running"]
        health = {h.name: h.state for h in rt.service_health()}
        assert health["sample-ticker"] == "ok"
    finally:
        await rt.shutdown()
    assert sample_plugin.SERVICE_LOG == ["running", "stopped"]


async def test_a_placeholder_clash_stops_the_start_and_an_undeclared_one_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = DataLayout(tmp_path / "data")
    _write_config(layout, CONFIG)
    # Nobody reserves the shared-spaces, connector and skills names: the shipped agents
    # that use them start all the same, and the log names what renders empty.
    monkeypatch.setattr("skald.features.chat.hooks.RESERVED_PLACEHOLDERS", {})
    monkeypatch.setattr("skald.features.skills.hooks.skald_placeholders", hookimpl(lambda: {}))
    # Read the events themselves: the log's stream is whatever sys.stderr was when some
    # earlier test in this worker configured logging (another test's capture, maybe).
    with structlog.testing.capture_logs() as events:
        rt = await _boot(layout)
        await rt.shutdown()
    unknown = [e for e in events if e["event"] == "agent uses unknown placeholders"]
    assert any("SKILLS_LIST" in e["names"] for e in unknown), events
    monkeypatch.setattr(
        sample_plugin, "skald_placeholders", hookimpl(lambda: {"DATETIME": "another clock"})
    )
    with pytest.raises(ConfigError, match="two plugins declare the placeholder DATETIME"):
        await _boot(layout)


async def test_the_plugins_pages_are_listed_after_the_built_ins_only_with_its_capability(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    paths = [p["path"] for p in (await ada.call("GET", "/api/pages")).json()]
    assert "/files" in paths and "/sample" not in paths
    assert (await ada.call("GET", "/api/sample/page.js")).status_code == 403

    member = await runtime.core.registry.get_role("member")
    assert member is not None
    granted = msgspec.structs.replace(member, capabilities=[*member.capabilities, "sample.widgets"])
    await runtime.core.registry.save_role(granted, create=False)
    pages = (await ada.call("GET", "/api/pages")).json()
    # The navigation's order: the built-ins (order < 100) first, then the plugin's.
    assert [p["path"] for p in pages][-2:] == ["/sample", "/sample/broken"]
    assert pages[-2]["module"] == "api/sample/page.js"
    module = await ada.call("GET", "/api/sample/page.js")
    assert module.status_code == 200
    assert module.headers["content-type"].startswith("text/javascript")
    assert "export async function render(root, ctx)" in module.text


async def test_the_plugins_notification_channel_carries_a_members_batch(
    runtime: Runtime, make_client: MakeClient
) -> None:
    await runtime.core.users.create("ada", PASSWORD, "member")
    ada = await signed_in(make_client, "ada")
    r = await ada.call("GET", "/api/notifications/settings")
    assert r.json()["available"] == ["web", "telegram", "pigeon"]
    r = await ada.call("PUT", "/api/notifications/settings", json={"channels": ["pigeon"]})
    assert r.status_code == 200, r.text
    user_id = (await runtime.core.users.get("ada")).id
    await runtime.notifications.notify(user_id, title="coo", source="sample")
    await runtime.notifications.flush()
    # A plugin's channel comes wrapped in its switch (skald/plugins/gating.py).
    pigeon = runtime.notifications.channels["pigeon"].channel
    assert isinstance(pigeon, sample_plugin.PigeonChannel)
    assert [[n.title for n in d.items] for d in pigeon.deliveries] == [["coo"]]


async def test_switched_off_a_plugins_service_stops_and_its_channel_is_unavailable_until_on(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    async def settle(last: str) -> None:
        for _ in range(200):
            if sample_plugin.SERVICE_LOG[-1:] == [last]:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(sample_plugin.SERVICE_LOG)

    await settle("running")
    mum = await signed_in(make_client, "mum")
    ada = await signed_in(make_client, "ada")
    r = await mum.call("PUT", f"/api/plugins/{MODULE}/enabled", json={"enabled": False})
    assert r.status_code == 200 and r.json()["status"] == "off", r.text
    await settle("stopped")
    pigeon = runtime.notifications.channels["pigeon"]
    assert not await pigeon.available(household["ada"])
    # Its route (at the path it declares: named in config.toml) is 404, its tool gone.
    assert (await ada.call("GET", "/api/sample/widgets")).status_code == 404
    mine = await runtime.user_runtime(await runtime.core.users.get("ada"))
    assert "sample_stamp" not in [t.name for t in mine.all_tools()]
    r = await mum.call("PUT", f"/api/plugins/{MODULE}/enabled", json={"enabled": True})
    assert r.json()["status"] == "ok"
    await settle("running")
    assert await pigeon.available(household["ada"])
    assert "sample_stamp" in [t.name for t in mine.all_tools()]
    assert (await ada.call("GET", "/api/sample/widgets")).status_code != 404
