"""Real local engines behind the OpenAI wire formats, on 127.0.0.1, for the voice and
picture tests.

- `/v1/audio/transcriptions` (multipart `file`, `model`): pocketsphinx, the CMU
  recogniser from PyPI, with the en-us model its wheel carries. It takes 16 kHz mono
  16-bit PCM; a WAV at another rate is resampled (linear: enough for a recogniser).
- `/v1/audio/speech` (JSON `input`): Debian's espeak-ng, a real synthesiser; always
  answers WAV (`response_format` is recorded, not honoured: espeak-ng writes WAV only).
- `/v1/images/generations` (JSON, `response_format=b64_json`): an HTTP double speaking
  the real wire format with a tiny PNG (no image engine with weights in a package fits
  a test run).

Every request is recorded (path, model, form/JSON fields) for the tests to check.
"""

from __future__ import annotations

import base64
import io
import json
import shutil
import struct
import subprocess
import threading
import wave
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from multipart import MultipartParser, parse_options_header
from prerequisites import unavailable

RATE = 16000


def synthesise(text: str) -> bytes:
    """`text` spoken by espeak-ng (US English, 150 words a minute), as a WAV file."""
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        unavailable("espeak-ng (Debian package espeak-ng) synthesises the test speech")
    assert espeak is not None
    done = subprocess.run(
        [espeak, "-v", "en-us", "-s", "150", "--stdout", text],
        capture_output=True,
        check=True,
        timeout=60,
    )
    return done.stdout


def pcm16k(wav_bytes: bytes) -> bytes:
    """Mono 16-bit samples at 16 kHz from a WAV file (first channel, linear resampling)."""
    with wave.open(io.BytesIO(wav_bytes)) as w:
        rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
        frames = w.readframes(w.getnframes())
    if width != 2:
        raise ValueError("only 16-bit WAV")
    samples = struct.unpack(f"<{len(frames) // 2}h", frames)[::channels]
    if rate == RATE:
        return struct.pack(f"<{len(samples)}h", *samples)
    count = int(len(samples) * RATE / rate)
    out = []
    for i in range(count):
        pos = i * rate / RATE
        j = int(pos)
        nxt = samples[min(j + 1, len(samples) - 1)]
        out.append(int(samples[j] + (nxt - samples[j]) * (pos - j)))
    return struct.pack(f"<{len(out)}h", *out)


def recognise(wav_bytes: bytes) -> str:
    try:
        from pocketsphinx import Decoder
    except ImportError:
        unavailable("pocketsphinx (PyPI, a dev dependency) recognises the test speech")
        raise
    decoder = Decoder(samprate=RATE, loglevel="FATAL")
    decoder.start_utt()
    decoder.process_raw(pcm16k(wav_bytes), full_utt=True)
    decoder.end_utt()
    hyp = decoder.hyp()
    return hyp.hypstr if hyp is not None else ""


def loudness(wav_bytes: bytes) -> int:
    """The largest sample's magnitude: 0 is silence."""
    with wave.open(io.BytesIO(wav_bytes)) as w:
        frames = w.readframes(w.getnframes())
    return max((abs(s) for (s,) in struct.iter_unpack("<h", frames)), default=0)


def tiny_png() -> bytes:
    """A real 2x2 PNG (red), built by hand so no imaging library is needed."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


@dataclass
class Engines:
    requests: list[dict[str, Any]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    # Answer this status (with an OpenAI error body) instead, for every request.
    fail_with: int | None = None

    @property
    def base_url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> Engines:
        engines = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _json(self, status: int, obj: Any) -> None:
                self._send(status, json.dumps(obj).encode(), "application/json")

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                record: dict[str, Any] = {"path": self.path}
                engines.requests.append(record)
                if engines.fail_with is not None:
                    self._json(engines.fail_with, {"error": {"message": "engine busy"}})
                    return
                if self.path == "/v1/audio/transcriptions":
                    ctype, opts = parse_options_header(self.headers["content-type"])
                    assert ctype == "multipart/form-data"
                    parts = {p.name: p for p in MultipartParser(io.BytesIO(body), opts["boundary"])}
                    audio = parts["file"].raw
                    record.update(
                        model=parts["model"].value,
                        filename=parts["file"].filename,
                        content_type=parts["file"].content_type,
                        size=len(audio),
                    )
                    self._json(200, {"text": recognise(audio)})
                elif self.path == "/v1/audio/speech":
                    data = json.loads(body)
                    record.update(data)
                    self._send(200, synthesise(data["input"]), "audio/wav")
                elif self.path == "/v1/images/generations":
                    data = json.loads(body)
                    record.update(data)
                    png = base64.b64encode(tiny_png()).decode()
                    self._json(200, {"created": 0, "data": [{"b64_json": png}]})
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}"}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
