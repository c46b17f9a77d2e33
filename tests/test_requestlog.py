"""The request log: each member reads their own model requests (metadata, never text);
another member's request is 404; administrators see counts per provider only."""

from __future__ import annotations

from conftest import PASSWORD, MakeClient, add_models, post_chat, signed_in
from fake_llm import FakeLLM, Text

from skald.core.runtime import Runtime

MARKER = "okapi-marker-5519"


async def test_a_member_lists_and_opens_their_own_requests_and_not_anothers(
    runtime: Runtime,
    ada: str,
    household: dict[str, str],
    fake_llm: FakeLLM,
    make_client: MakeClient,
) -> None:
    await add_models(runtime, fake_llm, "model-a")
    await runtime.attach(await runtime.core.users.unlock("mum", PASSWORD))
    fake_llm.script(
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
    # Administrators: counts per provider, no member's rows, no text.
    r = await mum.call("GET", "/api/admin/requests")
    assert r.json() == [
        {"provider": "Fake model-a", "requests": 2, "failures": 0, "last_failure_at": None}
    ]
    assert (await ada_client.call("GET", "/api/admin/requests")).status_code == 403


async def test_the_list_pages_backwards_by_id(
    runtime: Runtime, ada: str, fake_llm: FakeLLM, make_client: MakeClient
) -> None:
    await add_models(runtime, fake_llm, "model-a")
    fake_llm.script("model-a", ["1", "2", "3"])
    client = await signed_in(make_client, "ada")
    for i in range(3):
        await post_chat(client, f"q{i}")
    first = (await client.call("GET", "/api/requests?limit=2")).json()
    assert len(first) == 2 and first[0]["id"] > first[1]["id"]
    rest = (await client.call("GET", f"/api/requests?limit=2&before={first[1]['id']}")).json()
    assert len(rest) == 1 and rest[0]["id"] < first[1]["id"]
    assert (await client.call("GET", "/api/requests?limit=0")).status_code == 400
