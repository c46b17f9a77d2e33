"""Shared folders (#26 item 1): managed by `folders.manage`, reached as `shared/<slug>/`
by their members alone, read-only enforced by the router's write gate, changes seen at
once by a signed-in member's tools, deletion through a restorable trash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
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


async def photos_with_ada(runtime: Runtime, household: dict[str, str]) -> SharedFolders:
    """Where most tests here start: the shared folder Photos, with ada a writer."""
    sf = folders(runtime)
    await sf.create("Photos")
    await sf.set_member("photos", household["ada"], "write")
    return sf


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
    sf = await photos_with_ada(runtime, household)
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
    await photos_with_ada(runtime, household)
    (runtime.core.layout.root / "shared/photos/secret.txt").write_text("S3CRET")
    mum = await signed_in(make_client, "mum")  # an admin, but not a member
    for path in (
        "shared/photos/secret.txt",
        "~/shared/photos/secret.txt",
        "/home/skald/shared/photos/secret.txt",
    ):
        r = await mum.call("GET", f"/api/file?path={path}")
        assert r.status_code == 403, (path, r.status_code)  # never her own home's folder
        assert "no access to the shared folder 'photos'" in r.json()["error"]["message"]
        assert "S3CRET" not in r.text
    places = [p["path"] for p in (await mum.call("GET", "/api/files/places")).json()]
    assert "shared/photos" not in places


async def test_access_changes_reach_a_signed_in_members_tools_at_their_next_call(
    runtime: Runtime, household: dict[str, str], ada: str
) -> None:
    sf = folders(runtime)
    await sf.create("Recipes")
    result = await tool(runtime, ada, "write_file", path="shared/recipes/soup.md", content="x")
    assert result.is_error and "no access to the shared folder 'recipes'" in result.content
    assert not (runtime.core.layout.root / "shared/recipes/soup.md").exists()
    await sf.set_member("recipes", ada, "read")
    result = await tool(runtime, ada, "write_file", path="shared/recipes/soup.md", content="x")
    assert result.is_error and "read-only" in result.content
    await sf.set_member("recipes", ada, "write")
    result = await tool(runtime, ada, "write_file", path="shared/recipes/pie.md", content="pie")
    assert not result.is_error, result.content
    assert (runtime.core.layout.root / "shared/recipes/pie.md").read_text() == "pie"
    await sf.remove_member("recipes", ada)
    result = await tool(runtime, ada, "read_file", path="shared/recipes/pie.md")
    assert result.is_error and "no access to the shared folder 'recipes'" in result.content


def _everything_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


async def test_after_revoking_a_write_is_refused_with_a_sentence_never_kept_in_the_home(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, ada: str
) -> None:
    """Access revoked (a shared folder) or given up (a project she left): every write
    to the old path is refused, by the tools and the Files API, and saying why; none is
    kept privately in her home (where she would find it hidden later); reads refused."""
    from skald.features.projects.store import Projects

    sf = folders(runtime)
    await sf.create("Recipes")
    await sf.set_member("recipes", ada, "write")
    mum_project = await runtime.server.state(Projects).create(household["mum"], "Kitchen")
    await runtime.server.state(Projects).set_member(mum_project, "ada", "write")
    client = await signed_in(make_client, "ada")
    home = runtime.core.layout.home(ada)
    places = (
        ("shared/recipes", "shared folder 'recipes'", runtime.core.layout.root / "shared/recipes"),
        (
            "projects/mum/kitchen",
            "project 'mum/kitchen'",
            runtime.core.layout.root / "projects" / household["mum"] / "kitchen",
        ),
    )
    for place, _, folder in places:
        done = await tool(runtime, ada, "write_file", path=f"{place}/a.md", content="tool")
        assert not done.is_error, done.content
        r = await client.call("POST", "/api/file", json={"path": f"{place}/b.md", "content": "api"})
        assert r.status_code == 201, r.text
        assert _everything_in(folder) == ["a.md", "b.md"]
    before = _everything_in(home)
    await sf.remove_member("recipes", ada)
    left = await client.call("DELETE", "/api/projects/mum/kitchen/members/ada")
    assert left.status_code == 200, left.text
    for place, sentence, folder in places:
        refusal = f"you have no access to the {sentence}"
        for path in (f"{place}/a.md", f"{place}/new.md", f"~/{place}/c.md", f"{place}/sub/d.md"):
            for name, args in (
                ("write_file", {"path": path, "content": "after"}),
                ("append_file", {"path": path, "content": "after"}),
                ("edit_file", {"path": path, "old_text": "tool", "new_text": "x"}),
                ("read_file", {"path": path}),
            ):
                result = await tool(runtime, ada, name, **args)
                assert result.is_error and refusal in result.content, (name, path, result)
            r = await client.call("POST", "/api/file", json={"path": path, "content": "after"})
            assert r.status_code == 403 and refusal in r.json()["error"]["message"], (path, r.text)
            r = await client.call("GET", f"/api/file?path={path}")
            assert r.status_code == 403 and refusal in r.json()["error"]["message"], (path, r.text)
        for method, url, body in (
            ("POST", "/api/file", {"path": f"{place}/sub", "mkdir": True}),
            ("PATCH", "/api/file", {"from": "~/x.txt", "to": f"{place}/x.txt"}),
            ("GET", f"/api/files/dir?path={place}", None),
            ("GET", f"/api/files/zip?path={place}", None),
        ):
            (home / "x.txt").write_text("mine")
            r = await client.call(method, url, json=body)
            assert r.status_code == 403 and refusal in r.json()["error"]["message"], (url, r.text)
        up = await client.call(
            "POST", f"/api/file/upload?path={place}", files={"file": ("u.txt", b"upload")}
        )
        assert up.status_code == 403, up.text
        assert _everything_in(folder) == ["a.md", "b.md"]
        assert (folder / "a.md").read_text() == "tool"
    # Nothing of it landed in her home: no `shared`/`projects` folder was even made.
    assert _everything_in(home) == sorted({*before, "x.txt"})
    assert not (home / "shared").exists() and not (home / "projects").exists()
    # The group itself is no folder of hers either, whatever she has left.
    listed = await tool(runtime, ada, "list_files", path="shared")
    assert listed.is_error and "you have no shared folders" in listed.content


def test_what_a_home_kept_in_a_groups_folder_moves_to_its_own_folder_and_stays_reachable(
    tmp_path: Path,
) -> None:
    """Older versions let a member keep files in `~/shared`, `~/projects`, `~/skills`
    (or write there after losing access); those names are reserved now, so the files
    move to `~/shared (own)`, … keeping their paths. Folders where the sandbox may have
    mounted a place stay (only what is in them moves); a second run finds nothing."""
    from skald.files.homes import move_out_of_groups
    from skald.files.router import PathDeniedError, PathRouter

    homes = tmp_path / "homes"
    home = homes / "ada1"
    for path, text in (
        ("shared/notes.txt", "n"),
        ("shared/recipes/pie.md", "pie"),  # written after her access went
        ("shared/recipes/old/a.txt", "a"),
        ("projects/app/README", "readme"),
        ("projects/app/src/main.py", "print()"),
        ("projects/app/src/pkg/m.py", "m"),
        ("shared (own)/notes.txt", "taken"),  # a name already there: `notes (2).txt`
    ):
        (home / path).parent.mkdir(parents=True, exist_ok=True)
        (home / path).write_text(text)
    (home / "shared/photos").mkdir()  # an empty mountpoint: stays
    (home / "skills").write_text("a file named skills")
    (home / "plain.txt").write_text("untouched")

    moved = move_out_of_groups(homes)

    assert sorted(moved) == [
        "ada1/projects/app/README",
        "ada1/projects/app/src/main.py",
        "ada1/projects/app/src/pkg",
        "ada1/shared/notes.txt",
        "ada1/shared/recipes/old",
        "ada1/shared/recipes/pie.md",
        "ada1/skills",
    ]
    own = {
        str(p.relative_to(home)): p.read_text()
        for p in home.rglob("*")
        if p.is_file() and " (own)" in str(p)
    }
    assert own == {
        "shared (own)/notes.txt": "taken",
        "shared (own)/notes (2).txt": "n",
        "shared (own)/recipes/pie.md": "pie",
        "shared (own)/recipes/old/a.txt": "a",
        "projects (own)/app/README": "readme",
        "projects (own)/app/src/main.py": "print()",
        "projects (own)/app/src/pkg/m.py": "m",
        "skills (own)": "a file named skills",
    }
    # What stays holds no file: folders only (the sandbox's mountpoints among them).
    assert not [p for p in (home / "shared").rglob("*") if not p.is_dir()]
    assert not [p for p in (home / "projects").rglob("*") if not p.is_dir()]
    assert (home / "shared/photos").is_dir() and (home / "plain.txt").read_text() == "untouched"
    assert move_out_of_groups(homes) == []
    # Reachable again, by the name the home listing shows.
    router = PathRouter(home, None)
    found = router.physical("shared (own)/recipes/pie.md")
    assert found.mount == "home" and found.path.read_text() == "pie"
    with pytest.raises(PathDeniedError, match="no access to the shared folder 'recipes'"):
        router.physical("shared/recipes/pie.md")


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
    await photos_with_ada(runtime, household)
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
    await photos_with_ada(runtime, household)
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
