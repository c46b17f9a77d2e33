"""Storage limits: the member's quota on every write path, the free-disk reserve on a
real (small, tmpfs) disk, and long tool arguments cut in what goes back to the model."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import apsw
import httpx
import pytest
from conftest import (
    PASSWORD,
    TEST_ENV,
    Client,
    MakeClient,
    admin_adds_models,
    post_chat,
    set_quota,
    signed_in,
)
from fake_llm import Call, FakeLLM
from prerequisites import unavailable
from sandbox_support import (  # noqa: F401
    docker_fixture,
    new_member_container,
    sandbox_runtime_fixture,
)
from tool_support import CTX

from skald.agent.history import project
from skald.api.app import create_app
from skald.config import load_config
from skald.core.keys import TEST_KDF
from skald.core.runtime import Runtime
from skald.core.user_runtime import UserRuntime
from skald.core.users import UserManager
from skald.errors import DiskFullError, QuotaExceededError
from skald.files.router import PathRouter
from skald.files.tools import file_tools
from skald.llm.types import Message, TextPart, ToolCall
from skald.paths import DataLayout
from skald.quota import MIB, Budget, StorageAccountant, tree_size
from skald.sandbox.manager import SandboxManager
from skald.sandbox.tool import ExecuteCmdTool
from skald.store.database import WAL_SIZE_LIMIT, fetch_all, fetch_one, open_plain
from skald.store.registry import Registry


async def member(runtime: Runtime, name: str) -> UserRuntime:
    return await runtime.attach(await runtime.core.users.unlock(name, PASSWORD))


async def run(ur: UserRuntime, tool: str, **args: Any) -> tuple[bool, str]:
    found = ur.tool_named(tool)
    assert found is not None
    result = await found.run(args, CTX)
    return result.is_error, result.content


# -- measuring --------------------------------------------------------------------------


def test_usage_counts_allocated_blocks_hard_links_once_and_never_follows_links(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    (home / "sub").mkdir(parents=True)
    empty = tree_size(home)
    with (home / "sub" / "taken.bin").open("wb") as f:
        os.posix_fallocate(f.fileno(), 0, 4 * MIB)  # what `fallocate` does in a sandbox
    with (home / "sparse.bin").open("wb") as f:
        f.truncate(1024 * MIB)  # claims 1 GiB, occupies nothing
    os.link(home / "sub" / "taken.bin", home / "hardlink.bin")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "large.bin").write_bytes(b"x" * 8 * MIB)
    (home / "link").symlink_to(outside)
    grown = tree_size(home) - empty
    assert 4 * MIB <= grown < 4 * MIB + 64 * 1024


async def test_a_large_transaction_does_not_leave_a_large_wal_behind(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    db = await open_plain(path, "x")
    try:
        await db.call(lambda c: c.execute("CREATE TABLE t(v BLOB)"))
        await db.transaction(lambda c: c.execute("INSERT INTO t VALUES (?)", (b"\0" * (12 * MIB),)))
        wal = Path(f"{path}-wal")
        assert (await asyncio.to_thread(wal.stat)).st_size > 12 * MIB
        await db.call(lambda c: c.execute("PRAGMA wal_checkpoint").fetchall())
        await db.transaction(lambda c: c.execute("INSERT INTO t VALUES (x'00')"))
        assert (await asyncio.to_thread(wal.stat)).st_size <= WAL_SIZE_LIMIT
    finally:
        await db.aclose()


def test_a_member_exactly_at_quota_may_not_write_more_but_may_free_space(
    layout: DataLayout,
) -> None:
    config = load_config(layout.root, {**TEST_ENV, "SKALD_STORAGE_DISK_RESERVE_MB": "0"})
    accountant = StorageAccountant(layout, config)
    layout.home("u1").mkdir()
    (layout.home("u1") / "a.bin").write_bytes(b"a" * 10_000)
    used = accountant.scan("u1")
    at_quota = Budget(accountant, "u1", quota=used)
    with pytest.raises(QuotaExceededError, match="quota exceeded"):
        at_quota.check(0)  # "may this member still write?": no
    with pytest.raises(QuotaExceededError):
        at_quota.check(1)
    at_quota.check(-5000)  # a write that frees space is never refused
    Budget(accountant, "u1", quota=used + 1).check(0)
    Budget(accountant, "u1", quota=0).check(10 * MIB)  # 0: no limit


# -- the quota on every write path ------------------------------------------------------


async def test_file_and_note_tools_refuse_a_write_past_the_quota_and_say_how_much_is_used(
    runtime: Runtime, household: dict[str, str]
) -> None:
    await set_quota(runtime, "member", 8)
    ada = await member(runtime, "ada")
    home = runtime.core.layout.home(household["ada"])
    budget = await runtime.budget(household["ada"])
    assert budget.quota == 8 * MIB and budget.used > 0  # the database counts too
    room = budget.quota - budget.used

    failed, text = await run(ada, "write_file", path="~/big.txt", content="a" * (room - 64 * 1024))
    assert not failed, text
    failed, text = await run(ada, "write_file", path="~/more.txt", content="b" * (128 * 1024))
    assert failed and text.startswith("Quota exceeded: ") and " of 8.0 MiB used" in text
    assert "128.0 KiB more" in text and not (home / "more.txt").exists()

    # Replacing a file by a smaller one frees room, so it is never refused.
    failed, text = await run(ada, "write_file", path="~/big.txt", content="a" * (room - 400 * 1024))
    assert not failed, text
    failed, text = await run(ada, "write_file", path="~/small.txt", content="x")
    assert not failed, text
    failed, text = await run(
        ada, "edit_file", path="~/small.txt", old_text="x", new_text="y" * (600 * 1024)
    )
    assert failed and text.startswith("Quota exceeded: ")
    assert (home / "small.txt").read_text() == "x"

    failed, text = await run(ada, "write_file", path="user-memory/a.md", content="n" * 200_000)
    assert not failed, text  # 200 KB fits in the 400 KiB left, and counts
    failed, text = await run(ada, "write_file", path="user-memory/b.md", content="n" * 250_000)
    assert failed, text
    assert text.startswith("Quota exceeded: ") and "user-memory/b.md was not written" in text
    with pytest.raises(Exception, match="no note"):
        await ada.handle.store.note_get("b.md")

    # The sandbox deletes a file behind Skald's back: a refusal first walks the home
    # again, so the room is there without waiting for the guard's next walk.
    (home / "big.txt").unlink()
    failed, text = await run(ada, "write_file", path="~/more.txt", content="b" * (300 * 1024))
    assert not failed, text  # the stale figure had 200 KB left

    # A role without a quota of its own takes the instance default; 0 means no limit.
    await set_quota(runtime, "member", 0)
    failed, text = await run(ada, "write_file", path="~/more.txt", content="b" * (128 * 1024))
    assert not failed, text


async def test_a_member_over_quota_gets_no_command_and_no_new_turn(
    runtime: Runtime, household: dict[str, str]
) -> None:
    user_id = household["ada"]
    ada = await member(runtime, "ada")
    home = runtime.core.layout.home(user_id)
    (home / "from-the-sandbox.bin").write_bytes(b"z" * (2 * MIB))  # not seen by Skald...
    await set_quota(runtime, "member", 1)
    runtime.storage.scan(user_id)  # ...until the guard's walk
    manager = SandboxManager(
        runtime.config.sandbox,
        instance_id="quota-test",
        homes_dir=runtime.core.layout.homes_dir,
        docs_dir=runtime.core.layout.root,
        members=runtime._sandbox_members,
    )
    try:
        tool = ExecuteCmdTool(
            manager, lambda: runtime.member(user_id), lambda: runtime.budget(user_id)
        )
        result = await tool.run({"command": "echo hi"}, CTX)
    finally:
        await manager.close()
    assert result.is_error and result.content.startswith("The command did not run: quota exceeded")
    conversation = await ada.hub.store.create("c1", "assistant")
    with pytest.raises(QuotaExceededError, match=r"quota exceeded: .* of 1\.0 MiB used"):
        await ada.turn_setup(conversation, needs=())


async def test_uploads_and_file_writes_past_the_quota_are_413_and_leave_nothing_behind(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    admin = await signed_in(make_client, "mum")
    roles = (await admin.call("GET", "/api/roles")).json()
    attrs = next(r for r in roles if r["name"] == "member")["attributes"]
    assert attrs["storage_quota_mb"] is None  # the instance default until set
    bad = await admin.call(
        "PATCH", "/api/roles/member", json={"attributes": {**attrs, "storage_quota_mb": -1}}
    )
    assert bad.status_code == 400, bad.text
    r = await admin.call(
        "PATCH", "/api/roles/member", json={"attributes": {**attrs, "storage_quota_mb": 4}}
    )
    assert r.status_code == 200, r.text
    ada = await signed_in(make_client, "ada")
    home = runtime.core.layout.home(household["ada"])
    r = await ada.http.post(
        "/api/file/upload",
        params={"path": "~/in"},
        files={"file": ("big.bin", os.urandom(5 * MIB))},
        headers={"X-CSRF-Token": ada.csrf},
    )
    assert r.status_code == 413, r.text
    error = r.json()["error"]
    assert error["code"] == "quota_exceeded" and " of 4.0 MiB used" in error["message"]
    assert [p.name for p in (home / "in").iterdir()] == []  # no partial or hidden file
    ok = await ada.http.post(
        "/api/file/upload",
        params={"path": "~/in"},
        files={"file": ("fits.bin", os.urandom(MIB))},
        headers={"X-CSRF-Token": ada.csrf},
    )
    assert ok.status_code == 201, ok.text
    r = await ada.call("POST", "/api/file", json={"path": "~/t.txt", "content": "t" * (4 * MIB)})
    assert r.status_code == 413 and r.json()["error"]["code"] == "quota_exceeded"
    assert not (home / "t.txt").exists()

    mine = (await ada.call("GET", "/api/storage")).json()
    assert mine["quota"] == 4 * MIB and MIB <= mine["used"] < 4 * MIB
    assert mine["disk_low"] is False
    r = await ada.call("DELETE", "/api/file", params={"path": "~/in/fits.bin"})
    assert r.status_code == 204, r.text
    freed = (await ada.call("GET", "/api/storage")).json()
    assert freed["used"] <= mine["used"] - MIB  # counted at once, not at the next walk
    mine = freed
    rows = (await admin.call("GET", "/api/storage/members")).json()
    by_name = {row["username"]: row for row in rows}
    assert by_name["ada"]["used"] == mine["used"] and by_name["ada"]["quota"] == 4 * MIB
    assert set(by_name["ada"]) == {"user_id", "username", "used", "quota"}  # counts only


# -- a nearly full disk -----------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs: a disk a test can really fill."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        unavailable(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
async def small_runtime(small_disk: Path) -> AsyncIterator[Runtime]:
    layout = DataLayout(small_disk / "data")
    env = {**TEST_ENV, "SKALD_STORAGE_DISK_RESERVE_MB": "4", "SKALD_STORAGE_MEMBER_QUOTA_MB": "0"}
    rt = await Runtime.boot(layout, load_config(layout.root, env), announce=io.StringIO())
    try:
        yield rt
    finally:
        with contextlib.suppress(Exception):
            await rt.shutdown()


def fill(path: Path, leave: int) -> None:
    """Write `path` until only `leave` bytes are free on its disk (what a sandbox can do)."""
    st = os.statvfs(path.parent)
    size = st.f_bavail * st.f_frsize - leave
    with path.open("wb") as f, contextlib.suppress(OSError):  # ENOSPC when asked to fill it all
        while size > 0:
            chunk = min(size, MIB)
            f.write(b"\xff" * chunk)
            f.flush()
            size -= chunk


async def test_a_nearly_full_disk_refuses_writes_and_a_full_one_corrupts_no_database(
    small_runtime: Runtime,
) -> None:
    rt = small_runtime
    created = await rt.core.users.create("ada", PASSWORD, "member")
    user_id = created.user.id
    ada = await member(rt, "ada")
    home = rt.core.layout.home(user_id)
    failed, text = await run(ada, "write_file", path="user-memory/kept.md", content="before")
    assert not failed, text
    failed, text = await run(ada, "write_file", path="~/kept.txt", content="before")
    assert not failed, text

    # A sandbox fills the disk to under the reserve: the guard sees it, writes stop.
    fill(home / "filler.bin", leave=2 * MIB)
    await rt.storage_guard.tick()
    assert rt.storage.disk_low and rt.storage_guard.paused
    assert any("disk is nearly full" in reason for reason in rt.health()[1])
    failed, text = await run(ada, "write_file", path="~/new.txt", content="x")
    assert failed and text.startswith("The disk is nearly full (")
    failed, text = await run(ada, "write_file", path="user-memory/new.md", content="x")
    assert failed and "disk is nearly full" in text
    with pytest.raises(DiskFullError):
        await ada.turn_setup(await ada.hub.store.create("c1", "assistant"), needs=())
    transport = httpx.ASGITransport(app=create_app(rt), client=("127.0.0.1", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        client = Client(http)
        await client.login("ada")
        r = await http.post(
            "/api/file/upload",
            files={"file": ("a.bin", b"a" * 1000)},
            headers={"X-CSRF-Token": client.csrf},
        )
        assert r.status_code == 507 and r.json()["error"]["code"] == "disk_full", r.text

    # Then the disk fills up completely: every write fails cleanly, nothing is corrupt.
    fill(home / "filler2.bin", leave=0)
    raw_tools = {t.name: t for t in file_tools(PathRouter(home, rt.core.layout.root))}
    result = await raw_tools["write_file"].run({"path": "~/x.bin", "content": "x" * MIB}, CTX)
    assert result.is_error and "disk is full" in result.content, result.content
    assert not [p for p in home.iterdir() if p.name.startswith(".skald-")]
    for attempt in range(3):  # SQLITE_FULL each time, the transaction rolled back
        with pytest.raises(apsw.FullError):
            await ada.handle.store.note_put(f"full-{attempt}.md", "n" * 200_000)
        with pytest.raises(apsw.FullError):
            await rt.core.registry.db.transaction(
                lambda c, a=attempt: c.execute(
                    "INSERT INTO config(key, value) VALUES (?, ?)",
                    (f"k{a}", json.dumps("v" * 200_000)),
                )
            )
    assert await ada.handle.store.note_get("kept.md") == "before"  # reads still work

    # Space comes back: the guard resumes, and both databases check out whole.
    (home / "filler.bin").unlink()
    (home / "filler2.bin").unlink()
    await rt.storage_guard.tick()
    assert not rt.storage.disk_low and not rt.storage_guard.paused
    layout = rt.core.layout
    await rt.shutdown()
    registry = await Registry.open(layout.system_db)
    try:
        check = await registry.db.call(lambda c: fetch_one(c, "PRAGMA integrity_check"))
        assert check == ("ok",)
        manager = UserManager(registry, layout, TEST_KDF)
        handle = await manager.unlock("ada", PASSWORD)
        check = await handle.db.call(lambda c: fetch_one(c, "PRAGMA integrity_check"))
        assert check == ("ok",)
        assert await handle.store.note_get("kept.md") == "before"
        await manager.lock_all()
    finally:
        await registry.close()
    assert (home / "kept.txt").read_text() == "before"


@pytest.mark.docker
async def test_the_guard_pauses_sandboxes_under_the_reserve_and_resumes_them_above(
    sandbox_runtime: Runtime, docker: Any
) -> None:
    rt = sandbox_runtime
    assert rt.sandbox is not None
    user, role, container_id = await new_member_container(rt, "ada")
    ada = await member(rt, "ada")
    failed, text = await run(ada, "execute_cmd", command="echo before")
    assert not failed and "before" in text, text

    # The disk drops under the reserve (a reserve above what is free stands for it).
    rt.storage.reserve = await asyncio.to_thread(rt.storage.refresh_disk) + 1024 * MIB
    await rt.storage_guard.tick()
    assert docker.containers.get(container_id).status == "paused"
    failed, text = await run(ada, "execute_cmd", command="echo during")
    assert failed and text.startswith("The command did not run: the disk is nearly full")
    # Nothing unpauses it behind the guard's back (an ensure keeps the same container).
    assert await rt.sandbox.ensure(user, role) == container_id
    assert docker.containers.get(container_id).status == "paused"
    # A sandbox made while the disk is low (a login) is paused at the next look.
    _, _, tim_container = await new_member_container(rt, "tim", "children")
    assert docker.containers.get(tim_container).status == "running"
    await rt.storage_guard.tick()
    assert docker.containers.get(tim_container).status == "paused"

    rt.storage.reserve = MIB
    await rt.storage_guard.tick()
    assert docker.containers.get(container_id).status == "running"
    assert docker.containers.get(tim_container).status == "running"
    failed, text = await run(ada, "execute_cmd", command="echo after")
    assert not failed and "after" in text, text


# -- long tool arguments ----------------------------------------------------------------


def test_the_projection_cuts_long_argument_and_result_texts_the_same_way_every_time() -> None:
    big = "é" * 2_000_000  # 2 000 000 characters, 4 000 000 bytes
    messages = [
        Message(role="user", content=[TextPart("write it")]),
        Message(
            role="assistant",
            tool_calls=[
                ToolCall(id="c1", name="write_file", arguments={"path": "a", "content": big})
            ],
        ),
        Message(role="tool", tool_call_id="c1", content=[TextPart("r" * 100)]),
    ]
    first = project(messages, max_argument_chars=1000, max_result_chars=50)
    again = project(messages, max_argument_chars=1000, max_result_chars=50)
    assert first == again  # byte-stable: prompt caches keep working
    content = first[1].tool_calls[0].arguments["content"]
    assert content == "é" * 1000 + "\n[truncated: 3.8 MiB; full text stored]"
    assert first[1].tool_calls[0].arguments["path"] == "a"
    assert first[2].text == "r" * 50 + "\n[truncated: 100 bytes; full text stored]"
    assert project(messages) == messages  # without limits nothing changes
    assert messages[1].tool_calls[0].arguments["content"] is big  # the input is untouched


async def test_a_huge_tool_argument_is_stored_once_and_cut_in_what_the_model_gets_back(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    big = "x" * (3 * MIB)
    fake_llm.script(
        "model-a",
        [[Call("write_file", {"path": "~/big.txt", "content": big})], "Written."],
    )
    ada = await signed_in(make_client, "ada")
    out = await post_chat(ada, "Write a big file")
    assert out["status"] == "done", out
    home = runtime.core.layout.home(household["ada"])
    assert (home / "big.txt").stat().st_size == 3 * MIB

    posted = [r for r in fake_llm.requests if r.method == "POST"]
    second = posted[-1].body
    call = next(m for m in second["messages"] if m["role"] == "assistant" and m.get("tool_calls"))
    sent = json.loads(call["tool_calls"][0]["function"]["arguments"])
    assert sent["path"] == "~/big.txt"
    assert sent["content"] == "x" * 16_384 + "\n[truncated: 3.0 MiB; full text stored]"
    assert len(json.dumps(second)) < 100_000

    db = runtime.user_runtimes[household["ada"]].handle.db
    stored = await db.call(lambda c: fetch_all(c, "SELECT arguments FROM chat_calls"))
    assert stored == [("{}",)]  # the arguments live once, in the message body
    total = await db.call(lambda c: fetch_one(c, "SELECT sum(length(body)) FROM chat_messages"))
    assert total is not None and 3 * MIB < total[0] < 3 * MIB + 64 * 1024

    # Now past a 1 MiB quota: the next message gets the reason, and no model is asked.
    await set_quota(runtime, "member", 1)
    asked = len(posted)
    refused = await post_chat(ada, "And another one", out["conversation_id"])
    assert refused["status"] == "failed" and refused["error_code"] == "quota_exceeded"
    assert refused["error"] == "Your storage is full. Delete some files to continue."
    assert len([r for r in fake_llm.requests if r.method == "POST"]) == asked
