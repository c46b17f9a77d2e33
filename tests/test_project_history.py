"""A project's git history (#26 item 3): with the owner's switch on, every change the
assistant's file tools or the Files API make inside the project is a commit authored by
the member who made it; members read the log and a commit's diff; writers restore one
file from a revision through their router's write gate."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import Client, MakeClient, admin_adds_models, post_chat, signed_in
from fake_llm import Call, FakeLLM, Text, ToolCalls

from skald.core.runtime import Runtime
from skald.features.projects import history
from skald.features.projects.history import Git
from skald.features.projects.store import Projects

BASE = "/api/projects/ada/notes"


async def _project_with_history(make_client: MakeClient) -> tuple[Client, Client]:
    ada = await signed_in(make_client, "ada")
    mum = await signed_in(make_client, "mum")
    assert (await ada.call("POST", "/api/projects", json={"name": "Notes"})).status_code == 201
    await ada.call("PUT", f"{BASE}/members/mum", json={"access": "read"})
    r = await ada.call("PATCH", BASE, json={"history": True})
    assert r.status_code == 200 and r.json()["history"] is True, r.text
    return ada, mum


async def test_an_assistant_change_is_a_commit_by_the_member_and_restore_brings_back_the_previous_version(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    ada, _ = await _project_with_history(make_client)
    path = "projects/ada/notes/notes.md"
    w = await ada.call("POST", "/api/file", json={"path": path, "content": "first\n"})
    assert w.status_code == 201, w.text
    fake_llm.script(
        "model-a",
        [
            ToolCalls([Call("write_file", {"path": path, "content": "second\n"})]),
            Text("Done."),
        ],
    )
    chat = (await ada.call("POST", f"{BASE}/chat")).json()
    assert (await post_chat(ada, "Rewrite the notes", chat["id"]))["reply"] == "Done."

    log = (await ada.call("GET", f"{BASE}/history")).json()
    assert log["on"] is True
    newest, api_write, first = log["commits"][:3]
    assert newest["message"] == "write_file notes.md"
    assert newest["author"] == "ada" and newest["email"] == "ada@skald.local"
    assert api_write["message"] == "write notes.md"
    assert first["message"] == "history turned on"
    shown = (await ada.call("GET", f"{BASE}/history/{newest['id'][:7]}")).json()
    assert shown["files"] == ["M\tnotes.md"]
    assert "-first" in shown["diff"] and "+second" in shown["diff"]

    r = await ada.call(
        "POST", f"{BASE}/history/{api_write['id']}/restore", json={"path": "notes.md"}
    )
    assert r.status_code == 200, r.text
    assert (await ada.call("GET", f"/api/file?path={path}")).text == "first\n"
    again = (await ada.call("GET", f"{BASE}/history")).json()["commits"][0]
    assert again["message"] == f"restore from {api_write['id'][:12]} notes.md"


async def test_bad_revisions_readers_and_outsiders_are_refused(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    ada, mum = await _project_with_history(make_client)
    await ada.call("POST", "/api/file", json={"path": "projects/ada/notes/a.md", "content": "a"})
    rev = (await ada.call("GET", f"{BASE}/history")).json()["commits"][0]["id"]
    for bad in ("xyz1234", "abc", "a" * 65, "HEAD", "abcdef0~1"):
        r = await ada.call("GET", f"{BASE}/history/{bad}")
        assert r.status_code == 400, bad
        r = await ada.call("POST", f"{BASE}/history/{bad}/restore", json={"path": "a.md"})
        assert r.status_code == 400, bad
    assert (await ada.call("GET", f"{BASE}/history/{'0' * 40}")).status_code == 404
    for bad_path in ("../x", ".git/config", "/"):
        r = await ada.call("POST", f"{BASE}/history/{rev}/restore", json={"path": bad_path})
        assert r.status_code in (400, 403), bad_path
    # Mum reads the history but may not restore (the write gate); only the owner switches.
    assert (await mum.call("GET", f"{BASE}/history")).status_code == 200
    assert (await mum.call("GET", f"{BASE}/history/{rev}")).status_code == 200
    r = await mum.call("POST", f"{BASE}/history/{rev}/restore", json={"path": "a.md"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "read_only"
    await ada.call("PUT", f"{BASE}/members/mum", json={"access": "write"})
    assert (await mum.call("PATCH", BASE, json={"history": False})).status_code == 403
    # Tim's role has no projects.use.
    tim = await signed_in(make_client, "tim")
    assert (await tim.call("GET", f"{BASE}/history")).status_code == 403


async def test_a_member_outside_the_project_gets_404_on_every_history_route(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    mum = await signed_in(make_client, "mum")
    await ada.call("POST", "/api/projects", json={"name": "Notes"})
    await ada.call("PATCH", BASE, json={"history": True})
    rev = (await ada.call("GET", f"{BASE}/history")).json()["commits"][0]["id"]
    assert (await mum.call("GET", f"{BASE}/history")).status_code == 404
    assert (await mum.call("GET", f"{BASE}/history/{rev}")).status_code == 404
    r = await mum.call("POST", f"{BASE}/history/{rev}/restore", json={"path": "a.md"})
    assert r.status_code == 404


async def test_history_off_records_nothing_and_the_repository_is_outside_the_folder(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    await ada.call("POST", "/api/projects", json={"name": "Notes"})
    await ada.call("POST", "/api/file", json={"path": "projects/ada/notes/a.md", "content": "a"})
    assert (await ada.call("GET", f"{BASE}/history")).json() == {"on": False, "commits": []}
    await ada.call("PATCH", BASE, json={"history": True})
    projects = runtime.server.state(Projects)
    project = projects.of_mount("projects/ada/notes")
    assert project is not None
    folder = projects.folder(project)
    assert not (folder / ".git").exists()
    git = projects.history.git(projects, project)
    assert folder not in git.git_dir.parents
    assert git.git_dir in projects.owned(household["ada"])
    # A planted .git/config with a command for git to run is never read.
    (folder / ".git").mkdir()
    marker = folder.parent / "ran"
    (folder / ".git" / "config").write_text(f"[core]\n\tfsmonitor = touch {marker}\n")
    await ada.call("POST", "/api/file", json={"path": "projects/ada/notes/b.md", "content": "b"})
    assert not marker.exists()
    await ada.call("PATCH", BASE, json={"history": False})
    await ada.call("POST", "/api/file", json={"path": "projects/ada/notes/c.md", "content": "c"})
    log = (await ada.call("GET", f"{BASE}/history")).json()
    assert log["on"] is False
    assert [c["message"] for c in log["commits"]] == ["write b.md", "history turned on"]


def test_git_runs_without_user_config_or_hooks(tmp_path: Path) -> None:
    base = tmp_path
    home, work = base / "home", base / "work"
    home.mkdir()
    work.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Somebody Else\n")
    git = Git(base / "repo.git", work, home)
    git.init()
    hook = base / "repo.git" / "hooks" / "post-commit"  # --no-verify skips pre-commit only
    marker = base / "hooked"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    (work / "x.txt").write_text("x")
    assert git.commit("add x", ("Ada", "ada@skald.local"))
    assert not marker.exists()
    env = git._env(None)
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["HOME"] == str(home)
    out = subprocess.run(
        ["git", f"--git-dir={base / 'repo.git'}", "log", "--format=%an|%cn"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert out.strip() == "Ada|Skald"


def test_a_git_that_hangs_is_killed_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path
    fake = base / "bin"
    fake.mkdir()
    (fake / "git").write_text("#!/bin/sh\nexec sleep 60\n")
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    monkeypatch.setattr(history, "TIMEOUT_S", 0.5)
    with pytest.raises(history.GitFailed, match="took longer"):
        Git(base / "repo.git", base, base).run("status")
