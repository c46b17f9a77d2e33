"""The privacy self-check: every line is read from the real files when asked, so
flipping a fact (the kept key, a backup, a connector, a request to a provider) changes
the page, and a member database replaced by a plain SQLite file reads as not encrypted."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import apsw
from conftest import MakeClient, add_models, post_chat, signed_in
from connector_support import on_host, simple_feed
from fake_llm import FakeLLM

from skald.cli import main
from skald.core.runtime import Runtime


async def _facts(client: Any) -> dict[str, dict[str, str]]:
    r = await client.call("GET", "/api/privacy")
    assert r.status_code == 200, r.text
    return {f["key"]: f for f in r.json()}


async def test_each_fact_changes_the_page_when_it_changes_on_disk(
    runtime: Runtime,
    ada: str,
    household: dict[str, str],
    fake_llm: FakeLLM,
    make_client: MakeClient,
) -> None:
    client = await signed_in(make_client, "ada")
    before = await _facts(client)
    assert before["encryption"]["status"] == "good"
    assert "SQLCipher 4" in before["encryption"]["sentence"]
    assert "Argon2id" in before["encryption"]["sentence"]
    assert "first 16 bytes" in before["encryption"]["how"]
    assert "your password and your recovery code" in before["keys"]["sentence"]
    assert before["kept_key"]["status"] == "good" and "off" in before["kept_key"]["sentence"]
    assert before["backup"]["status"] == "warn", before["backup"]
    assert before["connectors"]["sentence"] == "No connector is granted to you."
    assert "None of your messages" in before["providers"]["sentence"]

    # "Work while I'm signed out" on: the sealed key file exists, the line says so.
    r = await client.call("PUT", "/api/schedule/keep-key", json={"enabled": True})
    assert r.status_code == 200, r.text
    assert "is on" in (await _facts(client))["kept_key"]["sentence"]
    await client.call("PUT", "/api/schedule/keep-key", json={"enabled": False})
    assert "is off" in (await _facts(client))["kept_key"]["sentence"]

    # A message to a model: the provider is named, with its count.
    await add_models(runtime, fake_llm, "model-a")
    fake_llm.script("model-a", ["hi"])
    await post_chat(client, "hello")
    assert "Fake model-a (1 requests)" in (await _facts(client))["providers"]["sentence"]

    # A connector granted to ada.
    c = on_host(runtime, simple_feed(runtime.core.layout.root.parent / "feed", ("clock",)))
    await c.installer.install(c.feed(), "clock")
    await c.store.grant("clock", ada)
    assert "clock" in (await _facts(client))["connectors"]["sentence"]

    # A backup taken by an administrator.
    admin = await signed_in(make_client, "mum")
    r = await admin.call("POST", "/api/backups/run")
    assert r.status_code == 200, r.text
    after = (await _facts(client))["backup"]
    assert after["status"] == "good" and "still encrypted with your key" in after["sentence"]


async def test_a_plain_sqlite_file_in_place_of_the_database_reads_as_not_encrypted(
    runtime: Runtime, ada: str, make_client: MakeClient
) -> None:
    client = await signed_in(make_client, "ada")
    path = runtime.core.layout.user_db(ada)
    plain = path.with_suffix(".plain")
    conn = apsw.Connection(str(plain))
    conn.execute("CREATE TABLE t(x)")
    conn.close()
    plain.replace(path)  # the running server keeps its open copy; the file is new
    fact = (await _facts(client))["encryption"]
    assert fact["status"] == "warn" and "NOT encrypted" in fact["sentence"]
    assert "plain SQLite header" in fact["how"]
    assert (await _facts(client))["admins"]["status"] == "warn"


async def test_skald_privacy_gives_an_administrator_counts_only(
    runtime: Runtime,
    ada: str,
    household: dict[str, str],
    fake_llm: FakeLLM,
    make_client: MakeClient,
) -> None:
    await add_models(runtime, fake_llm, "model-a")
    fake_llm.script("model-a", ["hi"])
    await post_chat(await signed_in(make_client, "ada"), "hello")
    out = io.StringIO()
    environ = {"SKALD_SECURITY_KDF_PROFILE": "test", "HOME": str(runtime.core.layout.root)}
    data = str(runtime.core.layout.root)
    # The command runs its own event loop: off this test's loop, as from a shell.
    code = await asyncio.to_thread(
        main, ["--data", data, "privacy", "ada"], environ=environ, stdout=out
    )
    assert code == 0, out.getvalue()
    text = out.getvalue()
    assert "[good] Your database is encrypted" in text and "how we checked:" in text
    assert "went to 1 provider(s)" in text and "Fake model-a" not in text
    argv = ["--data", data, "privacy", "nobody"]
    assert await asyncio.to_thread(main, argv, environ=environ, stdout=io.StringIO()) != 0
