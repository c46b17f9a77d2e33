#!/usr/bin/env python3
"""Screenshots of the web UI for the manual: `docs/images/<page>-<width>-<lang>.png`.

    PYTHONPATH=$PWD .venv/bin/python ci/screenshots.py            # everything, ~2 min
    PYTHONPATH=$PWD .venv/bin/python ci/screenshots.py --pages files --widths 375 \
        --langs en --out /tmp/shots                              # one picture

For each language it starts a real `skald serve` on a scratch data directory on
127.0.0.1 (the test harness, `tests/harness.py`), with the scripted fake provider
(`tests/fake_llm.py`) as the model, seeds a household in that language through the API
(an administrator, a family member, a child, a model, the shipped clock connector, a
conversation with a household note written after an approval, a scheduled job, a
notification and a change waiting for approval, a few files), then photographs each
page of `PAGES` in Debian's Chromium (Playwright, `SKALD_CHROMIUM`, as the browser tests
launch it) at every width.

Rules: the page list is data; a page the server does not offer (`GET /api/pages`, a
feature not merged yet) is skipped with a printed note, never silently. Only the
viewport is photographed (not the full page) and saved in 256 colours (Pillow), which
keeps the files small (the whole set is about 2.8 MB). Names, texts and the seeded data
are fixed; the times on screen are the real ones of the run (the server stamps them).

Trap: the fake model answers from a script, in order. Every turn the seeding sends
consumes its replies; a reply too many or too few shifts everything after it, so each
`_turn` checks that the script was used up.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fake_llm import Call, FakeLLM, Text  # noqa: E402
from harness import Api, ServerProcess  # noqa: E402

MODEL = "household-8b"
WIDTHS = {1280: 800, 375: 812}  # width: height of the viewport
LANGS = ("en", "it")
OUT = ROOT / "docs" / "images"
SCRATCH = Path(tempfile.gettempdir()) / "skald-household"
MARKER = ".made-by-skald-screenshots"


@dataclass(frozen=True)
class Shot:
    """One page to photograph: `route` is the app's hash route (`{c}`: the seeded
    conversation, `{docs}`: the documents folder), `ready` a CSS selector that matches
    once it rendered with its data, `server_path` the path `GET /api/pages` lists when
    the feature exists, `then` an action before the picture (open a panel), `who` the
    account it is seen from."""

    name: str
    route: str
    ready: str
    server_path: str
    then: Callable[[Any], None] | None = None
    who: str = "admin"  # whose account (a key of PEOPLE)


def _open_bell(page: Any) -> None:
    page.get_by_test_id("notif-bell").click()
    page.get_by_test_id("notif-item").first.wait_for()


def _open_restore(page: Any) -> None:
    """The Backups page's Restore dialog, on a backup made through the page."""
    if page.get_by_test_id("backups-archive").count() == 0:
        page.get_by_test_id("backups-run").click()
        page.get_by_test_id("backups-archive").first.wait_for()
    page.get_by_test_id("backups-restore").first.click()
    page.get_by_test_id("restore-contents").wait_for()


def _open_job_form(page: Any) -> None:
    """The Tasks page's form for a reminder, filled in: every weekday at 7:30, with the
    server's preview of the next runs."""
    page.get_by_test_id("tasks-new").click()
    lang = "it" if page.evaluate("document.documentElement.lang").startswith("it") else "en"
    page.get_by_test_id("job-form-text").fill(TEXT[lang]["reminder"])
    page.get_by_test_id("job-form-mode").select_option("weekdays")
    page.get_by_test_id("job-form-hour").select_option("7")
    page.get_by_test_id("job-form-minute").select_option("30")
    page.get_by_test_id("job-form-preview-run").first.wait_for()
    page.evaluate("document.activeElement.blur()")  # no caret or selected hour


def _open_add_server(page: Any) -> None:
    """The "Add a server" dialog of the Marketplace page."""
    page.get_by_test_id("connector-add").click()
    page.get_by_test_id("connector-add-form").wait_for()


def _open_history(page: Any) -> None:
    """The chat's list of conversations (the button at the end of the tabs)."""
    page.get_by_test_id("chat-history-toggle").click()
    page.get_by_test_id("chat-history-item").first.wait_for()


def _open_model(page: Any) -> None:
    """The Models page's dialog of the seeded model, down to "What the model is given"."""
    page.get_by_test_id("model-edit").first.click()
    page.get_by_test_id("model-profile").scroll_into_view_if_needed()


PAGES = [
    Shot("chat", "/?c={c}", '[data-testid="chat-page"]', "/"),
    Shot("notifications", "/?c={c}", '[data-testid="chat-page"]', "/", then=_open_bell),
    Shot("chat-history", "/?c={c}", '[data-testid="chat-page"]', "/", then=_open_history),
    Shot("inbox", "/inbox", '[data-testid="inbox-page"]', "/inbox"),
    Shot(
        "overview", "/overview", '[data-testid="home-page"][data-checklist="loaded"]', "/overview"
    ),
    Shot("tasks", "/tasks", '[data-testid="tasks-page"]', "/tasks"),
    Shot("tasks-new", "/tasks", '[data-testid="tasks-page"]', "/tasks", then=_open_job_form),
    Shot("files", "/files?path=~/{docs}", '[data-testid="files-page"]', "/files"),
    Shot("profile", "/profile", '[data-testid="profile-page"]', "/profile"),
    Shot("people", "/admin/users", '[data-testid="users-page"]', "/admin/users"),
    Shot("roles", "/admin/roles", '[data-testid="roles-page"]', "/admin/roles"),
    Shot(
        "approval-rules", "/admin/approvals", '[data-testid="approvals-page"]', "/admin/approvals"
    ),
    Shot("models", "/admin/models", '[data-testid="models-page"]', "/admin/models"),
    Shot(
        "models-edit",
        "/admin/models",
        '[data-testid="model-edit"]',
        "/admin/models",
        then=_open_model,
    ),
    Shot("connectors", "/connectors", '[data-testid="connectors-page"]', "/connectors"),
    Shot("marketplace", "/admin/marketplace", '[data-testid="market-item"]', "/admin/marketplace"),
    Shot(
        "connector-add",
        "/admin/marketplace",
        '[data-testid="market-item"]',
        "/admin/marketplace",
        then=_open_add_server,
    ),
    Shot("settings", "/admin/settings", '[data-testid="settings-page"]', "/admin/settings"),
    Shot("backups", "/admin/backups", '[data-testid="backups-page"]', "/admin/backups"),
    Shot(
        "backups-restore",
        "/admin/backups",
        '[data-testid="backups-page"]',
        "/admin/backups",
        then=_open_restore,
    ),
    Shot("child-chat", "/", '[data-testid="chat-page"]', "/", who="child"),
]

# The household, per language. Passwords only need to pass the length rule.
PEOPLE = {
    "en": {
        "household": "The Rossi family",
        "admin": ("anna", "Anna"),
        "member": ("luca", "Luca"),
        "child": ("sofia", "Sofia"),
    },
    "it": {
        "household": "Famiglia Rossi",
        "admin": ("anna", "Anna"),
        "member": ("luca", "Luca"),
        "child": ("sofia", "Sofia"),
    },
}
PASSWORD = "a long household password"  # noqa: S105 - a scratch household's

TEXT = {
    "en": {
        "title": "Sunday breakfast",
        "ask_note": "Please keep our pancake recipe in the household notes",
        "note_path": "shared-memory/recipes.md",
        "note": "# Recipes\n\n## Pancakes\n2 eggs, 250 g flour, 500 ml milk, a pinch of salt.\n",
        "note_done": (
            "Saved! The pancake recipe is now in the **household notes**, where everybody "
            "can find it: 2 eggs, 250 g flour and 500 ml milk."
        ),
        "ask_job": "Remind me every Monday at 7 pm to put the bins out",
        "job_title": "Bins out",
        "job_prompt": "Remind the user to put the bins out tonight.",
        "job_done": "Done: every **Monday at 19:00** I will remind you to put the bins out.",
        "ask_notify": "And tell me now that the plumber comes tomorrow at 9",
        "notify_title": "Plumber tomorrow at 9",
        "notify_body": "Someone needs to be at home to let him in.",
        "notify_done": "I have sent you a notification about the plumber.",
        "ask_edit": "Add to the recipe that we serve them with maple syrup",
        "reminder": "Take the vitamins",
        "old": "a pinch of salt.\n",
        "new": "a pinch of salt.\nServe with maple syrup and berries.\n",
        "docs": "Documents",
        "list_path": "Documents/shopping-list.md",
        "list": "# Shopping\n\n- bread\n- milk\n- tomatoes\n- coffee\n",
        "files": {
            "Documents/school-calendar.md": "# School calendar\n\nTerm starts on 8 September.\n",
            "Documents/holiday-ideas.md": "# Holiday ideas\n\n- Lake Garda\n- Dolomites\n",
        },
        "folders": ["Photos", "Recipes"],
    },
    "it": {
        "title": "Colazione della domenica",
        "ask_note": "Per favore, salva la ricetta dei pancake nelle note di famiglia",
        "note_path": "shared-memory/ricette.md",
        "note": "# Ricette\n\n## Pancake\n2 uova, 250 g di farina, 500 ml di latte, un pizzico di sale.\n",
        "note_done": (
            "Fatto! La ricetta dei pancake ora è nelle **note di famiglia**, dove tutti "
            "possono trovarla: 2 uova, 250 g di farina e 500 ml di latte."
        ),
        "ask_job": "Ricordami ogni lunedì alle 19 di portare fuori la spazzatura",
        "job_title": "Spazzatura",
        "job_prompt": "Ricorda all'utente di portare fuori la spazzatura stasera.",
        "job_done": "Fatto: ogni **lunedì alle 19:00** ti ricorderò di portare fuori la spazzatura.",
        "ask_notify": "E avvisami adesso che domani alle 9 viene l'idraulico",
        "notify_title": "Idraulico domani alle 9",
        "notify_body": "Qualcuno deve essere a casa per aprirgli.",
        "notify_done": "Ti ho mandato una notifica per l'idraulico.",
        "ask_edit": "Aggiungi alla ricetta che li serviamo con lo sciroppo d'acero",
        "reminder": "Prendere le vitamine",
        "old": "un pizzico di sale.\n",
        "new": "un pizzico di sale.\nServire con sciroppo d'acero e frutti di bosco.\n",
        "docs": "Documenti",
        "list_path": "Documenti/lista-della-spesa.md",
        "list": "# Spesa\n\n- pane\n- latte\n- pomodori\n- caffè\n",
        "files": {
            "Documenti/calendario-scuola.md": "# Calendario scolastico\n\nLa scuola inizia l'8 settembre.\n",
            "Documenti/idee-vacanze.md": "# Idee per le vacanze\n\n- Lago di Garda\n- Dolomiti\n",
        },
        "folders": ["Foto", "Ricette"],
    },
}


# The pages show "Loading…" (`common.loading`) until their data arrived; a picture waits
# until no element says it any more, and for the fonts.
LOADING = sorted(
    {
        json.loads((ROOT / "web" / "i18n" / f"{lang}.json").read_text())["common.loading"]
        for lang in LANGS
    }
)
SETTLED = """(words) => {
  if (document.fonts.status !== 'loaded') return false;
  const all = document.querySelectorAll('p, span, div');
  return ![...all].some((e) => e.childElementCount === 0 && words.includes(e.textContent.trim()));
}"""


def _ok(r: Any, *codes: int) -> Any:
    if r.status_code not in (codes or (200, 201, 204)):
        raise RuntimeError(f"{r.request.method} {r.request.url.path}: {r.status_code} {r.text}")
    return r.json() if r.content else None


def _turn(api: Api, fake: FakeLLM, conversation: str, text: str) -> dict[str, Any]:
    reply = _ok(api.post("/api/chat", json={"text": text, "conversation_id": conversation}))
    if reply["status"] == "failed":
        raise RuntimeError(f"the turn {text!r} failed: {reply}")
    return dict(reply)


def _wait(what: str, check: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


def seed(server: ServerProcess, fake: FakeLLM, lang: str) -> str:
    """The household of `lang`; returns the conversation to show."""
    people, words = PEOPLE[lang], TEXT[lang]
    admin_name, admin_display = people["admin"]
    r = server.cli("setup", "--admin", admin_name, "--password-stdin", stdin=PASSWORD + "\n")
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    server.start()
    api = Api(server.url)
    api.login(admin_name, PASSWORD)
    _ok(api.patch("/api/auth/me", json={"display_name": admin_display, "locale": lang}))
    _ok(
        api.patch(
            "/api/instance",
            json={
                "household_name": people["household"],
                "timezone": "Europe/Rome",
                "language": lang,
                "setup_step": "done",
            },
        )
    )
    for key, role in (("member", "member"), ("child", "children")):
        username, display = people[key]
        body = {"username": username, "password": PASSWORD, "role": role, "display_name": display}
        _ok(api.post("/api/users", json=body), 201)
    provider = _ok(
        api.post(
            "/api/llm/providers",
            json={
                "name": "Home server",
                "kind": "openai_compatible",
                "base_url": fake.base_url_openai,
            },
        ),
        201,
    )
    _ok(
        api.post(
            "/api/llm/models", json={"provider_id": provider["id"], "model": MODEL, "name": MODEL}
        ),
        201,
    )
    for folder in words["folders"]:
        _ok(api.post("/api/file", json={"path": f"~/{folder}", "mkdir": True}))
    _ok(api.post("/api/marketplace/time/install"))  # a card on the Connectors page
    for path, content in {words["list_path"]: words["list"], **words["files"]}.items():
        _ok(api.post("/api/file", json={"path": f"~/{path}", "content": content}))

    conversation = _ok(api.post("/api/conversations", json={"title": words["title"]}), 201)["id"]
    fake.script(
        MODEL,
        [
            [Call("write_file", {"path": words["note_path"], "content": words["note"]})],
            Text(words["note_done"]),
            [
                Call(
                    "schedule",
                    {
                        "mode": "create",
                        "title": words["job_title"],
                        "prompt": words["job_prompt"],
                        "cron": "0 19 * * 1",
                    },
                )
            ],
            Text(words["job_done"]),
            [
                Call(
                    "notify",
                    {
                        "title": words["notify_title"],
                        "body": words["notify_body"],
                        "link": "/tasks",
                    },
                )
            ],
            Text(words["notify_done"]),
            [
                Call(
                    "edit_file",
                    {
                        "path": words["note_path"],
                        "old_text": words["old"],
                        "new_text": words["new"],
                    },
                )
            ],
        ],
    )
    first = _turn(api, fake, conversation, words["ask_note"])
    if first["status"] == "awaiting_approval":
        # The turn reports the wait before its Inbox item is listed: look until it is.
        _wait("the approval in the Inbox", lambda: bool(_ok(api.get("/api/inbox"))))
        (item,) = _ok(api.get("/api/inbox"))
        _ok(api.post(f"/api/inbox/{item['id']}/approve"))
        _wait("the note to be written", lambda: fake.remaining(MODEL) == 5)
        _wait("the first turn to end", lambda: _idle(api, conversation))
    _turn(api, fake, conversation, words["ask_job"])
    _turn(api, fake, conversation, words["ask_notify"])
    last = _turn(api, fake, conversation, words["ask_edit"])
    if last["status"] != "awaiting_approval":
        raise RuntimeError(f"the shopping-list edit should wait for approval: {last}")
    if fake.remaining(MODEL):
        raise RuntimeError(f"{fake.remaining(MODEL)} scripted replies were not used")
    api.close()
    return str(conversation)


def _idle(api: Api, conversation: str) -> bool:
    found = [c for c in _ok(api.get("/api/conversations")) if c["id"] == conversation]
    return bool(found) and found[0].get("status", "idle") == "idle"


def offered(server: ServerProcess, lang: str) -> set[str]:
    api = Api(server.url)
    api.login(PEOPLE[lang]["admin"][0], PASSWORD)
    paths = {str(p["path"]) for p in _ok(api.get("/api/pages"))}
    api.close()
    return paths


def _save_small(png: bytes, path: Path) -> None:
    """A screenshot in 256 colours without dithering: a UI's flat colours and
    anti-aliased text lose nothing visible, and the file is about a third of Chromium's
    (the whole set stays under 3 MB in the repository)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as picture:
        small = picture.convert("RGB").quantize(
            colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
        )
        small.save(path, "PNG", optimize=True)


def _photograph(page: Any, shot: Shot, route: str, path: Path) -> None:
    from playwright.sync_api import expect

    page.goto(f"/#{route}")
    if "?c=" in route:  # the chat reads the address on arrival only: a hash change is
        page.reload()  # no arrival while the chat is already open (after the sign-in)
    expect(page.locator(shot.ready).first).to_be_visible()
    page.wait_for_load_state("networkidle")
    page.wait_for_function(SETTLED, arg=LOADING)
    if shot.then is not None:
        shot.then(page)
    else:  # no hover left on whatever the last click was over
        size = page.viewport_size
        page.mouse.move(size["width"] - 1, size["height"] - 1)
    _save_small(page.screenshot(animations="disabled", caret="hide"), path)
    if shot.then is not None:
        page.reload()  # close what it opened: the next page starts clean
        expect(page.locator(shot.ready).first).to_be_visible()


def photograph(
    browser: Any,
    server: ServerProcess,
    lang: str,
    conversation: str,
    shots: list[Shot],
    widths: list[int],
    out: Path,
) -> list[Path]:
    from playwright.sync_api import expect

    written = []
    for width in widths:
        for who in dict.fromkeys(shot.who for shot in shots):  # one sign-in per person
            context = browser.new_context(
                locale="en-US" if lang == "en" else "it-IT",
                timezone_id="Europe/Rome",
                color_scheme="light",
                base_url=server.url,
                viewport={"width": width, "height": WIDTHS[width]},
                device_scale_factor=1,
            )
            context.set_default_timeout(15_000)
            page = context.new_page()
            page.goto("/")
            page.get_by_test_id("login-username").fill(PEOPLE[lang][who][0])
            page.get_by_test_id("login-password").fill(PASSWORD)
            page.get_by_test_id("login-submit").click()
            expect(page.get_by_test_id("chat-page")).to_be_visible()
            # The chat then opens a tab and redirects to it; a route changed before that
            # redirect would be undone by it.
            page.wait_for_load_state("networkidle")
            for shot in (s for s in shots if s.who == who):
                path = out / f"{shot.name}-{width}-{lang}.png"
                _photograph(
                    page, shot, shot.route.format(c=conversation, docs=TEXT[lang]["docs"]), path
                )
                written.append(path)
                print(f"  {path.relative_to(out.parent) if out.parent in path.parents else path}")
            context.close()
    return written


def _scratch(root: Path) -> Path:
    """A fresh folder for one household's data. Its path shows on the Backups page, so it
    is fixed rather than random; a folder this script did not make is never deleted."""
    if root.exists():
        if not (root / MARKER).exists():
            raise SystemExit(f"{root} exists and was not made by this script: pick --scratch")
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / MARKER).touch()
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the PNGs")
    parser.add_argument("--pages", help="comma-separated page names (default: all)")
    parser.add_argument(
        "--scratch",
        type=Path,
        default=SCRATCH,
        help="folder for the households' data (made and removed)",
    )
    parser.add_argument("--widths", default="1280,375", help="comma-separated: 1280, 375")
    parser.add_argument("--langs", default=",".join(LANGS), help="comma-separated: en, it")
    args = parser.parse_args(argv)

    names = [s.name for s in PAGES]
    wanted = args.pages.split(",") if args.pages else names
    unknown = [n for n in wanted if n not in names]
    widths = [int(w) for w in args.widths.split(",")]
    langs = args.langs.split(",")
    bad = [str(w) for w in widths if w not in WIDTHS] + [x for x in langs if x not in LANGS]
    if unknown or bad:
        parser.error(f"unknown: {', '.join(unknown + bad)} (pages: {', '.join(names)})")
    shots = [s for s in PAGES if s.name in wanted]
    args.out.mkdir(parents=True, exist_ok=True)

    from ui_support import CHROMIUM, CHROMIUM_ARGS, PLAYWRIGHT_MISSING

    if PLAYWRIGHT_MISSING or not os.access(CHROMIUM, os.X_OK):
        print(
            f"screenshots need Playwright and Chromium at {CHROMIUM} (SKALD_CHROMIUM): "
            f"{PLAYWRIGHT_MISSING or 'no such program'}",
            file=sys.stderr,
        )
        return 1
    from playwright.sync_api import sync_playwright

    started = time.monotonic()
    written: list[Path] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        for lang in langs:
            with FakeLLM() as fake:
                server = ServerProcess(_scratch(args.scratch / lang))
                try:
                    conversation = seed(server, fake, lang)
                    here = offered(server, lang)
                    ready = []
                    for shot in shots:
                        if shot.server_path in here:
                            ready.append(shot)
                        else:
                            print(
                                f"note: skipped {shot.name!r}: this build has no page {shot.server_path}"
                            )
                    print(f"{lang}: seeded in {time.monotonic() - started:.0f} s")
                    written += photograph(
                        browser, server, lang, conversation, ready, widths, args.out
                    )
                except Exception:
                    print(server.log()[-4000:], file=sys.stderr)
                    raise
                finally:
                    server.close()
                    shutil.rmtree(server.root)
        browser.close()
    with contextlib.suppress(OSError):
        args.scratch.rmdir()  # only when empty: it may hold someone else's files
    total = sum(p.stat().st_size for p in written)
    print(
        f"{len(written)} screenshots, {total / 1e6:.2f} MB, in {time.monotonic() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
