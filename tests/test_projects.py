"""Projects (#26 item 2): a member with `projects.use` makes a project, adds members
read-only or read-write; the owner is always a writer; owner and writers manage; only
the owner deletes (to a trash); each member has their own project conversation running
the project coordinator with PROJECT_CONTEXT; the coordinator is no role's default."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import MakeClient, admin_adds_models, post_chat, set_quota, signed_in
from fake_llm import FakeLLM, Text

from skald.core.runtime import Runtime
from skald.features.projects.store import Projects


def _system(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])


async def test_owner_and_writers_manage_a_reader_only_reads_and_only_the_owner_deletes(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    mum = await signed_in(make_client, "mum")
    r = await ada.call(
        "POST", "/api/projects", json={"name": "Holiday 2027", "description": "Lakes"}
    )
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["path"] == "projects/ada/holiday-2027" and made["delete"] is True
    base = "/api/projects/ada/holiday-2027"
    assert (await mum.call("GET", base)).status_code == 404  # not a member: not told
    r = await ada.call("PUT", f"{base}/members/mum", json={"access": "read"})
    assert r.status_code == 200, r.text
    assert (
        await ada.call("PUT", f"{base}/members/ada", json={"access": "read"})
    ).status_code == 409
    # Mum reads; every change is refused to her (API and files).
    assert (await mum.call("GET", base)).json()["access"] == "read"
    assert (await mum.call("PATCH", base, json={"name": "Mine"})).status_code == 403
    assert (
        await mum.call("PUT", f"{base}/members/tim", json={"access": "write"})
    ).status_code == 403
    assert (await mum.call("DELETE", base)).status_code == 403
    w = await mum.call(
        "POST", "/api/file", json={"path": "projects/ada/holiday-2027/x.md", "content": "x"}
    )
    assert w.status_code == 403 and w.json()["error"]["code"] == "read_only"
    w = await ada.call(
        "POST",
        "/api/file",
        json={"path": "projects/ada/holiday-2027/PROJECT.md", "content": "# Lakes"},
    )
    assert w.status_code == 201, w.text
    r = await mum.call("GET", "/api/file?path=projects/ada/holiday-2027/PROJECT.md")
    assert r.status_code == 200 and r.text == "# Lakes"
    # A writer manages members and metadata, but still cannot delete.
    await ada.call("PUT", f"{base}/members/mum", json={"access": "write"})
    assert (
        await mum.call("PATCH", base, json={"description": "Lakes and hills"})
    ).status_code == 200
    assert (await mum.call("DELETE", base)).status_code == 403
    assert (await ada.call("DELETE", base)).status_code == 204
    assert (await mum.call("GET", base)).status_code == 404
    root = runtime.core.layout.root / "projects"
    assert (root / ".trash" / household["ada"] / "holiday-2027" / "PROJECT.md").exists()


async def test_a_role_without_projects_use_neither_makes_nor_reaches_projects(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    tim = await signed_in(make_client, "tim")  # children: no projects.use
    assert (await tim.call("POST", "/api/projects", json={"name": "Den"})).status_code == 403
    projects = runtime.server.state(Projects)
    made = await projects.create(household["ada"], "Den")
    await projects.set_member(made, "tim", "write")
    user, role = await runtime.member(household["tim"])
    assert not [m for m in runtime.mounts_for(user, role) if m.prefix.startswith("projects/")]


async def test_each_member_chats_in_their_own_project_conversation_with_the_context(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script("model-a", [Text("Hello Ada."), Text("Hello Mum.")])
    ada = await signed_in(make_client, "ada")
    mum = await signed_in(make_client, "mum")
    await ada.call("POST", "/api/projects", json={"name": "Kitchen", "description": "New tiles"})
    await ada.call("PUT", "/api/projects/ada/kitchen/members/mum", json={"access": "read"})
    a_chat = (await ada.call("POST", "/api/projects/ada/kitchen/chat")).json()
    m_chat = (await mum.call("POST", "/api/projects/ada/kitchen/chat")).json()
    assert a_chat["agent_id"] == m_chat["agent_id"] == "project-coordinator"
    again = (await ada.call("POST", "/api/projects/ada/kitchen/chat")).json()
    assert again["id"] == a_chat["id"]  # one conversation per member and project
    out = await post_chat(ada, "Where are we?", a_chat["id"])
    assert out["reply"] == "Hello Ada."
    out = await post_chat(mum, "And for me?", m_chat["id"])
    assert out["reply"] == "Hello Mum."
    first, second = (_system(r.body) for r in fake_llm.requests[:2])
    assert "Folder: projects/ada/kitchen/" in first and "read-write" in first
    assert "About: New tiles" in first and "- mum (read-only)" in first
    assert "This member's access: read-only" in second
    # Neither sees the other's conversation.
    assert (await mum.call("GET", f"/api/conversations/{a_chat['id']}/messages")).status_code == 404
    assert (await ada.call("GET", f"/api/conversations/{m_chat['id']}/messages")).status_code == 404
    # Removed from the project, mum's conversation says so instead of the project.
    await ada.call("DELETE", "/api/projects/ada/kitchen/members/mum")
    member = runtime.user_runtimes[household["mum"]]
    values = await member._prompt_values(m_chat["id"])
    assert "no longer available" in values["PROJECT_CONTEXT"]
    assert "kitchen" not in values["PROJECT_CONTEXT"]
    assert (await member._prompt_values(None))["PROJECT_CONTEXT"] == ""
    plain = (await mum.call("POST", "/api/conversations", json={})).json()["id"]
    assert (await member._prompt_values(plain))["PROJECT_CONTEXT"] == ""


async def test_the_project_coordinator_is_never_a_roles_default_chat_agent(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    role = (await mum.call("GET", "/api/roles")).json()
    member = next(r for r in role if r["name"] == "member")
    attrs = {**member["attributes"], "default_chat_agent": "project-coordinator"}
    r = await mum.call("PATCH", "/api/roles/member", json={"attributes": attrs})
    assert r.status_code == 400 and "project" in r.json()["error"]["message"]
    r = await mum.call(
        "POST",
        "/api/roles",
        json={"name": "pc", "display_name": "PC", "capabilities": ["chat"], "attributes": attrs},
    )
    assert r.status_code == 400


async def test_a_project_counts_against_its_owner_and_a_write_past_the_limit_changes_nothing(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    await set_quota(runtime, "member", 1)
    ada = await signed_in(make_client, "ada")
    mum = await signed_in(make_client, "mum")  # the admin role: no quota of her own
    await ada.call("POST", "/api/projects", json={"name": "Big"})
    await ada.call("PUT", "/api/projects/ada/big/members/mum", json={"access": "write"})
    half = "x" * (600 * 1024)
    path = "projects/ada/big/a.txt"
    r = await mum.call("POST", "/api/file", json={"path": path, "content": half})
    assert r.status_code == 201, r.text
    # Mum's write counted against Ada: Ada's own home has no room left for as much again.
    r = await ada.call("POST", "/api/file", json={"path": "b.txt", "content": half})
    assert r.status_code == 413 and r.json()["error"]["code"] == "quota_exceeded"
    r = await mum.call(
        "POST", "/api/file", json={"path": "projects/ada/big/c.txt", "content": half}
    )
    assert r.status_code == 413  # mum has no limit, but the project's owner has
    # Refused means untouched: the first file is whole, the others were never made.
    folder = runtime.core.layout.root / "projects" / household["ada"] / "big"
    assert sorted(p.name for p in folder.iterdir()) == ["a.txt"]
    assert (folder / "a.txt").read_text() == half
    assert not (runtime.core.layout.home(household["ada"]) / "b.txt").exists()
    # The same through the tools of a signed-in member.
    from skald.agent.cancel import CancelScope
    from skald.agent.tools import ToolContext

    ctx = ToolContext(
        conversation_id="c", call_id="1", depth=0, cancel=CancelScope(), sink=lambda e: None
    )
    member = runtime.user_runtimes[household["mum"]]
    write = next(t for t in member.all_tools() if t.name == "write_file")
    result = await write.run({"path": "projects/ada/big/d.txt", "content": half}, ctx)
    assert result.is_error and "quota" in result.content.lower()
    assert sorted(p.name for p in folder.iterdir()) == ["a.txt"]


async def test_a_shared_folder_counts_against_the_administrator_who_made_it(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    made = (await mum.call("POST", "/api/shared-folders", json={"name": "Photos"})).json()
    assert made["owner"] == household["mum"]
    (runtime.core.layout.root / "shared" / "photos" / "p.bin").write_bytes(b"x" * 300_000)
    used = await runtime.storage.usage(household["mum"])
    assert runtime.storage.scan(household["mum"]) >= 300_000 > 0 and used >= 0
    assert runtime.storage.scan(household["ada"]) < 300_000


async def test_a_link_into_a_project_the_member_is_not_in_is_refused_by_tools_and_api(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, ada: str
) -> None:
    """Links planted (from a sandbox) in Ada's home, in her own project and in a project
    she is in, each pointing into a project of Mum's that Ada is not in: never followed,
    by any route, for reading or writing; the ZIPs and grep leave the target out."""
    from skald.agent.cancel import CancelScope
    from skald.agent.tools import ToolContext

    projects = runtime.server.state(Projects)
    root = runtime.core.layout.root / "projects"
    await projects.create(household["mum"], "Secret")
    together = await projects.create(household["mum"], "Together")
    await projects.set_member(together, "ada", "write")
    await projects.create(ada, "Mine")
    hidden = root / household["mum"] / "secret"
    hidden.mkdir(parents=True, exist_ok=True)
    (hidden / "plan.md").write_text("S3CRET-PLAN")
    home = runtime.core.layout.home(ada)
    home.mkdir(parents=True, exist_ok=True)
    mine = root / ada / "mine"
    ours = root / household["mum"] / "together"
    for folder in (mine, ours):
        folder.mkdir(parents=True, exist_ok=True)
    (home / "peek").symlink_to(hidden)
    (home / "peek.md").symlink_to(hidden / "plan.md")
    (home / "rel").symlink_to(f"../../projects/{household['mum']}/secret")
    (mine / "to_secret").symlink_to(hidden)
    (mine / "rel").symlink_to(f"../../{household['mum']}/secret")
    (ours / "to_secret").symlink_to("../secret")
    paths = (
        "peek/plan.md",
        "peek.md",
        "~/rel/plan.md",
        "/home/skald/peek/plan.md",
        "projects/ada/mine/to_secret/plan.md",
        "projects/ada/mine/rel/plan.md",
        "projects/mum/together/to_secret/plan.md",
        # The project itself, by name: Ada is not in it.
        "projects/mum/secret/plan.md",
    )
    client = await signed_in(make_client, "ada")
    for path in paths:
        r = await client.call("GET", f"/api/file?path={path}")
        assert r.status_code == 403 and "S3CRET" not in r.text, (path, r.status_code)
        w = await client.call("POST", "/api/file", json={"path": path, "content": "x"})
        assert w.status_code == 403, (path, w.status_code)
        folder = path.rsplit("/", 1)[0]
        if folder.endswith(("peek", "rel", "to_secret", "secret")):
            d = await client.call("GET", f"/api/files/dir?path={folder}")
            assert d.status_code == 403 and "plan.md" not in d.text, (folder, d.status_code)
    for place in ("~", "projects/ada/mine", "projects/mum/together"):
        z = await client.call("GET", f"/api/files/zip?path={place}")
        assert z.status_code == 200 and b"S3CRET" not in z.content, place
    ctx = ToolContext(
        conversation_id="c", call_id="1", depth=0, cancel=CancelScope(), sink=lambda e: None
    )
    tools = {t.name: t for t in runtime.user_runtimes[ada].all_tools()}
    for path in paths:
        for name, args in (
            ("read_file", {"path": path}),
            ("write_file", {"path": path, "content": "x"}),
            ("list_files", {"path": path.rsplit("/", 1)[0]}),
        ):
            result = await tools[name].run(args, ctx)
            assert result.is_error and "S3CRET" not in result.content, (name, path, result)
    for place in ("~", "projects/ada/mine", "projects/mum/together"):
        found = await tools["grep"].run({"pattern": "S3CRET", "path": place}, ctx)
        assert "S3CRET-PLAN" not in found.content, place
    assert sorted(p.name for p in hidden.iterdir()) == ["plan.md"]
    assert (hidden / "plan.md").read_text() == "S3CRET-PLAN"


async def test_a_project_whose_folder_cannot_be_made_leaves_no_row_and_its_name_free(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    owner_dir = runtime.core.layout.root / "projects" / household["ada"]
    owner_dir.parent.mkdir(mode=0o700, exist_ok=True)
    owner_dir.write_text("in the way")  # a file where the owner's folder goes
    r = await ada.call("POST", "/api/projects", json={"name": "Den"})
    # A clear refusal that names the folder (a name in the way: EEXIST), never a 500.
    assert r.status_code == 409, r.text
    assert "the folder of project 'den'" in r.json()["error"]["message"]
    rows = await runtime.server.db.call(
        lambda c: c.execute("SELECT count(*) FROM projects WHERE slug='den'").fetchone()
    )
    assert rows == (0,)
    owner_dir.unlink()
    r = await ada.call("POST", "/api/projects", json={"name": "Den"})  # the name is free
    assert r.status_code == 201, r.text
    assert (owner_dir / "den").is_dir()


@pytest.mark.parametrize(
    ("who", "route", "made", "noun"),
    [
        ("ada", "/api/projects", "/api/projects/ada/den", "a project"),
        ("mum", "/api/shared-folders", "/api/shared-folders/den", "a shared folder"),
    ],
)
async def test_a_place_named_with_only_white_space_is_refused_at_creation_and_at_a_rename(
    household: dict[str, str], make_client: MakeClient, who: str, route: str, made: str, noun: str
) -> None:
    client = await signed_in(make_client, who)
    refused = await client.call("POST", route, json={"name": " \n\t "})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["message"] == f"{noun} needs a name"
    assert (await client.call("POST", route, json={"name": "Den"})).status_code == 201
    renamed = await client.call("PATCH", made, json={"name": "\n  ", "description": "kept?"})
    assert renamed.status_code == 400 and noun in renamed.json()["error"]["message"]
    listed = (await client.call("GET", route)).json()
    # The refused rename changed nothing, the description it carried included.
    assert [(p["name"], p["description"]) for p in listed] == [("Den", "")]
