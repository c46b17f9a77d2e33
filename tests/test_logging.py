"""Logging configuration and secret redaction."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from skald.log import (
    REDACTED,
    access_line,
    configure_logging,
    get_logger,
    redact,
    redact_text,
)

RECOVERY_CODE = "7K3MQ-2XR9T-ABCD5-EFGH6-JKMNP-QRST0"
RAW_KEY = "x'" + "0f1e2d3c4b5a6978" * 4 + "'"
SECRETS = [
    "hunter2-pass",
    "sk-live0123456789abcdefXYZ",
    "cookie-value-s3cr3t",
    "tok3n-in-the-message",
    "Zm9vYmFyYmF6",
    "abc123secret",
    RECOVERY_CODE,
    "0f1e2d3c4b5a6978",
]


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """configure_logging changes process-wide state: put it back for other tests."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]


def test_json_output_redacts_secrets_and_keeps_ordinary_fields() -> None:
    buffer = io.StringIO()
    configure_logging("debug", "json", buffer)
    log = get_logger("skald.test")
    log.info(
        "user login",
        username="alice",
        user_id="u1",
        keyboard="qwerty",
        monkey="banana",
        prompt_tokens=12,
        password="hunter2-pass",
        api_key="sk-live0123456789abcdefXYZ",
        headers={"Cookie": "sid=cookie-value-s3cr3t", "Accept": "text/html"},
        nested=[{"kek": "abc", "items": ("fine", {"session_id": "zzz"})}],
    )
    log.warning("calling provider with Bearer tok3n-in-the-message")
    log.warning("Authorization: Basic Zm9vYmFyYmF6")
    log.info(f"recovery code is {RECOVERY_CODE}")
    log.info(f"PRAGMA key = {RAW_KEY}")
    log.info("fetched https://example.org/cb?state=1&token=abc123secret&page=2")

    output = buffer.getvalue()
    for secret in SECRETS:
        assert secret not in output, secret
    records = lines(buffer)
    assert len(records) == 6
    first = records[0]
    assert first["event"] == "user login"
    assert first["username"] == "alice"
    assert first["user_id"] == "u1"
    assert first["keyboard"] == "qwerty"
    assert first["monkey"] == "banana"
    assert first["prompt_tokens"] == 12
    assert first["password"] == REDACTED
    assert first["api_key"] == REDACTED
    assert first["headers"] == {"Cookie": REDACTED, "Accept": "text/html"}
    assert first["nested"] == [{"kek": REDACTED, "items": ["fine", {"session_id": REDACTED}]}]
    assert first["level"] == "info"
    assert first["timestamp"].endswith("Z")
    assert records[1]["level"] == "warning"
    assert "state=1" in records[5]["event"] and "page=2" in records[5]["event"]


def test_redaction_does_not_modify_the_callers_objects() -> None:
    headers = {"Authorization": "Bearer abcdefgh123"}
    event = redact(None, "info", {"event": "x", "request": {"headers": headers}})
    assert event["request"]["headers"]["Authorization"] == REDACTED
    assert headers == {"Authorization": "Bearer abcdefgh123"}


def test_stdlib_records_are_formatted_and_redacted() -> None:
    buffer = io.StringIO()
    configure_logging("info", "json", buffer)
    logging.getLogger("x").warning("token=abc123secret")
    logging.getLogger("httpx").warning("GET %s", "https://h/?password=hunter2-pass")
    logging.getLogger("x").debug("below the level")
    output = buffer.getvalue()
    assert "abc123secret" not in output
    assert "hunter2-pass" not in output
    records = lines(buffer)
    assert [r["logger"] for r in records] == ["x", "httpx"]
    assert records[0]["event"] == f"token={REDACTED}"
    assert records[0]["level"] == "warning"


def test_exception_text_is_redacted() -> None:
    buffer = io.StringIO()
    configure_logging("info", "json", buffer)
    try:
        raise RuntimeError("login failed for password=hunter2-pass")
    except RuntimeError:
        get_logger("t").exception("boom")
    assert "hunter2-pass" not in buffer.getvalue()
    assert "RuntimeError" in lines(buffer)[0]["exception"]


def test_reconfiguring_does_not_duplicate_output() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging("info", "json", first)
    configure_logging("info", "json", second)
    get_logger("t").info("once")
    logging.getLogger("y").info("also once")
    assert first.getvalue() == ""
    assert [r["event"] for r in lines(second)] == ["once", "also once"]


def test_level_filters_structlog_events() -> None:
    buffer = io.StringIO()
    configure_logging("warning", "json", buffer)
    log = get_logger("t")
    log.info("hidden")
    log.error("shown")
    assert [r["event"] for r in lines(buffer)] == ["shown"]


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_console_format_on_a_tty() -> None:
    buffer = FakeTTY()
    configure_logging("info", "auto", buffer)
    get_logger("t").info("hello console", password="hunter2-pass")
    output = buffer.getvalue()
    assert "hello console" in output
    assert "hunter2-pass" not in output
    with pytest.raises(json.JSONDecodeError):
        json.loads(output.splitlines()[0])


def test_auto_format_is_json_off_a_tty() -> None:
    buffer = io.StringIO()
    configure_logging("info", "auto", buffer)
    get_logger("t").info("hello json")
    assert lines(buffer)[0]["event"] == "hello json"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Set-Cookie: sid=abc123; Path=/; HttpOnly", "abc123"),
        ("{'Authorization': 'Bearer abcdefgh123'}", "abcdefgh123"),
        ('{"password": "hunter2", "user": "bob"}', "hunter2"),
        ("connecting to postgres://bob:hunter2@db/x", "hunter2"),
        (
            "GET https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe",
            "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
        ),
        ("anthropic key sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnop"),
        ("code 7k3mq-2xr9t-abcd5-efgh6-jkmnp typed in lower case", "7k3mq"),
        ("five groups of four ABCD-EFGH-JKMN-PQRS-TVWX", "ABCD-EFGH"),
        ("secret=hunter2", "hunter2"),
        ("client_secret=hunter2&x=1", "hunter2"),
        ("the DEK: 0a1b2c3d", "0a1b2c3d"),
        (RAW_KEY, "0f1e2d3c"),
    ],
)
def test_redact_text_hides_secrets(text: str, secret: str) -> None:
    result = redact_text(text)
    assert REDACTED in result
    assert secret not in result, result


@pytest.mark.parametrize(
    "text",
    [
        "keyboard=1 monkey=2 user_id=3 username=alice max_tokens=5",
        "request 123e4567-e89b-12d3-a456-426614174000 done",
        "updated at 2024-01-01T00:00:00Z",
        "sha256 " + "ab" * 32,
        "ABCD-EFGH-JKMN-PQRS is only four groups",
    ],
)
def test_redact_text_leaves_ordinary_text(text: str) -> None:
    assert redact_text(text) == text


def test_the_access_line_is_the_same_json_as_the_structlog_chain_and_its_path_is_redacted() -> None:
    out = io.StringIO()
    configure_logging("info", "json", out)
    fields = {"method": "GET", "path": "/api/x", "status": 200, "ms": 1.5, "client": "10.0.0.2"}
    get_logger("skald.http").info("request", **fields)
    access_line("GET", "/api/x", 200, 1.5, "10.0.0.2")
    access_line("GET", "/api/files/sk-live0123456789abcdefXYZ", 404, 0.4, None)
    slow, fast, secret = (json.loads(line) for line in out.getvalue().splitlines())
    assert list(fast) == list(slow)  # same keys, same order
    assert {k: v for k, v in fast.items() if k != "timestamp"} == {
        k: v for k, v in slow.items() if k != "timestamp"
    }
    assert fast["timestamp"].endswith("Z") and len(fast["timestamp"]) == len(slow["timestamp"])
    assert "sk-live" not in secret["path"] and REDACTED in secret["path"]


def test_the_access_line_follows_the_level_and_the_console_format() -> None:
    out = io.StringIO()
    configure_logging("warning", "json", out)
    access_line("GET", "/api/x", 200, 1.0, None)
    assert out.getvalue() == ""
    configure_logging("info", "console", out)
    access_line("GET", "/api/console", 200, 1.0, None)
    assert "/api/console" in out.getvalue() and not out.getvalue().startswith("{")


@pytest.mark.parametrize(("setting", "logged"), [("all", [200, 404, 500]), ("errors", [404, 500])])
async def test_access_log_errors_setting_keeps_only_failures(
    setting: str, logged: list[int]
) -> None:
    import httpx

    from skald.api.security import EdgeMiddleware

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        status = int(scope["path"].rsplit("/", 1)[1])
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    out = io.StringIO()
    configure_logging("info", "json", out)
    transport = httpx.ASGITransport(app=EdgeMiddleware(app, setting))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        for status in (200, 404, 500):
            await http.get(f"/s/{status}")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["status"] for line in lines if line["event"] == "request"] == logged
