"""Voice through Skald against real engines (tests/voice_engines.py): espeak-ng speaks,
pocketsphinx listens, both behind the OpenAI wire formats on 127.0.0.1; the models
are transcription and speech kinds in the catalogue, chosen by AUTO per kind."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import Client, MakeClient, signed_in
from voice_engines import Engines, loudness, synthesise

from skald.core.runtime import Runtime

# Digits decode reliably: espeak-ng's "one two three four five" comes back from
# pocketsphinx as at least "two three four five" (its first word is often "well").
PHRASE = "one two three four five"
DIGITS = {"one", "two", "three", "four", "five"}


@pytest.fixture
async def engines() -> AsyncIterator[Engines]:
    running = Engines().start()
    yield running
    running.stop()


async def _catalogue(
    make_client: MakeClient, models: list[tuple[str, str, str]]
) -> tuple[Client, list[dict[str, Any]]]:
    """An admin adds one provider per base URL and these (base URL, wire id, kind)."""
    admin = await signed_in(make_client, "mum")
    providers: dict[str, str] = {}
    rows = []
    for priority, (base, wire, kind) in enumerate(models, start=1):
        if base not in providers:
            r = await admin.call(
                "POST",
                "/api/llm/providers",
                json={
                    "name": f"engines {len(providers)}",
                    "kind": "openai_compatible",
                    "base_url": base,
                },
            )
            assert r.status_code == 201, r.text
            providers[base] = r.json()["id"]
        r = await admin.call(
            "POST",
            "/api/llm/models",
            json={
                "provider_id": providers[base],
                "model": wire,
                "name": f"{wire} {priority}",
                "priority": priority,
                "capabilities": [],
                "kind": kind,
            },
        )
        assert r.status_code == 201, r.text
        rows.append(r.json())
    return admin, rows


async def test_a_phrase_spoken_by_espeak_comes_back_as_text_through_skald(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, engines: Engines
) -> None:
    _, (stt,) = await _catalogue(make_client, [(engines.base_url, "sphinx-en", "transcription")])
    ada = await signed_in(make_client, "ada")
    clip = synthesise(PHRASE)
    r = await ada.call(
        "POST", "/api/voice/transcribe", content=clip, headers={"content-type": "audio/wav"}
    )
    assert r.status_code == 200, r.text
    heard = set(r.json()["text"].split())
    assert len(heard & DIGITS) >= 3, r.json()
    assert r.json()["model"] == stt["name"]
    (sent,) = engines.requests
    assert sent["path"] == "/v1/audio/transcriptions"
    assert (sent["model"], sent["content_type"], sent["size"]) == (
        "sphinx-en",
        "audio/wav",
        len(clip),
    )
    (row,) = await runtime.llm.store.requests()
    assert (row.user_id, row.model_id, row.status) == (household["ada"], stt["id"], "finished")


async def test_transcription_falls_back_to_the_next_model_of_its_kind_only(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, engines: Engines
) -> None:
    busy = Engines(fail_with=503).start()
    try:
        _, rows = await _catalogue(
            make_client,
            [
                (engines.base_url, "chat-model", "chat"),
                (busy.base_url, "busy-sphinx", "transcription"),
                (engines.base_url, "sphinx-en", "transcription"),
            ],
        )
        ada = await signed_in(make_client, "ada")
        r = await ada.call(
            "POST",
            "/api/voice/transcribe",
            content=synthesise(PHRASE),
            headers={"content-type": "audio/wav"},
        )
        assert r.status_code == 200, r.text
        assert len(set(r.json()["text"].split()) & DIGITS) >= 3
    finally:
        busy.stop()
    assert [q["path"] for q in busy.requests] == ["/v1/audio/transcriptions"]
    assert [q["model"] for q in engines.requests] == ["sphinx-en"]  # never the chat model
    statuses = [(r.model_id, r.status) for r in reversed(await runtime.llm.store.requests())]
    assert statuses == [(rows[1]["id"], "failed"), (rows[2]["id"], "finished")]
    # The chat picker and AUTO for chat see only the chat model.
    picker = (await ada.call("GET", "/api/models")).json()
    assert [m["name"] for m in picker] == [rows[0]["name"]]


async def test_a_recording_is_refused_when_it_is_not_audio_or_too_long_or_nobody_listens(
    household: dict[str, str], make_client: MakeClient, engines: Engines
) -> None:
    ada = await signed_in(make_client, "ada")
    clip = synthesise("one")
    r = await ada.call(
        "POST", "/api/voice/transcribe", content=clip, headers={"content-type": "audio/wav"}
    )
    assert r.status_code == 409 and "speech-to-text" in r.json()["error"]["message"], r.text
    await _catalogue(make_client, [(engines.base_url, "sphinx-en", "transcription")])
    r = await ada.call(
        "POST", "/api/voice/transcribe", content=clip, headers={"content-type": "text/plain"}
    )
    assert r.status_code == 415, r.text
    r = await ada.call(
        "POST",
        "/api/voice/transcribe",
        content=b"#!/bin/sh\necho not a recording\n",
        headers={"content-type": "audio/wav"},
    )
    assert r.status_code == 415, r.text
    r = await ada.call(
        "POST",
        "/api/voice/transcribe",
        content=clip + b"\0" * (10 * 1024 * 1024),
        headers={"content-type": "audio/wav"},
    )
    assert r.status_code == 413, r.text
    assert engines.requests == []


async def test_read_aloud_answers_real_speech_from_the_speech_model(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, engines: Engines
) -> None:
    _, (tts,) = await _catalogue(make_client, [(engines.base_url, "espeak", "speech")])
    ada = await signed_in(make_client, "ada")
    r = await ada.call("POST", "/api/voice/speech", json={"text": "Dinner is at seven."})
    assert r.status_code == 200, r.text
    audio = r.content
    assert audio[:4] == b"RIFF" and audio[8:12] == b"WAVE"
    assert r.headers["content-type"].startswith("audio/wav")
    assert loudness(audio) > 1000  # not silence
    (sent,) = engines.requests
    assert (sent["path"], sent["model"], sent["input"]) == (
        "/v1/audio/speech",
        "espeak",
        "Dinner is at seven.",
    )
    (row,) = await runtime.llm.store.requests()
    assert (row.user_id, row.model_id, row.status) == (household["ada"], tts["id"], "finished")
    r = await ada.call("POST", "/api/voice/speech", json={"text": ""})
    assert r.status_code == 400


async def test_the_chat_learns_which_voice_models_exist_so_read_aloud_hides_without_one(
    household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    r = await ada.call("GET", "/api/voice")
    assert r.status_code == 200 and r.json() == {"transcription": False, "speech": False}
    admin, rows = await _catalogue(
        make_client,
        [
            ("http://127.0.0.1:9/v1", "chat-model", "chat"),
            ("http://127.0.0.1:9/v1", "tts", "speech"),
        ],
    )
    assert (await ada.call("GET", "/api/voice")).json() == {"transcription": False, "speech": True}
    speech = next(row for row in rows if row["kind"] == "speech")
    r = await admin.call("PATCH", f"/api/llm/models/{speech['id']}", json={"enabled": False})
    assert r.status_code == 200, r.text
    assert (await ada.call("GET", "/api/voice")).json()["speech"] is False
