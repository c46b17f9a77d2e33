"""Skills (#26 item 4): the household's tree (changed only with `skills.manage`, which
no role has by default) and each member's own; both read-only places; SKILLS_LIST; the
skill tools; a bare id in both trees fails naming both; ZIP import refuses unsafe ZIPs."""

from __future__ import annotations

import io
import os
import stat
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import MakeClient, member_quota, signed_in

from skald.agent.cancel import CancelScope
from skald.agent.tools import ToolContext, ToolResult
from skald.core.runtime import Runtime
from skald.errors import ConfigError
from skald.features.skills.store import Listings
from skald.paths import DataLayout
from skald.plugins import hookimpl
from skald.plugins.manager import Plugins

CTX = ToolContext(
    conversation_id="conv", call_id="call_1", depth=0, cancel=CancelScope(), sink=lambda e: None
)
MIB = 1024 * 1024
SHOP = "---\nname: Weekly shop\ndescription: How we do the weekly shop\n---\n1. List\n2. Buy\n"


async def tool(runtime: Runtime, user_id: str, name: str, **args: Any) -> ToolResult:
    found = next(t for t in runtime.user_runtimes[user_id].all_tools() if t.name == name)
    return await found.run(args, CTX)


def household_skill(runtime: Runtime, skill_id: str, text: str = SHOP) -> Path:
    folder = runtime.core.layout.root / "skills" / "shared" / skill_id
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text)
    return folder


def zipped(files: dict[str, bytes], link: str | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        if link:
            info = zipfile.ZipInfo(link)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, "/etc/passwd")
    return out.getvalue()


async def test_a_household_skill_is_in_every_members_prompt_and_can_be_read(
    runtime: Runtime, household: dict[str, str], ada: str
) -> None:
    member = runtime.user_runtimes[ada]
    assert (await member._prompt_values())["SKILLS_LIST"] == ""
    household_skill(runtime, "weekly-shop")  # by hand on the host: shown within the bound
    runtime.server.state(Listings).max_age = 0
    listed = (await member._prompt_values())["SKILLS_LIST"]
    assert "- shared/weekly-shop (Weekly shop): How we do the weekly shop" in listed
    read = await tool(runtime, ada, "skill_read", skill="weekly-shop")
    assert not read.is_error and "2. Buy" in read.content
    r = await tool(runtime, ada, "read_file", path="skills/shared/weekly-shop/SKILL.md")
    assert "2. Buy" in r.content


async def test_only_skills_manage_registers_a_household_skill_and_a_member_has_their_own(
    runtime: Runtime, household: dict[str, str], ada: str
) -> None:
    home = runtime.core.layout.home(ada)
    (home / "drafts" / "bread").mkdir(parents=True)
    (home / "drafts" / "bread" / "SKILL.md").write_text("# Bread\nKnead for ten minutes.\n")
    (home / "drafts" / "bread" / "notes.txt").write_text("flour")
    refused = await tool(runtime, ada, "skill_register", path="~/drafts/bread", household=True)
    assert refused.is_error and "skills.manage" in refused.content
    assert not (runtime.core.layout.root / "skills" / "shared" / "bread").exists()
    ok = await tool(runtime, ada, "skill_register", path="~/drafts/bread")
    assert not ok.is_error, ok.content
    mine = runtime.core.layout.root / "skills" / "members" / ada / "bread"
    assert (mine / "notes.txt").read_text() == "flour"
    listed = (await runtime.user_runtimes[ada]._prompt_values())["SKILLS_LIST"]
    assert "- mine/bread (Bread): Knead for ten minutes." in listed
    # Read-only for her tools: only skill_register and skill_delete change it.
    w = await tool(runtime, ada, "write_file", path="skills/mine/bread/SKILL.md", content="x")
    assert w.is_error and "read-only" in w.content
    assert not (await tool(runtime, ada, "skill_delete", id="bread")).is_error
    assert not mine.exists()


async def test_the_prompts_skill_list_is_kept_between_turns_and_every_writer_drops_it(
    runtime: Runtime, household: dict[str, str], ada: str, make_client: MakeClient
) -> None:
    member = runtime.user_runtimes[ada]
    listings = runtime.server.state(Listings)
    now = [1000.0]
    listings.clock = lambda: now[0]
    listed = (await member._prompt_values())["SKILLS_LIST"]
    assert listed == ""
    # A tree changed behind Skald's back is not read again on every turn...
    household_skill(runtime, "weekly-shop")
    assert (await member._prompt_values())["SKILLS_LIST"] == ""
    # ...but after at most the age bound.
    now[0] += listings.max_age
    assert "shared/weekly-shop" in (await member._prompt_values())["SKILLS_LIST"]
    # Each writer drops it at once: the tool's register and delete, the API's import and
    # delete (the next turn lists what the member just did).
    home = runtime.core.layout.home(ada)
    (home / "bread").mkdir()
    (home / "bread" / "SKILL.md").write_text("# Bread\nKnead.\n")
    assert not (await tool(runtime, ada, "skill_register", path="~/bread")).is_error
    assert "mine/bread" in (await member._prompt_values())["SKILLS_LIST"]
    assert not (await tool(runtime, ada, "skill_delete", id="bread")).is_error
    assert "mine/bread" not in (await member._prompt_values())["SKILLS_LIST"]
    client = await signed_in(make_client, "ada")
    shop = zipped({"shop/SKILL.md": SHOP.encode()})
    r = await client.http.post(
        "/api/skills/mine/shop/zip", content=shop, headers={"X-CSRF-Token": client.csrf}
    )
    assert r.status_code == 201, r.text
    assert "mine/shop" in (await member._prompt_values())["SKILLS_LIST"]
    assert (await client.call("DELETE", "/api/skills/mine/shop")).status_code in (200, 204)
    assert "mine/shop" not in (await member._prompt_values())["SKILLS_LIST"]

    # A write that fails half-way drops it too (what it left may show).
    async def broken() -> None:
        await listings.write(_fail)

    kept = listings._changes
    with pytest.raises(OSError):
        await broken()
    assert listings._changes == kept + 1


def _fail() -> None:
    raise OSError("disk full")


async def test_a_members_own_skills_count_against_their_quota_and_a_copy_past_it_is_refused(
    runtime: Runtime, household: dict[str, str], ada: str, make_client: MakeClient
) -> None:
    admin = await signed_in(make_client, "mum")
    await member_quota(admin, 4)
    home = runtime.core.layout.home(ada)
    (home / "big").mkdir()
    (home / "big" / "SKILL.md").write_text("# Big\n")
    (home / "big" / "data.bin").write_bytes(os.urandom(3 * MIB))  # 3 of her 4 MiB
    mine = runtime.core.layout.root / "skills" / "members" / ada
    # A copy of it would take her past the quota: refused, nothing copied in.
    r = await tool(runtime, ada, "skill_register", path="~/big")
    assert r.is_error and "quota exceeded" in r.content, r.content
    assert not (mine / "big").exists()
    # One that fits is copied, and counts: her own tree is hers (usage walks it too).
    (home / "big" / "data.bin").write_bytes(os.urandom(MIB))
    client = await signed_in(make_client, "ada")
    before = runtime.storage.scan(ada)  # what her home holds now (changed by hand above)
    assert not (await tool(runtime, ada, "skill_register", path="~/big")).is_error
    after = (await client.call("GET", "/api/storage")).json()["used"]
    assert after >= before + MIB  # counted at once
    assert runtime.storage.scan(ada) >= before + MIB  # and by the walk: her tree is hers
    # Copies cannot pile up outside the quota, through the tool or a ZIP.
    r = await tool(runtime, ada, "skill_register", path="~/big", id="big-2")
    assert not r.is_error, r.content
    r = await tool(runtime, ada, "skill_register", path="~/big", id="big-3")
    assert r.is_error and "quota exceeded" in r.content
    big = zipped({"SKILL.md": b"# Zip\n", "data.bin": os.urandom(2 * MIB)})
    r = await client.http.post(
        "/api/skills/mine/zipped/zip", content=big, headers={"X-CSRF-Token": client.csrf}
    )
    assert r.status_code == 413 and r.json()["error"]["code"] == "quota_exceeded", r.text
    assert sorted(p.name for p in mine.iterdir()) == ["big", "big-2"]


async def test_deleting_a_member_removes_their_own_skills_and_no_one_elses(
    runtime: Runtime, household: dict[str, str], ada: str
) -> None:
    skills = runtime.core.layout.root / "skills"
    household_skill(runtime, "weekly-shop")
    for who in (ada, household["tim"]):
        (skills / "members" / who / "bread").mkdir(parents=True)
        (skills / "members" / who / "bread" / "SKILL.md").write_text("# Bread\n")
    assert await runtime.accounts.delete(ada) == []
    assert not (skills / "members" / ada).exists()
    assert (skills / "members" / household["tim"] / "bread" / "SKILL.md").exists()
    assert (skills / "shared" / "weekly-shop" / "SKILL.md").exists()


def test_a_private_place_must_lie_inside_the_data_directory(tmp_path: Path) -> None:
    plugins = Plugins.builtin()

    class Slip:
        @hookimpl
        def skald_private_places(self, layout: DataLayout) -> list[Path]:
            return [layout.root / "skills"]  # every member's skills, not one member's

    plugins.pm.register(Slip(), "slip")
    with pytest.raises(ConfigError, match="is not a member's own place"):
        plugins.private_places("u1", DataLayout(tmp_path / "data"))


async def test_a_folder_holding_a_link_is_not_registered(
    runtime: Runtime, household: dict[str, str], ada: str, tmp_path: Path
) -> None:
    home = runtime.core.layout.home(ada)
    (home / "s").mkdir()
    (home / "s" / "SKILL.md").write_text("# S\n")
    (tmp_path / "secret").write_text("SECRET")
    (home / "s" / "leak").symlink_to(tmp_path / "secret")
    r = await tool(runtime, ada, "skill_register", path="~/s")
    assert r.is_error
    assert not (runtime.core.layout.root / "skills" / "members" / ada / "s").exists()
    leftovers = list((runtime.core.layout.root / "skills" / "members" / ada).iterdir())
    assert leftovers == []


async def test_a_bare_id_in_both_trees_fails_naming_both(
    runtime: Runtime, household: dict[str, str], ada: str
) -> None:
    household_skill(runtime, "bread")
    mine = runtime.core.layout.root / "skills" / "members" / ada / "bread"
    mine.mkdir(parents=True)
    (mine / "SKILL.md").write_text("# Mine\n")
    r = await tool(runtime, ada, "skill_read", skill="bread")
    assert r.is_error and "shared/bread" in r.content and "mine/bread" in r.content
    r = await tool(runtime, ada, "skill_read", skill="mine/bread")
    assert r.content.startswith("# Mine")


async def test_zip_import_needs_the_trees_capability_and_refuses_unsafe_zips(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    good = zipped({"shop/SKILL.md": SHOP.encode(), "shop/list.txt": b"milk"})
    url = "/api/skills/shared/shop/zip"
    r = await mum.http.post(url, content=good, headers={"X-CSRF-Token": mum.csrf})
    assert r.status_code == 403  # administrators lack skills.manage by default
    role = next(x for x in (await mum.call("GET", "/api/roles")).json() if x["name"] == "admin")
    caps = [*role["capabilities"], "skills.manage"]
    assert (
        await mum.call("PATCH", "/api/roles/admin", json={"capabilities": caps})
    ).status_code == 200
    r = await mum.http.post(url, content=good, headers={"X-CSRF-Token": mum.csrf})
    assert r.status_code == 201, r.text
    assert (runtime.core.layout.root / "skills/shared/shop/list.txt").read_bytes() == b"milk"
    for bad in (
        zipped({"SKILL.md": b"#", "../escape.txt": b"x"}),
        zipped({"SKILL.md": b"#"}, link="leak"),
        zipped({"notes.txt": b"no skill file"}),
        b"not a zip",
    ):
        r = await mum.http.post(
            "/api/skills/mine/bad/zip", content=bad, headers={"X-CSRF-Token": mum.csrf}
        )
        assert r.status_code == 400, r.text
    assert not (runtime.core.layout.root / "escape.txt").exists()
    assert [s["id"] for s in (await mum.call("GET", "/api/skills")).json()] == ["shop"]
    ada = await signed_in(make_client, "ada")
    shown = (await ada.call("GET", "/api/skills/shared/shop")).json()
    assert shown["name"] == "Weekly shop" and "2. Buy" in shown["text"]
    assert (await ada.call("DELETE", "/api/skills/shared/shop")).status_code == 403
    w = await ada.call("POST", "/api/file", json={"path": "skills/shared/shop/x", "content": "x"})
    assert w.status_code == 403
