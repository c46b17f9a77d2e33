"""Shared folders (#26 item 1): managed by `folders.manage`, reached as `shared/<slug>/`
by their members alone, read-only enforced by the router's write gate, changes seen at
once by a signed-in member's tools, deletion through a restorable trash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import MakeClient, signed_in
from swap_support import Swapper, swapper_fixture  # noqa: F401  (registers `swapper`)

from skald.agent.cancel import CancelScope
from skald.agent.tools import ToolContext, ToolResult
from skald.core.runtime import Runtime
from skald.features.shared_folders.store import SharedFolders

CTX = ToolContext(
    conversation_id="conv", call_id="call_1", depth=0, cancel=CancelScope(), sink=lambda e: None
)


def folders(runtime: Runtime) -> SharedFolders:
    return runtime.server.state(SharedFolders)


async def tool(runtime: Runtime, user_id: str, name: str, **args: Any) -> ToolResult:
    member = runtime.user_runtimes[user_id]
    found = next(t for t in member.all_tools() if t.name == name)
    return await found.run(args, CTX)


async def test_only_a_role_with_folders_manage_creates_and_the_admin_role_has_it(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    ada = await signed_in(make_client, "ada")
    r = await ada.call("POST", "/api/shared-folders", json={"name": "Photos"})
    assert r.status_code == 403
    r = await mum.call("POST", "/api/shared-folders", json={"name": "Family Photos!"})
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["slug"] == "family-photos" and made["name"] == "Family Photos!"
    assert (runtime.core.layout.root / "shared" / "family-photos").is_dir()
    again = await mum.call("POST", "/api/shared-folders", json={"name": "family photos"})
    assert again.status_code == 409
    bad = await mum.call("POST", "/api/shared-folders", json={"name": "x", "slug": "../etc"})
    assert bad.status_code == 400


async def test_renaming_changes_the_name_shown_never_the_path(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    await mum.call("POST", "/api/shared-folders", json={"name": "Paperwork"})
    await mum.call("PUT", f"/api/shared-folders/paperwork/members/{household['ada']}",
                   json={"access": "write"})  # fmt: skip
    r = await mum.call(
        "PATCH", "/api/shared-folders/paperwork", json={"name": "House papers", "description": "Bills\nand deeds"}
    )  # fmt: skip
    assert r.status_code == 200 and r.json()["slug"] == "paperwork"
    assert r.json()["description"] == "Bills and deeds"  # one line: it reaches prompts
    ada = await signed_in(make_client, "ada")
    places = {p["path"]: p for p in (await ada.call("GET", "/api/files/places")).json()}
    assert places["shared/paperwork"]["label"] == "House papers"


async def test_a_read_only_member_reads_but_every_write_is_refused_by_the_router(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    sf = folders(runtime)
    await sf.create("Photos")
    await sf.set_member("photos", household["ada"], "write")
    await sf.set_member("photos", household["tim"], "read")
    ada = await signed_in(make_client, "ada")
    r = await ada.call(
        "POST", "/api/file", json={"path": "shared/photos/beach.txt", "content": "sun"}
    )
    assert r.status_code == 201, r.text
    assert (runtime.core.layout.root / "shared/photos/beach.txt").read_text() == "sun"
    mum = await signed_in(make_client, "mum")
    await sf.set_member("photos", household["mum"], "read")
    # Mum (read-only) sees Ada's file at once, and cannot change anything there.
    r = await mum.call("GET", "/api/file?path=shared/photos/beach.txt")
    assert r.status_code == 200 and r.text == "sun"
    for method, path, body in (
        ("POST", "/api/file", {"path": "shared/photos/x.txt", "content": "no"}),
        ("POST", "/api/file", {"path": "shared/photos/beach.txt", "content": "no"}),
        ("POST", "/api/file", {"path": "shared/photos/sub", "mkdir": True}),
        ("PATCH", "/api/file", {"from": "shared/photos/beach.txt", "to": "shared/photos/b.txt"}),
        ("DELETE", "/api/file?path=shared/photos/beach.txt", None),
    ):
        r = await mum.call(method, path, json=body)
        assert r.status_code == 403 and r.json()["error"]["code"] == "read_only", (method, path)
    assert [p.name for p in (runtime.core.layout.root / "shared/photos").iterdir()] == ["beach.txt"]
    places = {p["path"]: p for p in (await mum.call("GET", "/api/files/places")).json()}
    assert places["shared/photos"]["writable"] is False


async def test_a_folder_is_out_of_reach_for_a_non_member_by_every_spelling(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    sf = folders(runtime)
    await sf.create("Photos")
    await sf.set_member("photos", household["ada"], "write")
    (runtime.core.layout.root / "shared/photos/secret.txt").write_text("S3CRET")
    mum = await signed_in(make_client, "mum")  # an admin, but not a member
    for path in (
        "shared/photos/secret.txt",
        "~/shared/photos/secret.txt",
        "/home/skald/shared/photos/secret.txt",
    ):
        r = await mum.call("GET", f"/api/file?path={path}")
        assert r.status_code == 404, (path, r.status_code)  # her own home: nothing there
        assert "S3CRET" not in r.text
    places = [p["path"] for p in (await mum.call("GET", "/api/files/places")).json()]
    assert "shared/photos" not in places


async def test_access_changes_reach_a_signed_in_members_tools_at_their_next_call(
    runtime: Runtime, household: dict[str, str], ada: str
) -> None:
    sf = folders(runtime)
    await sf.create("Recipes")
    result = await tool(runtime, ada, "write_file", path="shared/recipes/soup.md", content="x")
    assert not (runtime.core.layout.root / "shared/recipes/soup.md").exists()  # her home
    await sf.set_member("recipes", ada, "read")
    result = await tool(runtime, ada, "write_file", path="shared/recipes/soup.md", content="x")
    assert result.is_error and "read-only" in result.content
    await sf.set_member("recipes", ada, "write")
    result = await tool(runtime, ada, "write_file", path="shared/recipes/pie.md", content="pie")
    assert not result.is_error, result.content
    assert (runtime.core.layout.root / "shared/recipes/pie.md").read_text() == "pie"
    await sf.remove_member("recipes", ada)
    result = await tool(runtime, ada, "read_file", path="shared/recipes/pie.md")
    assert result.is_error  # her own home has no such file: the folder is gone for her


async def test_the_prompt_names_the_members_folders_and_access_and_nothing_when_none(
    runtime: Runtime, household: dict[str, str], ada: str
) -> None:
    member = runtime.user_runtimes[ada]
    assert (await member._prompt_values())["SHARED_FOLDERS"] == ""
    sf = folders(runtime)
    await sf.create("Holiday", "Plans for August\n# Forged heading")
    await sf.set_member("holiday", ada, "read")
    block = (await member._prompt_values())["SHARED_FOLDERS"]
    assert "shared/holiday/ (Holiday, read-only): Plans for August # Forged heading" in block
    assert "\n#" not in block


async def test_deleting_moves_to_a_trash_that_restores_with_members_and_files(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    sf = folders(runtime)
    await sf.create("Photos")
    await sf.set_member("photos", household["ada"], "write")
    root = runtime.core.layout.root / "shared"
    (root / "photos/a.jpg").write_bytes(b"jpg")
    assert (await mum.call("DELETE", "/api/shared-folders/photos")).status_code == 204
    assert not (root / "photos").exists() and (root / ".trash/photos/a.jpg").exists()
    ada = await signed_in(make_client, "ada")
    places = [p["path"] for p in (await ada.call("GET", "/api/files/places")).json()]
    assert "shared/photos" not in places
    taken = await mum.call("POST", "/api/shared-folders", json={"name": "Photos"})
    assert taken.status_code == 409  # a trashed path name stays taken
    r = await mum.call("POST", "/api/shared-folders/photos/restore")
    assert r.status_code == 201 and r.json()["members"][0]["access"] == "write"
    r = await ada.call("GET", "/api/file?path=shared/photos/a.jpg")
    assert r.status_code == 200 and r.content == b"jpg"
    in_use = await mum.call("DELETE", "/api/shared-folders/photos/trash")
    assert in_use.status_code == 409
    await mum.call("DELETE", "/api/shared-folders/photos")
    assert (await mum.call("DELETE", "/api/shared-folders/photos/trash")).status_code == 204
    assert not (root / ".trash/photos").exists()
    assert (await mum.call("GET", "/api/shared-folders")).json() == []


async def test_a_link_planted_in_a_shared_folder_is_refused_for_every_member(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, tmp_path: Path
) -> None:
    sf = folders(runtime)
    await sf.create("Photos")
    await sf.create("Secret")
    (runtime.core.layout.root / "shared/secret/s.txt").write_text("S3CRET")
    for who in ("ada", "mum"):
        await sf.set_member("photos", household[who], "write")
    mum_home = runtime.core.layout.home(household["mum"])
    mum_home.mkdir(exist_ok=True)
    (mum_home / "diary.txt").write_text("S3CRET")
    planted = runtime.core.layout.root / "shared/photos"
    (planted / "to_mum").symlink_to(mum_home)
    (planted / "to_data").symlink_to(runtime.core.layout.root)
    (planted / "to_secret").symlink_to(runtime.core.layout.root / "shared/secret")
    (planted / "rel").symlink_to("../secret/s.txt")
    for who in ("ada", "mum"):
        client = await signed_in(make_client, who)
        for path in (
            "shared/photos/to_mum/diary.txt",
            "shared/photos/to_data/system.db",
            "shared/photos/to_secret/s.txt",
            "shared/photos/rel",
        ):
            r = await client.call("GET", f"/api/file?path={path}")
            assert r.status_code == 403, (who, path, r.status_code)
            w = await client.call("POST", "/api/file", json={"path": path, "content": "x"})
            assert w.status_code == 403, (who, path, w.status_code)
        z = await client.call("GET", "/api/files/zip?path=shared/photos")
        assert z.status_code == 200 and b"S3CRET" not in z.content
    assert (mum_home / "diary.txt").read_text() == "S3CRET"


async def test_a_zip_of_a_shared_folder_never_leaks_while_a_folder_in_it_swaps_with_a_link(
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    swapper: Swapper,
    tmp_path: Path,
) -> None:
    sf = folders(runtime)
    await sf.create("Photos")
    await sf.set_member("photos", household["ada"], "write")
    shared = runtime.core.layout.root / "shared/photos"
    (shared / "f" / "sub").mkdir(parents=True)
    (shared / "f" / "a.txt").write_text("a")
    (shared / "f" / "sub" / "b.txt").write_text("b")
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    for name in ("a.txt", "sub/b.txt"):
        (outside / name).write_bytes(b"OUTSIDE-SECRET")
    ada = await signed_in(make_client, "ada")
    swapper(shared, "f", outside)
    seen: dict[int, int] = {}
    for _ in range(40):
        for path in ("shared/photos", "shared/photos/f", "shared/photos/f/sub"):
            r = await ada.call("GET", f"/api/files/zip?path={path}")
            seen[r.status_code] = seen.get(r.status_code, 0) + 1
            assert r.status_code in (200, 403, 404, 409), (path, r.status_code)
            assert b"OUTSIDE-SECRET" not in r.content, path
    assert seen.get(200, 0) > 0, seen
