"""A Telegram Bot API double: a real HTTP server on 127.0.0.1 speaking the Bot API's
wire format (`POST /bot<token>/<method>`, JSON or multipart, `{"ok": ...}` answers).

It covers what the npm emulator `telegram-test-api` lacks, and the rest the bridge
uses, so a test has one server: `getMe`; `getUpdates` (long polling with `timeout`,
`offset` confirming earlier updates, as Telegram does); `sendMessage` (with
`parse_mode` HTML checked for balanced tags, `reply_markup` inline keyboards, reply
parameters); `editMessageText` ("message is not modified" for the same text);
`answerCallbackQuery`; `getFile` and `GET /file/bot<token>/<path>` downloads;
`sendPhoto` and `sendDocument` (multipart uploads; a photo over 10 MB is refused as
Telegram does). A wrong token answers 401. `flood(method, retry_after)` makes the next
call of a method answer 429 with `parameters.retry_after`.

The "client" side is the test's: `says` (a user writes, in a private chat or a group,
optionally replying), `sends_file` (photo, voice note, document), `press` (a button).
Everything the bot sent is kept in `sent` with its edits applied; `calls` lists every
method called, in order.
"""

from __future__ import annotations

import email.parser
import email.policy
import html.parser
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

from http_double import ServedDouble, send_json

BOT = {"id": 424242, "is_bot": True, "first_name": "Skald", "username": "skald_test_bot"}
PHOTO_MAX = 10 * 1024 * 1024
TOKEN = "123456:test-token-abcdefghijklmnopqrstuv"


@dataclass
class Sent:
    chat_id: int
    message_id: int
    text: str
    parse_mode: str | None = None
    reply_markup: dict[str, Any] | None = None
    edits: int = 0
    kind: str = "text"  # text, photo, document
    file_name: str = ""
    file_size: int = 0
    caption: str = ""
    reply_to: int | None = None  # the message this one answers (reply_parameters)


@dataclass
class _State:
    updates: list[dict[str, Any]] = field(default_factory=list)
    next_update: int = 1000
    next_message: int = 1
    sent: list[Sent] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    floods: dict[str, int] = field(default_factory=dict)
    confirmed: int = 0
    polls: int = 0


class _Balanced(html.parser.HTMLParser):
    ALLOWED: ClassVar[frozenset[str]] = frozenset({"b", "i", "s", "u", "code", "pre", "a"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.ok = True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ok &= tag in self.ALLOWED
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self.ok &= bool(self.stack) and self.stack.pop() == tag


def _html_ok(text: str) -> bool:
    parser = _Balanced()
    parser.feed(text)
    parser.close()
    return parser.ok and not parser.stack


class TelegramDouble(ServedDouble):
    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.state = _State()
        self.cond = threading.Condition()
        self.refuse_html = False
        self._closing = False
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                prefix = f"/file/bot{double.token}/"
                found = (
                    double.state.files.get(self.path[len(prefix) :])
                    if self.path.startswith(prefix)
                    else None
                )
                if found is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(found[1])))
                self.end_headers()
                self.wfile.write(found[1])

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                status, answer = double._handle(
                    self.path, self.headers.get("Content-Type", ""), body
                )
                send_json(self, status, answer)

        server = _Server(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self.serve(server)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        with self.cond:
            self._closing = True
            self.cond.notify_all()
        super().__exit__(*exc)

    # -- the Bot API ------------------------------------------------------------------

    def _handle(self, path: str, ctype: str, body: bytes) -> tuple[int, dict[str, Any]]:
        prefix = f"/bot{self.token}/"
        if not path.startswith(prefix):
            return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        method = path[len(prefix) :]
        params, files = _params(ctype, body)
        with self.cond:
            self.state.calls.append(method)
            wait = self.state.floods.pop(method, None)
        if wait is not None:
            return 429, {
                "ok": False,
                "error_code": 429,
                "description": f"Too Many Requests: retry after {wait}",
                "parameters": {"retry_after": wait},
            }
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return 404, {"ok": False, "error_code": 404, "description": "Not Found"}
        try:
            return 200, {"ok": True, "result": handler(params, files)}
        except _Refused as exc:
            return exc.code, {"ok": False, "error_code": exc.code, "description": exc.text}

    def _m_getMe(self, params: dict[str, Any], files: Any) -> dict[str, Any]:
        return BOT

    def _m_getUpdates(self, params: dict[str, Any], files: Any) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        deadline = time.monotonic() + float(params.get("timeout") or 0)
        with self.cond:
            self.state.polls += 1
            if offset:
                self.state.confirmed = max(self.state.confirmed, offset)
                self.state.updates = [u for u in self.state.updates if u["update_id"] >= offset]
            while not self._closing:
                ready = [u for u in self.state.updates if u["update_id"] >= offset]
                left = deadline - time.monotonic()
                if ready or left <= 0:
                    return ready[:100]
                self.cond.wait(min(left, 0.5))
            return []

    def _message(self, chat_id: int, text: str, **extra: Any) -> Sent:
        with self.cond:
            sent = Sent(chat_id=chat_id, message_id=self.state.next_message, text=text, **extra)
            self.state.next_message += 1
            self.state.sent.append(sent)
            self.cond.notify_all()
            return sent

    def _m_sendMessage(self, params: dict[str, Any], files: Any) -> dict[str, Any]:
        text = str(params.get("text") or "")
        if not text:
            raise _Refused(400, "Bad Request: message text is empty")
        if len(text.encode("utf-16-le")) // 2 > 4096:
            raise _Refused(400, "Bad Request: message is too long")
        mode = params.get("parse_mode")
        if mode == "HTML" and (self.refuse_html or not _html_ok(text)):
            raise _Refused(400, "Bad Request: can't parse entities")
        sent = self._message(
            int(params["chat_id"]),
            text,
            parse_mode=mode,
            reply_markup=params.get("reply_markup"),
            reply_to=(params.get("reply_parameters") or {}).get("message_id"),
        )
        return {"message_id": sent.message_id, "chat": {"id": sent.chat_id}, "text": text}

    def _m_editMessageText(self, params: dict[str, Any], files: Any) -> dict[str, Any]:
        text = str(params.get("text") or "")
        mode = params.get("parse_mode")
        if mode == "HTML" and (self.refuse_html or not _html_ok(text)):
            raise _Refused(400, "Bad Request: can't parse entities")
        with self.cond:
            found = next(
                (
                    s
                    for s in self.state.sent
                    if s.chat_id == int(params["chat_id"])
                    and s.message_id == int(params["message_id"])
                ),
                None,
            )
            if found is None:
                raise _Refused(400, "Bad Request: message to edit not found")
            if found.text == text and found.parse_mode == mode and not params.get("reply_markup"):
                raise _Refused(400, "Bad Request: message is not modified")
            found.text, found.parse_mode, found.reply_markup = (
                text,
                mode,
                params.get("reply_markup"),
            )
            found.edits += 1
            self.cond.notify_all()
        return {"message_id": found.message_id, "chat": {"id": found.chat_id}, "text": text}

    def _m_answerCallbackQuery(self, params: dict[str, Any], files: Any) -> bool:
        with self.cond:
            self.state.answers.append(params)
            self.cond.notify_all()
        return True

    def _m_getFile(self, params: dict[str, Any], files: Any) -> dict[str, Any]:
        file_id = str(params["file_id"])
        found = next(((p, d) for p, (f, d) in self.state.files.items() if f == file_id), None)
        if found is None:
            raise _Refused(400, "Bad Request: invalid file_id")
        return {"file_id": file_id, "file_size": len(found[1]), "file_path": found[0]}

    def _upload(self, kind: str, params: dict[str, Any], files: dict[str, Any]) -> dict[str, Any]:
        name, data = files[kind]
        if kind == "photo" and len(data) > PHOTO_MAX:
            raise _Refused(400, "Bad Request: PHOTO_INVALID_DIMENSIONS")
        sent = self._message(
            int(params["chat_id"]),
            "",
            kind=kind,
            file_name=name,
            file_size=len(data),
            caption=str(params.get("caption") or ""),
        )
        return {"message_id": sent.message_id, "chat": {"id": sent.chat_id}}

    def _m_sendPhoto(self, params: dict[str, Any], files: dict[str, Any]) -> dict[str, Any]:
        return self._upload("photo", params, files)

    def _m_sendDocument(self, params: dict[str, Any], files: dict[str, Any]) -> dict[str, Any]:
        return self._upload("document", params, files)

    # -- the client side ----------------------------------------------------------------

    def _update(self, **content: Any) -> int:
        with self.cond:
            update_id = self.state.next_update
            self.state.next_update += 1
            self.state.updates.append({"update_id": update_id, **content})
            self.cond.notify_all()
            return update_id

    def says(
        self,
        user: int,
        text: str,
        *,
        chat: int | None = None,
        reply_to_bot: bool = False,
        **extra: Any,
    ) -> int:
        """A user writes: in their private chat (chat None) or in the group `chat`; the
        message's id."""
        chat_id = user if chat is None else chat
        with self.cond:
            message_id = self.state.next_message
            self.state.next_message += 1
        message: dict[str, Any] = {
            "message_id": message_id,
            "date": int(time.time()),
            "from": {"id": user, "is_bot": False, "first_name": f"user{user}"},
            "chat": {"id": chat_id, "type": "private"}
            if chat is None
            else {"id": chat_id, "type": "group", "title": f"Family {-chat_id}"},
            **extra,
        }
        if text:
            message["caption" if _has_file(extra) else "text"] = text
        if reply_to_bot:
            message["reply_to_message"] = {"message_id": 1, "from": BOT, "text": "earlier"}
        self._update(message=message)
        return message_id

    def sends_file(
        self,
        user: int,
        kind: str,
        name: str,
        data: bytes,
        mime: str,
        caption: str = "",
        chat: int | None = None,
    ) -> int:
        file_id = f"file-{len(self.state.files) + 1}"
        path = f"{kind}s/{file_id}-{name}"
        self.state.files[path] = (file_id, data)
        item: dict[str, Any] = {
            "file_id": file_id,
            "file_unique_id": file_id,
            "file_size": len(data),
        }
        if kind == "photo":
            attached: Any = [dict(item, width=640, height=480)]
        elif kind == "voice":
            attached = dict(item, duration=2, mime_type=mime)
        else:
            attached = dict(item, file_name=name, mime_type=mime)
        return self.says(user, caption, chat=chat, **{kind: attached})

    def press(self, user: int, sent: Sent, data: str) -> int:
        return self._update(
            callback_query={
                "id": f"cb{self.state.next_update}",
                "from": {"id": user, "is_bot": False, "first_name": f"user{user}"},
                "message": {
                    "message_id": sent.message_id,
                    "chat": {"id": sent.chat_id},
                    "text": sent.text,
                },
                "data": data,
            }
        )

    def flood(self, method: str, retry_after: int) -> None:
        with self.cond:
            self.state.floods[method] = retry_after

    def to(self, chat_id: int) -> list[Sent]:
        with self.cond:
            return [s for s in self.state.sent if s.chat_id == chat_id]

    def wait_for(self, check: Any, timeout: float = 20.0) -> Any:
        """Until `check()` answers something truthy (checked on every change); that answer."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                found = check()
                if found:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"the double never saw it; sent: {self.state.sent}")
                self.cond.wait(min(left, 0.2))


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A long poll whose client went away (a restart, kill -9, shutdown): expected.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Refused(Exception):
    def __init__(self, code: int, text: str) -> None:
        self.code = code
        self.text = text


def _has_file(extra: dict[str, Any]) -> bool:
    return any(k in extra for k in ("photo", "voice", "document", "audio", "video"))


def _params(ctype: str, body: bytes) -> tuple[dict[str, Any], dict[str, tuple[str, bytes]]]:
    if ctype.startswith("multipart/form-data"):
        parsed = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {ctype}\r\n\r\n".encode() + body
        )
        params: dict[str, Any] = {}
        files: dict[str, tuple[str, bytes]] = {}
        for part in parsed.iter_parts():
            name = part.get_param("name", header="content-disposition")
            filename = part.get_filename()
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)
            if filename is not None:
                files[str(name)] = (filename, payload)
            else:
                text = payload.decode()
                try:
                    params[str(name)] = json.loads(text) if text[:1] in "{[" else text
                except ValueError:
                    params[str(name)] = text
        return params, files
    return (json.loads(body) if body else {}), {}
