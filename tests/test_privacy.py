"""The privacy self-check: every line is read from the real files when asked, so
flipping a fact (the kept key, a backup, a connector, a request to a provider) changes
the page, and a member database replaced by a plain SQLite file reads as not encrypted.
Each line is a translation key of the feature and its values: the page says it in the
reader's language, `skald privacy` in English from the same keys."""

from __future__ import annotations

import ast
import asyncio
import inspect
import io
import re
from typing import Any

import apsw
import msgspec
from conftest import MakeClient, add_models, post_chat, signed_in
from connector_support import on_host, simple_feed
from fake_llm import FakeLLM

from skald.cli import main
from skald.core.runtime import Runtime
from skald.features.privacy import check
from skald.features.privacy.check import Line, render, words

LOCALES = ("en", "it", "fr")


async def _lines(client: Any) -> list[dict[str, Any]]:
    r = await client.call("GET", "/api/privacy")
    assert r.status_code == 200, r.text
    return list(r.json())


def _say(line: dict[str, Any], locale: str = "en") -> str:
    return render(msgspec.convert(line, Line), words(locale))


async def _facts(client: Any) -> dict[str, dict[str, str]]:
    """The page's lines as an English reader sees them."""
    return {
        f["key"]: {**f, "sentence": _say(f["sentence"]), "how": _say(f["how"])}
        for f in await _lines(client)
    }


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
    llm: FakeLLM,
    make_client: MakeClient,
) -> None:
    llm.script("model-a", ["hi"])
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
    assert "Argon2id with" in text and "{" not in text
    assert "went to 1 provider(s)" in text and "Fake model-a" not in text
    argv = ["--data", data, "privacy", "nobody"]
    assert await asyncio.to_thread(main, argv, environ=environ, stdout=io.StringIO()) != 0


async def test_a_supervision_link_shows_on_both_members_pages_and_goes_when_removed(
    runtime: Runtime, ada: str, household: dict[str, str], make_client: MakeClient
) -> None:
    ada_page = await signed_in(make_client, "ada")
    mum = await signed_in(make_client, "mum")
    assert (await _facts(ada_page))["supervisors"]["sentence"].startswith("Nobody looks after you")
    assert "supervising" not in await _facts(mum)
    for parent in ("mum", "tim"):
        r = await mum.call("PUT", f"/api/people/links/{household[parent]}/{ada}")
        assert r.status_code == 200, r.text
    says = (await _facts(ada_page))["supervisors"]["sentence"]
    assert (
        says == "mum and tim look after you: they can get short reports about your conversations."
    )
    assert "registry" in (await _facts(ada_page))["supervisors"]["how"]
    mine = (await _facts(mum))["supervising"]["sentence"]
    assert mine == "You look after ada: you can get short reports about their conversations."
    italian = next(f for f in await _lines(ada_page) if f["key"] == "supervisors")
    assert _say(italian["sentence"], "it").startswith("mum e tim ti seguono")
    r = await mum.call("DELETE", f"/api/people/links/{household['mum']}/{ada}")
    assert r.status_code == 204, r.text
    assert (await _facts(ada_page))["supervisors"]["sentence"].startswith("tim look after you")
    assert "supervising" not in await _facts(mum)


def _emitted() -> dict[str, set[str]]:
    """Every line key check.py can send, with the values it sends along: read from the
    source (each `_fact(key, status, say, how, **values)` and `Line("privacy.…", {…})`)."""
    found: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(inspect.getsource(check))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        consts = [a.value if isinstance(a, ast.Constant) else None for a in node.args]
        if node.func.id == "_fact" and len(consts) == 4:
            # The key's parts stay literal (the status may be computed): checkable here.
            assert None not in (consts[0], consts[2], consts[3]), ast.unparse(node)
            names = {k.arg for k in node.keywords if k.arg}
            for part in (consts[2], consts[3]):
                found[f"privacy.{consts[0]}.{part}"] = names
        elif node.func.id == "Line" and isinstance(consts[0], str):
            values = node.args[1] if len(node.args) > 1 else None
            found[consts[0]] = (
                {str(k.value) for k in values.keys if isinstance(k, ast.Constant)}
                if isinstance(values, ast.Dict)
                else set()
            )
    return found


def test_every_line_key_the_server_can_send_is_translated_in_every_language() -> None:
    emitted = _emitted()
    assert {"privacy.encryption.good", "privacy.supervisors.named", "privacy.list_and"} <= set(
        emitted
    ), sorted(emitted)
    for locale in LOCALES:
        table = words(locale)
        missing = sorted(set(emitted) - set(table))
        assert not missing, (locale, missing)
        for key, values in emitted.items():
            wanted = set(re.findall(r"\{(\w+)\}", table[key]))
            assert wanted <= values, (locale, key, wanted - values)


async def test_every_line_reads_in_italian_and_french_with_every_value_filled(
    runtime: Runtime, ada: str, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    await mum.call("PUT", f"/api/people/links/{household['mum']}/{ada}")
    await mum.call("PUT", f"/api/people/links/{household['tim']}/{ada}")
    lines = await _lines(await signed_in(make_client, "ada"))
    for locale in ("it", "fr"):
        for f in lines:
            for part in ("sentence", "how"):
                text = _say(f[part], locale)
                assert "{" not in text and text != _say(f[part]), (locale, f["key"], text)
