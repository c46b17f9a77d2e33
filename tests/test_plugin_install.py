"""Plugins an administrator manages, with the example plugin installed from its wheel
(examples/skald-example, built by its own backend): its route, page, tool, setting and
before-turn hook work; switched off, its route is 404 and its tool gone at once; access
is per member; a wheel whose dependency is missing is refused with the list."""

from __future__ import annotations

import io
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import structlog.testing
from conftest import TEST_ENV, MakeClient, admin_adds_models, post_chat, signed_in
from fake_llm import Call, FakeLLM, Text
from plugin_wheels import build_example, make_wheel, plugin_wheel

from skald.config import load_config
from skald.core.runtime import Runtime
from skald.errors import InvalidInputError
from skald.features.plugins import install as wheels
from skald.paths import DataLayout
from skald.store.plugins import PluginStore

MOTTO = "Many hands make light work"
# A plugin whose hooks raise at run time (installed beside the example).
FLAKY = """
from skald.plugins import hookimpl


@hookimpl
def skald_tools(member):
    raise RuntimeError("the flaky tools broke")


@hookimpl
def skald_before_turn(member, text):
    raise RuntimeError("the flaky hook broke")
"""


# A plugin that tidies answers after the turn (replace, suppress, attach).
TIDY = """
from skald.plugins import hookimpl
from skald.plugins.specs import AfterTurn
from skald.store.conversations import Attachment


@hookimpl
def skald_after_turn(reply):
    if "password" in reply:
        return AfterTurn(replace="[the tidy plugin removed a password]")
    if reply == "Hush.":
        return AfterTurn(suppress=True)
    if reply == "Here.":
        return AfterTurn(attach=(Attachment(name="a.txt", path="uploads/a.txt", mime="text/plain", size=1),))
    return None
"""


@pytest.fixture(scope="module")
def example_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_example(tmp_path_factory.mktemp("wheels"))


@pytest.fixture
async def runtime(tmp_path: Path, example_wheel: Path) -> AsyncIterator[Runtime]:
    """A server whose data folder has the example plugin installed from its wheel (and
    a plugin whose hooks raise)."""
    layout = DataLayout(tmp_path / "data")
    flaky = plugin_wheel(tmp_path / "w", "flaky", {"skald_flaky.py": FLAKY})
    tidy = plugin_wheel(tmp_path / "w", "tidy", {"skald_tidy.py": TIDY})
    for wheel in (example_wheel, flaky, tidy):
        wheels.install(wheels.inspect_upload([(wheel, wheel.name)]), layout.plugins_dir)
    rt = await Runtime.boot(layout, load_config(layout.root, TEST_ENV), announce=io.StringIO())
    yield rt
    await rt.shutdown()
    # The plugins' folders joined this process's path: leave none for the next tests.
    sys.path[:] = [p for p in sys.path if not p.startswith(str(tmp_path))]
    for name in ("skald_example", "skald_flaky", "skald_tidy"):
        sys.modules.pop(name, None)


async def _tools(runtime: Runtime, name: str) -> list[str]:
    mine = await runtime.user_runtime(await runtime.core.users.get(name))
    return [t.name for t in mine.all_tools()]


async def _pages(client: object) -> list[str]:
    r = await client.call("GET", "/api/pages")  # type: ignore[attr-defined]
    return [p["path"] for p in r.json()]


async def test_the_example_plugin_serves_its_route_tool_page_and_before_turn_hook(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    ada = await signed_in(make_client, "ada")
    r = await ada.call("GET", "/api/plugin/example/motto")
    assert r.status_code == 200 and r.json() == {"motto": MOTTO}
    assert r.headers["cache-control"] == "no-cache"
    assert "/example" in await _pages(ada)
    fake_llm.script("model-a", [[Call("example_motto", {})], Text("Done.")])
    out = await post_chat(ada, "What is our motto?")
    assert out["status"] == "done" and out["reply"] == "Done."
    first = fake_llm.bodies("openai")[0]
    assert "example_motto" in [t["function"]["name"] for t in first["tools"]]
    # The before-turn hook added to the system prompt; the tool's result went back.
    assert f"The household's motto is: {MOTTO}" in first["messages"][0]["content"]
    assert f"The motto is: {MOTTO}" in str(fake_llm.bodies("openai")[1]["messages"])
    # A message the hook blocks never reaches the model; the member reads the reason.
    asked = len(fake_llm.bodies("openai"))
    r = await ada.call("POST", "/api/chat", json={"text": "a #private note"})
    blocked = r.json()
    assert blocked["status"] == "failed", blocked
    assert "keeps messages marked #private" in str(blocked)
    assert len(fake_llm.bodies("openai")) == asked


async def test_switched_off_its_route_is_404_and_its_tool_and_page_gone_at_once(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    ada = await signed_in(make_client, "ada")
    assert "example_motto" in await _tools(runtime, "ada")
    r = await mum.call("PUT", "/api/plugins/example/enabled", json={"enabled": False})
    assert r.status_code == 200 and r.json()["status"] == "off"
    r = await ada.call("GET", "/api/plugin/example/motto")
    assert r.status_code == 404 and r.headers["cache-control"] == "no-cache"
    assert "example_motto" not in await _tools(runtime, "ada")
    assert "/example" not in await _pages(ada)
    r = await mum.call("PUT", "/api/plugins/example/enabled", json={"enabled": True})
    assert r.json()["status"] == "ok"
    assert (await ada.call("GET", "/api/plugin/example/motto")).status_code == 200
    assert "example_motto" in await _tools(runtime, "ada")


async def test_the_settings_form_comes_from_the_plugins_struct_and_a_saved_value_is_used(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    form = (await mum.call("GET", "/api/plugins/example/settings")).json()
    assert form["fields"] == [
        {
            "section": "example",
            "name": "motto",
            "kind": "text",
            "label": "Household motto",
            "default": MOTTO,
            "choices": [],
        }
    ]
    assert form["values"] == {"example": {"motto": MOTTO}}
    r = await mum.call(
        "PUT", "/api/plugins/example/settings", json={"values": {"example": {"motto": "x" * 201}}}
    )
    assert r.status_code == 400 and "example" in r.json()["error"]["message"]
    r = await mum.call(
        "PUT", "/api/plugins/example/settings", json={"values": {"example": {"motto": "Slow"}}}
    )
    assert r.status_code == 200 and r.json()["values"] == {"example": {"motto": "Slow"}}
    ada = await signed_in(make_client, "ada")
    assert (await ada.call("GET", "/api/plugin/example/motto")).json() == {"motto": "Slow"}


async def test_a_plugin_reaches_the_auto_grant_roles_and_an_admin_grants_or_revokes_each_member(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    tim = await signed_in(make_client, "tim")
    ada = await signed_in(make_client, "ada")
    # The children's role has no auto_grant: no route, no tool until an admin grants it.
    assert (await tim.call("GET", "/api/plugin/example/motto")).status_code == 403
    assert "example_motto" not in await _tools(runtime, "tim")
    access = {
        a["username"]: a for a in (await mum.call("GET", "/api/plugins/example/access")).json()
    }
    assert access["ada"]["granted"] and not access["tim"]["granted"]
    assert access["mum"]["implicit"]
    for who, granted in (("tim", True), ("ada", False)):
        r = await mum.call(
            "PUT", f"/api/plugins/example/access/{household[who]}", json={"granted": granted}
        )
        assert r.status_code == 204, r.text
    assert (await tim.call("GET", "/api/plugin/example/motto")).status_code == 200
    assert "example_motto" in await _tools(runtime, "tim")
    assert (await ada.call("GET", "/api/plugin/example/motto")).status_code == 403
    assert "example_motto" not in await _tools(runtime, "ada")


async def test_a_wheel_whose_dependency_is_missing_is_refused_with_the_list(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, tmp_path: Path
) -> None:
    code = {"skald_needy/__init__.py": "VALUE = 1\n"}
    needy = plugin_wheel(
        tmp_path / "w",
        "needy",
        code,
        requires=("skald-absent-dep>=2", "msgspec>=0.1", "other-absent; python_version < '3'"),
    )
    mum = await signed_in(make_client, "mum")

    async def upload(*paths: Path) -> object:
        files = [("data", (p.name, p.read_bytes(), "application/octet-stream")) for p in paths]
        return await mum.http.post("/api/plugins", files=files, headers={"X-CSRF-Token": mum.csrf})

    r = await upload(needy)
    assert r.status_code == 400, r.text  # type: ignore[attr-defined]
    message = r.json()["error"]["message"]  # type: ignore[attr-defined]
    assert message.endswith(": skald-absent-dep>=2"), message
    assert not (runtime.core.layout.plugins_dir / "needy").exists()
    dep = make_wheel(tmp_path / "w", "skald_absent_dep", "2.1", {"skald_absent_dep.py": "X = 2\n"})
    r = await upload(needy, dep)
    assert r.status_code == 201, r.text  # type: ignore[attr-defined]
    assert r.json() == {"id": "needy", "version": "1.0", "restart_required": True}  # type: ignore[attr-defined]
    folder = runtime.core.layout.plugins_dir / "needy"
    assert (folder / "skald_needy" / "__init__.py").is_file()
    assert (folder / "skald_absent_dep.py").is_file()
    listed = {p["id"]: p for p in (await mum.call("GET", "/api/plugins")).json()}
    assert listed["needy"]["status"] == "restart" and listed["example"]["status"] == "ok"


async def test_a_plugin_whose_hooks_raise_is_skipped_the_turn_goes_on_and_it_is_logged_once(
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    fake_llm: FakeLLM,
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script("model-a", [Text("One."), Text("Two.")])
    ada = await signed_in(make_client, "ada")
    # The events themselves: the log's stream is whatever sys.stderr was when some earlier
    # test in this worker configured logging (another test's capture, maybe).
    with structlog.testing.capture_logs() as events:
        for text, reply in (("first", "One."), ("second", "Two.")):
            out = await post_chat(ada, text)
            assert out["status"] == "done" and out["reply"] == reply, out
    # The other plugin's contributions are there; the flaky one's are not.
    assert "example_motto" in [t["function"]["name"] for t in fake_llm.bodies("openai")[0]["tools"]]
    logged = "\n".join(str(e) for e in events)
    assert logged.count("the flaky hook broke") == 1, logged
    assert logged.count("the flaky tools broke") == 1, logged
    mum = await signed_in(make_client, "mum")
    listed = {p["id"]: p for p in (await mum.call("GET", "/api/plugins")).json()}
    assert listed["flaky"]["status"] == "trouble"
    assert "broke" in listed["flaky"]["error"]


async def test_an_after_turn_hook_replaces_or_suppresses_the_reply_or_attaches_files(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script(
        "model-a", [Text("The password is hunter2."), Text("Hush."), Text("Here."), Text("Fine.")]
    )
    ada = await signed_in(make_client, "ada")
    out = await post_chat(ada, "one")
    assert out["reply"] == "[the tidy plugin removed a password]"
    conversation = out["conversation_id"]
    assert (await post_chat(ada, "two", conversation))["reply"] == ""
    assert (await post_chat(ada, "three", conversation))["reply"] == "Here."
    assert (await post_chat(ada, "four", conversation))["reply"] == "Fine."
    items = (await ada.call("GET", f"/api/conversations/{conversation}/messages")).json()
    answers = [i for i in items if i["role"] == "assistant"]
    assert [a["text"] for a in answers] == [
        "[the tidy plugin removed a password]", "", "Here.", "Fine."
    ]  # fmt: skip
    assert [a["name"] for a in answers[2]["attachments"]] == ["a.txt"]
    # The model never saw the replaced text in the history it was sent next.
    assert "hunter2" not in str(fake_llm.bodies("openai")[1]["messages"])


def test_a_wheel_with_a_file_outside_its_folder_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    for name in ("../evil.py", "/tmp/evil.py", "skald_evil/../../evil.py"):
        code = {"skald_evil/__init__.py": "", name: "print('owned')\n"}
        wheel = plugin_wheel(tmp_path / "w", "evil", code)
        plan = wheels.inspect_upload([(wheel, wheel.name)])
        with pytest.raises(InvalidInputError, match="outside its folder"):
            wheels.install(plan, tmp_path / "data" / "plugins")
        assert not (tmp_path / "data" / "evil.py").exists()
        assert not (tmp_path / "data" / "plugins" / "evil").exists()
        assert list((tmp_path / "data" / "plugins").iterdir()) == []


async def test_a_members_own_plugin_settings_stay_in_their_database_and_reach_the_hook(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script("model-a", [Text("Hi Ace.")])
    ada = await signed_in(make_client, "ada")
    r = await ada.call("GET", "/api/plugins/example/mine")
    assert r.status_code == 200, r.text
    mine = r.json()
    assert [f["name"] for f in mine["fields"]] == ["nickname"]
    assert mine["values"] == {"example_me": {"nickname": ""}}
    r = await ada.call(
        "PUT", "/api/plugins/example/mine", json={"values": {"example_me": {"nickname": "Ace"}}}
    )
    assert r.status_code == 200 and r.json()["values"] == {"example_me": {"nickname": "Ace"}}
    await post_chat(ada, "hello")
    assert "Call the member Ace." in fake_llm.bodies("openai")[0]["messages"][0]["content"]
    # Kept in ada's own database; the household's settings (what admins read) lack it.
    rows = await runtime.user_runtimes[household["ada"]].handle.db.call(
        lambda c: c.execute("SELECT section FROM plugin_member_settings").fetchall()
    )
    assert rows == [("example_me",)]
    mum = await signed_in(make_client, "mum")
    admin_view = (await mum.call("GET", "/api/plugins/example/settings")).text
    assert "Ace" not in admin_view and "nickname" not in admin_view
    assert (await mum.call("GET", "/api/plugins/example/mine")).json()["values"] == {
        "example_me": {"nickname": ""}
    }
    # A member the plugin does not reach has no settings of it.
    tim = await signed_in(make_client, "tim")
    assert (await tim.call("GET", "/api/plugins/example/mine")).status_code == 404


async def test_removing_a_plugin_stops_it_at_once_and_keeps_its_settings_unless_purged(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    body = {"values": {"example": {"motto": "Kept"}}}
    assert (await mum.call("PUT", "/api/plugins/example/settings", json=body)).status_code == 200
    r = await mum.call("DELETE", "/api/plugins/example")
    assert r.status_code == 204, r.text
    assert not (runtime.core.layout.plugins_dir / "example").exists()
    assert (await mum.call("GET", "/api/plugin/example/motto")).status_code == 404
    listed = {p["id"]: p for p in (await mum.call("GET", "/api/plugins")).json()}
    assert listed["example"]["status"] == "restart" and not listed["example"]["installed"]
    row = await PluginStore(runtime.core.registry.db).get("example")
    assert row is not None and row.settings == {"example": {"motto": "Kept"}}
    await signed_in(make_client, "ada")
    r = await mum.call("DELETE", "/api/plugins/example?purge=true")
    assert r.status_code == 204, r.text
    assert await PluginStore(runtime.core.registry.db).get("example") is None
    # Still loaded until the restart, and still off: purging never switches it back on.
    assert "example_motto" not in await _tools(runtime, "ada")
    assert (await mum.call("GET", "/api/plugin/example/motto")).status_code == 404
