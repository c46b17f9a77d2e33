"""Logging: structlog for our code, the stdlib root logger for everybody else's.

Both paths end in the same handler and the same processor chain, so every line written
(ours or a third-party library's) gets a level, a UTC timestamp and secret redaction, and
is rendered either for a person (console) or for journald (one JSON object per line).

Redaction is a last line of defence, not a licence to log secrets: it matches sensitive
key names at any depth and scrubs secret-looking substrings from every string.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

__all__ = [
    "REDACTED",
    "access_line",
    "configure_logging",
    "get_logger",
    "redact",
    "redact_text",
]

REDACTED = "[REDACTED]"

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

# --------------------------------------------------------------------------- key names

# A key is split into word parts (snake, kebab, camelCase) and is sensitive when one part
# is in this set. Whole parts, so `keyboard`, `monkey`, `username` and `user_id` survive.
# `tokens` is deliberately absent: `prompt_tokens` and friends are LLM usage counts.
_SENSITIVE_PARTS = frozenset(
    {
        "password",
        "passwords",
        "passwd",
        "passphrase",
        "secret",
        "secrets",
        "token",
        "apikey",
        "key",
        "keys",
        "dek",
        "kek",
        "cookie",
        "cookies",
        "authorization",
        "recovery",
        "credential",
        "credentials",
        "session",
        "sessions",
    }
)
# Run-together lower-case names (`accesstoken`, `clientsecret`) end in one of these.
_SENSITIVE_SUFFIXES = ("password", "passwd", "secret", "token", "apikey", "cookie")
_WORD_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _is_sensitive_key(key: object) -> bool:
    parts = [p.lower() for p in _WORD_PARTS.findall(str(key))]
    return any(p in _SENSITIVE_PARTS or p.endswith(_SENSITIVE_SUFFIXES) for p in parts)


# --------------------------------------------------------------------------- string scrubbing

# Names of parameters whose value is secret in `name=value` / `"name": value` text. The
# sensitive word must start the name or follow `_`/`-` (so `monkey=` is left alone).
_PARAM_NAME = (
    r"(?:[A-Za-z0-9]+[_-])*"
    r"(?:passwords?|passwd|passphrase|secrets?|token|api[_-]?key|apikey|keys?|dek|kek"
    r"|cookies?|authorization|recovery(?:[_-]?code)?|credentials?|session(?:[_-]?id)?"
    r"|access[_-]?key|signature)"
)
# Crockford base32 without I, L, O, U; any case, because people retype codes.
_B32 = r"[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]"

# (pattern, replacement) pairs, applied in order: specific shapes first, generic rules
# last. Replacements keep the name of what was hidden so the line still makes sense.
_SCRUBBERS: list[tuple[re.Pattern[str], str]] = [
    # `Bearer <token>` wherever it appears (headers, reprs, error messages).
    (
        re.compile(r"(?i)\b(?P<scheme>bearer)\s+[A-Za-z0-9._~+/=-]{6,}"),
        rf"\g<scheme> {REDACTED}",
    ),
    # Provider API keys: OpenAI/Anthropic/OpenRouter `sk-...`, GitHub, Hugging Face,
    # Slack, AWS access key ids, Google API keys.
    (
        re.compile(
            r"\b(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{30,}|hf_[A-Za-z0-9]{30,}"
            r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35})"
        ),
        REDACTED,
    ),
    # Telegram bot tokens (they sit inside the Bot API URL path: /bot<id>:<secret>/).
    (re.compile(r"(?:(?<=bot)|\b)[0-9]{6,12}:[A-Za-z0-9_-]{30,}"), REDACTED),
    # JSON Web Tokens.
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+"), REDACTED),
    # Password inside a URL: scheme://user:password@host.
    (re.compile(r"(?P<head>://[^/\s:@]+:)[^/\s@]+@"), rf"\g<head>{REDACTED}@"),
    # SQLCipher raw keys: x'<64 hex>' (optionally followed by a 32-hex salt).
    (re.compile(r"(?i)\bx'[0-9a-f]{64}(?:[0-9a-f]{32})?'"), f"x'{REDACTED}'"),
    # Recovery codes: five or more dash-joined groups of 4-5 Crockford base32 characters.
    (
        re.compile(rf"(?<![0-9A-Za-z-]){_B32}{{4,5}}(?:-{_B32}{{4,5}}){{4,}}(?![0-9A-Za-z-])"),
        REDACTED,
    ),
    # Generic rules last, so the specific ones above have already hidden their matches
    # (e.g. `key = x'<hex>'`) and the generic value pattern cannot cut them in half.
    # HTTP headers carrying credentials, as text (`Cookie: a=b; c=d`) or as a dict repr
    # (`'Authorization': 'Bearer x'`): hide the whole value.
    (
        re.compile(
            r"(?i)(?P<name>\b(?:proxy-)?authorization|\bset-cookie|\bcookie|\bx-api-key"
            r"|\bapi-key)(?P<sep>['\"]?\s*:\s*)(?P<val>'[^']*'|\"[^\"]*\"|[^\r\n]+)"
        ),
        rf"\g<name>\g<sep>{REDACTED}",
    ),
    # `password=hunter2`, `?token=abc&x=1`, `"api_key": "abc"`, `secret: abc`.
    (
        re.compile(
            rf"(?i)(?P<name>\b{_PARAM_NAME})(?P<sep>['\"]?\s*[=:]\s*)"
            r"(?P<val>\"(?:[^\"\\]|\\.)*\"|'[^']*'|(?!\[REDACTED\])[^\s&,;'\"}\)\]]+)"
        ),
        rf"\g<name>\g<sep>{REDACTED}",
    ),
]


def redact_text(text: str) -> str:
    """Scrub secret-looking substrings (tokens, headers, keys, recovery codes) from text."""
    for pattern, replacement in _SCRUBBERS:
        text = pattern.sub(replacement, text)
    return text


def _redact_value(value: Any) -> Any:
    # Containers are rebuilt, never modified: they may belong to the caller.
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: REDACTED if _is_sensitive_key(k) else _redact_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_redact_value(v) for v in value)
    if value is None or isinstance(value, bool | int | float):
        return value
    # Anything else would be rendered through repr() anyway; scrub that text.
    return redact_text(repr(value))


# Keys owned by structlog/logging plumbing: exc_info is rendered (then redacted) later by
# format_exc_info, and the formatter's meta keys must reach it untouched.
_PASS_THROUGH = frozenset({"exc_info", "_record", "_from_structlog"})


def redact(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """structlog processor: hide sensitive keys at any depth and scrub every string."""
    for key in list(event_dict):
        if key in _PASS_THROUGH:
            continue
        if _is_sensitive_key(key):
            event_dict[key] = REDACTED
        else:
            event_dict[key] = _redact_value(event_dict[key])
    return event_dict


# --------------------------------------------------------------------------- configuration


class _SkaldHandler(logging.StreamHandler[TextIO]):
    """Marks the root handler we own, so reconfiguring replaces it instead of adding one."""


_NO_LOCK = contextlib.nullcontext()


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def configure_logging(level: str = "info", fmt: str = "auto", stream: TextIO | None = None) -> None:
    """Send structlog and stdlib logging to `stream` (stderr), redacted, at `level`."""
    out = stream if stream is not None else sys.stderr
    try:
        numeric = _LEVELS[level.lower()]
    except KeyError:
        raise ValueError(f"unknown log level: {level!r}") from None
    if fmt not in ("auto", "console", "json"):
        raise ValueError(f"unknown log format: {fmt!r}")
    console = fmt == "console" or (fmt == "auto" and _isatty(out))

    # Runs for structlog events and, as foreign_pre_chain, for stdlib records.
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Processor = (
        structlog.dev.ConsoleRenderer(colors=_isatty(out))
        if console
        else structlog.processors.JSONRenderer()
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            # Tracebacks become text before redaction so exception messages are scrubbed.
            structlog.processors.format_exc_info,
            redact,
            renderer,
        ],
    )

    handler = _SkaldHandler(out)
    handler.setFormatter(formatter)
    global _json_handler
    _json_handler = None if console else handler
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _SkaldHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    # The HTTP client logs every request at INFO (URLs included); our own code logs what
    # matters about LLM and connector calls.
    for chatty in ("httpx", "httpcore"):
        logging.getLogger(chatty).setLevel(max(numeric, logging.WARNING))

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            # Redact before the record leaves structlog too, so any other handler on the
            # root logger (a test's log capture, a library's) never sees the raw values.
            redact,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached: a later configure_logging() call must reach loggers made earlier.
        cache_logger_on_first_use=False,
    )


# --------------------------------------------------------------------------- the access log

# The JSON handler when the log is JSON (journald), for `access_line`'s direct path.
_json_handler: _SkaldHandler | None = None
_http = logging.getLogger("skald.http")


def access_line(
    method: str, path: str, status: int, ms: float, client: str | None, *, aborted: bool = False
) -> None:
    """One access log line (`event: "request"`), the same JSON as the structlog chain
    writes, at a fraction of the cost.

    Every request writes one, so it skips the processor chain (the two redaction passes
    over every key and value were most of a request's CPU): the fields are fixed and
    known, the only free text is the path, which still goes through `redact_text`. With
    the console format (a person at a terminal) it takes the ordinary path."""
    if not _http.isEnabledFor(logging.INFO):
        return
    handler = _json_handler
    # Not ours any more when someone (a test) swapped the root handlers since.
    if handler is None or handler not in logging.root.handlers:
        get_logger("skald.http").info(
            "request",
            method=method,
            path=path,
            status=status,
            ms=ms,
            client=client,
            **({"aborted": True} if aborted else {}),
        )
        return
    line = json.dumps(
        {
            "method": method,
            "path": redact_text(path),
            "status": status,
            "ms": ms,
            "client": client,
            **({"aborted": True} if aborted else {}),
            "event": "request",
            "level": "info",
            "logger": "skald.http",
            "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        }
    )
    with handler.lock or _NO_LOCK:
        handler.stream.write(line + handler.terminator)
        handler.flush()


def get_logger(name: str | None = None) -> structlog.stdlib.BoundLogger:
    """A structlog logger bound to the stdlib logger `name` (the caller's module if None)."""
    # Without a name, let structlog's factory name it after the calling module.
    return structlog.stdlib.get_logger(name) if name else structlog.stdlib.get_logger()
