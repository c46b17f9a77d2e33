"""A local OAuth 2 authorization server (a real HTTP server on 127.0.0.1) for the
connector sign-in tests: authorization code with PKCE S256, refresh tokens. It checks
what a real provider checks (client id, redirect URI, the verifier against the
challenge, one use per code) and records the token requests."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

CLIENT_ID = "skald-test-client"


class OAuthDouble:
    def __init__(self, expires_in: int = 3600) -> None:
        self.expires_in = expires_in
        self.codes: dict[str, dict[str, str]] = {}  # code -> challenge, redirect_uri
        self.refresh_tokens: set[str] = set()
        self.token_requests: list[dict[str, str]] = []
        self.issued = 0
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _json(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                q = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path != "/authorize" or q.get("client_id") != CLIENT_ID:
                    self._json(400, {"error": "invalid_request"})
                    return
                if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256":
                    self._json(400, {"error": "invalid_request"})
                    return
                code = secrets.token_urlsafe(12)
                double.codes[code] = {
                    "challenge": q["code_challenge"],
                    "redirect_uri": q["redirect_uri"],
                }
                target = q["redirect_uri"] + "?" + urlencode({"code": code, "state": q["state"]})
                self.send_response(302)
                self.send_header("Location", target)
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                double.token_requests.append(form)
                if self.path != "/token" or form.get("client_id") != CLIENT_ID:
                    self._json(400, {"error": "invalid_client"})
                    return
                if form.get("grant_type") == "authorization_code":
                    issued = double.codes.pop(form.get("code", ""), None)
                    verifier = form.get("code_verifier", "")
                    digest = hashlib.sha256(verifier.encode()).digest()
                    challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
                    if (
                        issued is None
                        or issued["challenge"] != challenge
                        or issued["redirect_uri"] != form.get("redirect_uri")
                    ):
                        self._json(400, {"error": "invalid_grant"})
                        return
                elif form.get("grant_type") == "refresh_token":
                    if form.get("refresh_token") not in double.refresh_tokens:
                        self._json(400, {"error": "invalid_grant"})
                        return
                    double.refresh_tokens.discard(form["refresh_token"])
                else:
                    self._json(400, {"error": "unsupported_grant_type"})
                    return
                double.issued += 1
                refresh = f"rt-{double.issued}-{secrets.token_hex(4)}"
                double.refresh_tokens.add(refresh)
                self._json(
                    200,
                    {
                        "access_token": f"at-{double.issued}",
                        "token_type": "Bearer",
                        "refresh_token": refresh,
                        "expires_in": double.expires_in,
                    },
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> OAuthDouble:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
