"""Bad input from a form is answered in words (skald/api/invalid_input.py): a walk over
every documented route that takes a JSON body, as an administrator, with wrong types
and values that break each field's rules, fails on any message that shows a regular
expression or a type name. And a provider address typed without `http://` gets its
scheme instead of an error. Real routes, in process."""

from __future__ import annotations

import re
from typing import Any

import pytest
from conftest import MakeClient, signed_in

from skald.api.app import create_app
from skald.core.runtime import Runtime

# What a sentence for a person never contains: msgspec's backquoted types, its regexes,
# its JSON paths, Python's type names.
LEAKS = re.compile(
    r"`|regex|Expected|\$\.|\^|\\s|\b(?:str|int|float|bool|NoneType|dict|msgspec|Struct)\b"
)
WRITES = ("post", "put", "patch")


def _resolve(schema: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = doc["components"]["schemas"][name]
    return schema


def _plain(schema: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """The non-null branch of `X | None`, resolved."""
    schema = _resolve(schema, doc)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            branches = [_resolve(b, doc) for b in schema[key]]
            real = [b for b in branches if b.get("type") != "null"]
            return real[0] if real else schema
    return schema


def _bad_values(schema: dict[str, Any]) -> list[Any]:
    """Values the field refuses: the wrong kind, and each of its rules broken."""
    kind = schema.get("type")
    out: list[Any] = [12345 if kind != "integer" and kind != "number" else "text"]
    if kind in ("integer", "number", "boolean"):
        out.append({"a": 1})
    if "pattern" in schema:
        out.append("not valid at all ! ftp://x y")
    if "enum" in schema:
        out.append("no-such-choice")
    if "minLength" in schema and schema["minLength"] > 0:
        out.append("")
    if "maxLength" in schema:
        out.append("x" * (schema["maxLength"] + 1))
    if "minimum" in schema:
        out.append(schema["minimum"] - 1)
    if "maximum" in schema:
        out.append(schema["maximum"] + 1)
    if kind == "array" and "maxItems" in schema:
        out.append(["x"] * (schema["maxItems"] + 1))
    return out


def _cases(doc: dict[str, Any]) -> list[tuple[str, str, Any]]:
    cases: list[tuple[str, str, Any]] = []
    for path, item in doc["paths"].items():
        concrete = re.sub(r"\{[^}]+\}", "nothing-here", path)
        for method in WRITES:
            op = item.get(method)
            body = op and op.get("requestBody", {}).get("content", {}).get("application/json")
            if not body:
                continue
            schema = _resolve(body["schema"], doc)
            cases.append((method, concrete, [1]))
            for name, prop in (schema.get("properties") or {}).items():
                for bad in _bad_values(_plain(prop, doc)):
                    cases.append((method, concrete, {name: bad}))
    return cases


async def test_every_form_route_answers_bad_input_with_a_sentence(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    doc = create_app(runtime).openapi_schema.to_schema()
    cases = _cases(doc)
    assert len(cases) > 150, len(cases)  # the walk reaches the forms
    leaks = []
    answered = 0
    for method, path, body in cases:
        r = await mum.call(method.upper(), path, json=body)
        assert r.status_code < 500, (method, path, body, r.text)
        if r.status_code != 400:
            continue
        answered += 1
        message = r.json()["error"]["message"]
        if LEAKS.search(message) or not message.endswith("."):
            leaks.append(f"{method.upper()} {path} {body!r}: {message}")
    assert answered > 100, answered
    assert not leaks, "\n".join(leaks[:40])


async def test_malformed_json_is_said_in_words(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    r = await mum.call(
        "POST", "/api/llm/models", content=b"{nope", headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "The request is not valid JSON."


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("localhost:8080/v1", "http://localhost:8080/v1"),
        ("192.168.1.10:11434", "http://192.168.1.10:11434"),
        ("ollama:11434/v1", "http://ollama:11434/v1"),
        ("nas.local:8000/v1", "http://nas.local:8000/v1"),
        ("api.example.com/v1", "https://api.example.com/v1"),
        ("http://10.0.0.2:8080", "http://10.0.0.2:8080"),
    ],
)
async def test_a_provider_address_without_its_scheme_gets_http_at_home_and_https_elsewhere(
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    typed: str,
    stored: str,
) -> None:
    mum = await signed_in(make_client, "mum")
    r = await mum.call(
        "POST",
        "/api/llm/providers",
        json={"name": "Local", "kind": "openai_compatible", "base_url": typed},
    )
    assert r.status_code == 201, r.text
    assert r.json()["base_url"] == stored
    r = await mum.call("PATCH", f"/api/llm/providers/{r.json()['id']}", json={"base_url": typed})
    assert r.status_code == 200 and r.json()["base_url"] == stored, r.text


async def test_a_provider_address_with_another_scheme_is_refused_in_words(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    r = await mum.call(
        "POST",
        "/api/llm/providers",
        json={"name": "Odd", "kind": "openai_compatible", "base_url": "ftp://192.168.1.10/v1"},
    )
    assert r.status_code == 400
    assert r.json()["error"]["message"] == (
        "Base url must be a web address such as http://192.168.1.10:8080/v1."
    )
