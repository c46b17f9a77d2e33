"""The request log: each member reads their own model requests (metadata, never text);
another member's request is 404; administrators see counts per provider only."""

from __future__ import annotations

import json
import time
from pathlib import Path

import apsw
from conftest import PASSWORD, MakeClient, post_chat, signed_in
from fake_llm import FakeLLM, Text

from skald.core.runtime import Runtime
from skald.features.requestlog.payloads import OWNER_SCHEMA, PayloadSettings, prune
from skald.store.migrations import migrate_features
from skald.store.migrations.owner import OWNER

MARKER = "okapi-marker-5519"


async def test_a_member_lists_and_opens_their_own_requests_and_not_anothers(
    runtime: Runtime, ada: str, llm: FakeLLM, make_client: MakeClient
) -> None:
    await runtime.attach(await runtime.core.users.unlock("mum", PASSWORD))
    llm.script(
        "model-a",
        [
            Text(f"a {MARKER}", input_tokens=11, output_tokens=3),
            Text(f"b {MARKER}", input_tokens=5, output_tokens=2),
        ],
    )
    ada_client = await signed_in(make_client, "ada")
    mum = await signed_in(make_client, "mum")
    sent = await post_chat(ada_client, f"hello {MARKER}")
    await post_chat(mum, f"mine {MARKER}")
    r = await ada_client.call("GET", "/api/requests")
    assert r.status_code == 200, r.text
    (row,) = r.json()
    assert (row["model"], row["provider"], row["input_tokens"], row["output_tokens"]) == (
        "model-a", "Fake model-a", 11, 3
    )  # fmt: skip
    assert row["outcome"] == "finished" and row["origin"] == sent["conversation_id"]
    assert MARKER not in r.text
    detail = await ada_client.call("GET", f"/api/requests/{row['id']}")
    assert detail.status_code == 200 and detail.json() == row
    # mum's request, asked for by ada: not found, like one that does not exist.
    (mums,) = (await mum.call("GET", "/api/requests")).json()
    assert (await ada_client.call("GET", f"/api/requests/{mums['id']}")).status_code == 404
    assert (await ada_client.call("GET", "/api/requests/999999")).status_code == 404
    # Ids no row can have (past SQLite's integers, zero, negative): not found on every
    # route that takes one (the `rid` dependency both share), never a 500.
    for bad in (2**63, 2**64 + 1, 0, -1):
        for tail in ("", "/payload"):
            r = await ada_client.call("GET", f"/api/requests/{bad}{tail}")
            assert r.status_code == 404 and "no request" in r.json()["error"]["message"], r.text
        r = await ada_client.call("GET", "/api/requests", params={"before": str(bad)})
        if bad > 2**62:  # an id past SQLite's integers: said, not a 500
            assert r.status_code == 400 and "before" in r.json()["error"]["message"], r.text
        else:
            assert r.status_code == 200 and r.json() == [], r.text
    # Administrators: counts per provider, no member's rows, no text.
    r = await mum.call("GET", "/api/admin/requests")
    assert r.json() == [
        {"provider": "Fake model-a", "requests": 2, "failures": 0, "last_failure_at": None}
    ]
    assert (await ada_client.call("GET", "/api/admin/requests")).status_code == 403


async def test_the_list_pages_backwards_by_id(
    runtime: Runtime, ada: str, llm: FakeLLM, make_client: MakeClient
) -> None:
    llm.script("model-a", ["1", "2", "3"])
    client = await signed_in(make_client, "ada")
    for i in range(3):
        await post_chat(client, f"q{i}")
    first = (await client.call("GET", "/api/requests?limit=2")).json()
    assert len(first) == 2 and first[0]["id"] > first[1]["id"]
    rest = (await client.call("GET", f"/api/requests?limit=2&before={first[1]['id']}")).json()
    assert len(rest) == 1 and rest[0]["id"] < first[1]["id"]
    assert (await client.call("GET", "/api/requests?limit=0")).status_code == 400


def _files_with(root: Path, needle: bytes, skip: set[Path]) -> list[str]:
    return [
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and p not in skip and needle in p.read_bytes()
    ]


async def test_payloads_are_absent_until_the_member_keeps_them_then_only_in_their_database(
    runtime: Runtime, ada: str, llm: FakeLLM, make_client: MakeClient
) -> None:
    llm.script("model-a", [f"first {MARKER}", f"second {MARKER}"])
    client = await signed_in(make_client, "ada")
    await post_chat(client, f"before {MARKER}")
    (first,) = (await client.call("GET", "/api/requests")).json()
    assert (await client.call("GET", f"/api/requests/{first['id']}/payload")).status_code == 404
    settings = (await client.call("GET", "/api/requests/settings")).json()
    assert settings["keep_payloads"] is False
    r = await client.call("PUT", "/api/requests/settings", json={**settings, "keep_payloads": True})
    assert r.status_code == 200, r.text
    await post_chat(client, f"after {MARKER}")
    second = (await client.call("GET", "/api/requests")).json()[0]
    r = await client.call("GET", f"/api/requests/{second['id']}/payload")
    assert r.status_code == 200, r.text
    payload = r.json()
    assert f"after {MARKER}" in json.dumps(payload["request"])
    assert payload["response"]["text"] == f"second {MARKER}"
    assert "sk-test" not in r.text and "never stored" in payload["headers"]["authorization"]
    # Nowhere but ada's own (encrypted) database: not the registry, not another file.
    root = runtime.core.layout.root
    own = runtime.core.layout.user_db(ada)
    mine = {own, own.with_name(own.name + "-wal"), own.with_name(own.name + "-shm")}
    assert _files_with(root, MARKER.encode(), mine) == []
    # Another member cannot read it (their database holds no such row, and it is not theirs).
    mum = await signed_in(make_client, "mum")
    assert (await mum.call("GET", f"/api/requests/{second['id']}/payload")).status_code == 404
    # Turning it off deletes what was kept.
    await client.call("PUT", "/api/requests/settings", json={**settings, "keep_payloads": False})
    assert (await client.call("GET", f"/api/requests/{second['id']}/payload")).status_code == 404
    r = await client.call("PUT", "/api/requests/settings", json={**settings, "max_days": 0})
    assert r.status_code == 400


def test_payloads_are_pruned_by_age_and_then_by_total_size() -> None:
    conn = apsw.Connection(":memory:")
    migrate_features(conn, OWNER.with_features([OWNER_SCHEMA]))
    now = time.time()
    rows = [(1, now - 40 * 86400, 10), (2, now - 3, 60), (3, now - 2, 50), (4, now - 1, 30)]
    for request_id, at, size in rows:
        conn.execute(
            "INSERT INTO request_payloads VALUES (?, ?, '{}', '{}', '{}', ?)",
            (request_id, at, size),
        )
    prune(conn, PayloadSettings(keep_payloads=True, max_days=30, max_bytes=100), now)
    kept = [r[0] for r in conn.execute("SELECT request_id FROM request_payloads ORDER BY 1")]
    assert kept == [3, 4]  # 1 too old; 2 would take the total past 100
