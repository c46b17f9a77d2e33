"""The language chain (issue 31): a member without a language of their own follows the
household's language live (never copied at creation), whether the account was made on
the Users page or with `skald user add`; a member's own choice wins until they clear it."""

from __future__ import annotations

import io
from pathlib import Path

from conftest import PASSWORD, TEST_ENV, Cli, MakeClient, signed_in

from skald.config import load_config
from skald.core.runtime import Runtime
from skald.paths import DataLayout

PW = "a long password here"


async def test_a_member_without_a_language_follows_the_households_live(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    admin = await signed_in(make_client, "mum")
    r = await admin.call("PATCH", "/api/instance", json={"language": "it"})
    assert r.status_code == 200, r.text
    r = await admin.call(
        "POST", "/api/users", json={"username": "nonna", "password": PW, "role": "member"}
    )
    assert r.status_code == 201 and r.json()["user"]["locale"] == "", r.text  # not copied
    nonna = await signed_in(make_client, "nonna", PW)
    me = (await nonna.call("GET", "/api/auth/me")).json()
    assert (me["locale"], me["locale_own"]) == ("it", False)
    # The household changes its language: she follows at once, nothing stored changes.
    assert (await admin.call("PATCH", "/api/instance", json={"language": "fr"})).status_code == 200
    assert (await nonna.call("GET", "/api/auth/me")).json()["locale"] == "fr"
    # Her own choice wins over the household's, until she clears it.
    me = (await nonna.call("PATCH", "/api/auth/me", json={"locale": "en"})).json()
    assert (me["locale"], me["locale_own"]) == ("en", True)
    assert (await admin.call("PATCH", "/api/instance", json={"language": "it"})).status_code == 200
    assert (await nonna.call("GET", "/api/auth/me")).json()["locale"] == "en"
    me = (await nonna.call("PATCH", "/api/auth/me", json={"locale": ""})).json()
    assert (me["locale"], me["locale_own"]) == ("it", False)
    # What the features see of her (reminders' words, the prompt's profile) is the same.
    user = await runtime.core.users.get("nonna")
    mine = runtime.user_runtimes[user.id]
    assert mine.facade.locale == "it"


def test_skald_user_add_follows_the_households_language(tmp_path: Path, cli: Cli) -> None:
    import asyncio

    data = tmp_path / "data"
    assert cli("setup", "--admin", "mum", "--password-stdin", stdin=PASSWORD + "\n") == 0

    async def with_runtime(language: str | None) -> str:
        rt = await Runtime.boot(
            DataLayout(data), load_config(data, TEST_ENV), announce=io.StringIO()
        )
        try:
            if language is not None:
                await rt.instance.update(language=language)
            handle = await rt.core.users.unlock("nonno", PW) if language is None else None
            if handle is None:
                return ""
            return (await rt.attach(handle)).facade.locale
        finally:
            await rt.shutdown()

    asyncio.run(with_runtime("it"))
    assert cli("user", "add", "nonno", "--role", "member", "--password-stdin", stdin=PW + "\n") == 0
    assert asyncio.run(with_runtime(None)) == "it"
