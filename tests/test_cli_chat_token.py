"""`skald chat` from another machine with an API token: the message from stdin, a file
in (it lands in the member's uploads), the answer streamed, files the assistant wrote
saved with --out, and the documented exit codes (0 done, 3 waiting for an approval,
1 with a message otherwise). `skald token create|list|revoke` on the box."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fake_llm import Call, FakeLLM, Text
from harness import ADMIN, ADMIN_PW, Api, ServerProcess, household, run_cli, skald_env

PW = "ada's long password"


def _elsewhere(
    tmp: Path, srv: ServerProcess, *argv: str, stdin: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    """`skald` run as on another machine: its own home, no Skald data at all."""
    return run_cli(
        tmp / "no-data", skald_env(tmp / "other-home", **env), *argv, "--url", srv.url, stdin=stdin
    )


def test_skald_chat_with_a_token_file_sends_a_file_streams_and_saves_what_was_written(
    tmp_path: Path,
) -> None:
    with FakeLLM() as fake, household(tmp_path / "srv", ("ada", PW)) as srv:
        admin = Api(srv.url)
        admin.login(ADMIN, ADMIN_PW)
        admin.add_model(fake.base_url_openai, "m")
        ada = Api(srv.url)
        ada.login("ada", PW)  # her encrypted data is open while she is signed in
        r = srv.cli("token", "create", "--user", "ada", "--name", "laptop",
                    "--scope", "chat", "--scope", "files:read")  # fmt: skip
        assert r.returncode == 0, r.stderr
        token = next(w for w in r.stdout.split() if w.startswith("skald_"))
        listed = srv.cli("token", "list", "--user", "ada")
        assert "laptop" in listed.stdout and token[len("skald_") + 13 :] not in listed.stdout
        token_file = tmp_path / "token"
        token_file.write_text(token + "\n")
        report = tmp_path / "report.pdf"
        report.write_bytes(b"%PDF-1.4\n% a tiny report\n")
        fake.script(
            "m",
            [
                [Call("write_file", {"path": "summary.md", "content": "# Summary\nAll good."})],
                Text("I read report.pdf and wrote summary.md for you."),
            ],
        )
        out = tmp_path / "out"
        r = _elsewhere(
            tmp_path, srv, "chat", "--token-file", str(token_file), "--file", str(report),
            "--stream", "--out", str(out), "-", stdin="Summarise the attached report\n",
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "I read report.pdf and wrote summary.md for you."
        assert ": done" in r.stderr
        assert (out / "summary.md").read_text() == "# Summary\nAll good."
        [conv] = ada.get("/api/conversations").json()
        items = ada.get(f"/api/conversations/{conv['id']}/messages").json()
        assert items[0]["text"].strip() == "Summarise the attached report"
        assert [a["name"] for a in items[0]["attachments"]] == ["report.pdf"]
        first = fake.bodies("openai")[0]["messages"]
        assert any("report.pdf" in str(m.get("content")) for m in first)

        # 3: waiting for an approval (writing the household's shared notes).
        fake.script("m", [[Call("write_file", {"path": "shared-memory/bins.md", "content": "x"})]])
        r = _elsewhere(tmp_path, srv, "chat", "Note the bins for all", SKALD_TOKEN=token)
        assert r.returncode == 3, r.stderr
        assert ": awaiting_approval" in r.stderr

        # 1, with a message: a revoked token, an unreachable server, no credentials.
        token_id = token[len("skald_") : len("skald_") + 12]
        assert srv.cli("token", "revoke", token_id, "--user", "ada").returncode == 0
        r = _elsewhere(tmp_path, srv, "chat", "Hello?", SKALD_TOKEN=token)
        assert r.returncode == 1
        assert r.stderr.strip() == "skald: this API token is unknown, revoked or expired"
        r = _elsewhere(tmp_path, srv, "chat", "Hello?")
        assert r.returncode == 2 and "--token-file" in r.stderr
