"""The Files page in a real browser: Debian's Chromium driven by Playwright against a real
`skald serve` (no sandbox containers: the harness turns them off).

A member opens Files from the sidebar, uploads a Markdown file with the file picker and
a Python file by dropping it on the listing, views both (the Markdown rendered, the code
highlighted with line numbers), a PDF (drawn by the vendored pdf.js, whose module and
worker load from the server itself) and an image, creates a folder and uploads into it,
renames a file, downloads a file and the folder as a ZIP (whose content is checked),
deletes a file, and opens the manual, a read-only place: a badge says so, no write action
is offered, and the API refuses a write there with 403. Last, the page on a phone-sized
screen.

Launch flags, the skip rule (and its failure under `SKALD_CI`), the console and CSP
watching and the screenshot folder are those of `test_ui_e2e.py`.
"""

from __future__ import annotations

import io
import json
import re
import struct
import time
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from harness import ServerProcess
from ui_support import (
    PLAYWRIGHT_MISSING,
    Watch,
    clear_failure_shots,
    login,
    server_fixture,
    shot,
    sign_in,
    watched_scenario,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import (
        Browser,
        BrowserContext,
        FilePayload,
        Locator,
        Page,
        expect,
    )

MEMBER, MEMBER_PW = "ada", "ada's long password"

NOTES_MD = (
    "# Shopping plan\n\n"
    "We need **three** things:\n\n"
    "- flour\n- eggs\n- milk\n\n"
    "See [the market](https://example.org/market) on Saturday.\n"
)
HELLO_PY = (
    "# greet the household\n"
    "def greet(name):\n"
    '    return f"Hello, {name}!"\n'
    "\n"
    "print(greet('Ada'))\n"
)
TODO_TXT = "water the plants\ncall grandma\n"
PDF_TEXT = "Skald PDF test"


def _tiny_pdf(text: str) -> bytes:
    """A one-page PDF with one line of text (Helvetica), built by hand with a real xref."""
    stream = f"BT /F1 36 Tf 60 700 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def _tiny_png(width: int, height: int) -> bytes:
    """An opaque red PNG of the given size."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xd0\x20\x20" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


# The failed requests this scenario expects: the boot-time "who am I?" before the login
# (401) and the deliberate write into the read-only manual (403).
EXPECTED_STATUS = re.compile(r"status of (401|403) \(")


class FilesWatch(Watch):
    """`Watch` of the walkthrough, allowing only this scenario's expected statuses."""

    @staticmethod
    def expected(text: str, url: str) -> bool:
        return bool(EXPECTED_STATUS.search(text))


# The sandbox is off: SKALD_SANDBOX_ENABLED=false (harness).
server = server_fixture((MEMBER, MEMBER_PW))


@pytest.mark.timeout(120)
def test_files_page_in_the_browser(server: ServerProcess, browser: Browser) -> None:
    started = time.monotonic()
    clear_failure_shots("files-")
    users = json.loads(server.cli("user", "list", "--json").stdout)
    home = server.data / "homes" / next(u["id"] for u in users if u["username"] == MEMBER)
    with watched_scenario(
        browser, server, FilesWatch(), prefix="files", color_scheme="light", accept_downloads=True
    ) as scenario:
        _scenario(scenario.context, scenario.watch, home)
    elapsed = time.monotonic() - started
    print(f"browser files scenario took {elapsed:.1f} s")
    assert elapsed < 60, f"the files scenario took {elapsed:.1f} s"


# -- helpers ------------------------------------------------------------------------------


def _row(page: Page, name: str) -> Locator:
    return page.locator(f'[data-testid="files-row"][data-name="{name}"]')


def _listing(page: Page, path: str) -> Locator:
    listing = page.locator(f'[data-testid="files-listing"][data-path="{path}"]')
    expect(listing).to_be_visible()
    return listing


def _drop_file(page: Page, target: Locator, name: str, content: str, mime: str) -> None:
    """Drop a file on `target` the way a desktop file manager does (a DataTransfer)."""
    transfer = page.evaluate_handle(
        "([name, content, mime]) => { const dt = new DataTransfer();"
        " dt.items.add(new File([content], name, { type: mime })); return dt; }",
        [name, content, mime],
    )
    target.dispatch_event("dragenter", {"dataTransfer": transfer})
    target.dispatch_event("dragover", {"dataTransfer": transfer})
    expect(target).to_have_class(re.compile(r"\bis-dragging\b"))
    target.dispatch_event("drop", {"dataTransfer": transfer})


def _upload(name: str, mime: str, data: bytes) -> FilePayload:
    return {"name": name, "mimeType": mime, "buffer": data}


def _write_actions(page: Page) -> int:
    ids = ["files-upload", "files-upload-input", "files-new-folder", "files-rename", "files-delete"]
    return sum(page.get_by_test_id(i).count() for i in ids)


def _no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 375, f"the page is {width} px wide on a 375 px screen"


def _scenario(new_context: Callable[..., BrowserContext], watch: FilesWatch, home: Path) -> None:
    page = watch.attach("member", new_context(viewport={"width": 1280, "height": 860}).new_page())
    page.goto("/")
    expect(page.get_by_test_id("login-form")).to_be_visible()
    login(page, MEMBER, MEMBER_PW)
    expect(page.get_by_test_id("chat-page")).to_be_visible()

    # -- Files from the sidebar: the home, writable ------------------------------------
    page.get_by_test_id("nav-files").click()
    expect(page.get_by_test_id("files-page")).to_be_visible()
    listing = _listing(page, "~")
    expect(listing).to_have_attribute("data-writable", "true")
    expect(page.locator('[data-testid="files-place"][data-place="home"]')).to_have_attribute(
        "data-active", "true"
    )
    expect(page.get_by_test_id("files-readonly")).to_have_count(0)

    # -- upload: the picker for the Markdown, a drop for the code ----------------------
    page.get_by_test_id("files-upload-input").set_input_files(
        _upload("notes.md", "text/markdown", NOTES_MD.encode())
    )
    expect(_row(page, "notes.md")).to_be_visible()
    expect(page.get_by_test_id("files-flash")).to_contain_text("notes.md")
    _drop_file(page, listing, "hello.py", HELLO_PY, "text/x-python")
    expect(_row(page, "hello.py")).to_be_visible()
    expect(_row(page, "notes.md").get_by_test_id("files-size")).to_have_text(
        f"{len(NOTES_MD.encode())} B"
    )
    # The member's usage against the default quota (10 GiB), refreshed with the listing.
    expect(page.get_by_test_id("files-usage")).to_contain_text(" of 10 GB used")
    shot(page, "files-home")

    # -- live: a file written behind the page's back (as the assistant would) appears ---
    (home / "from-the-assistant.txt").write_text("made elsewhere\n")
    expect(_row(page, "from-the-assistant.txt")).to_be_visible(timeout=8_000)
    (home / "from-the-assistant.txt").unlink()
    expect(_row(page, "from-the-assistant.txt")).to_have_count(0, timeout=8_000)

    # -- view the Markdown: rendered, not raw -----------------------------------------
    _row(page, "notes.md").get_by_test_id("files-open").click()
    viewer = page.get_by_test_id("files-viewer")
    expect(viewer).to_have_attribute("data-kind", "markdown")
    rendered = page.get_by_test_id("files-viewer-markdown")
    expect(rendered.locator(".md-h1")).to_have_text("Shopping plan")
    expect(rendered.locator("strong")).to_have_text("three")
    expect(rendered.locator("li")).to_have_count(3)
    expect(rendered.locator('a[href="https://example.org/market"]')).to_have_text("the market")
    assert "# Shopping" not in rendered.inner_text()
    assert "file=~%2Fnotes.md" in page.evaluate("() => location.hash")
    shot(page, "files-view-markdown")
    page.get_by_test_id("files-viewer-close").click()

    # -- view the code: highlighted, with line numbers --------------------------------
    _listing(page, "~")
    _row(page, "hello.py").get_by_test_id("files-open").click()
    expect(viewer).to_have_attribute("data-kind", "text")
    code = page.get_by_test_id("files-viewer-code")
    expect(code).to_have_attribute("data-lang", "py")
    expect(code.locator(".code-view__code")).to_have_text(HELLO_PY.rstrip("\n") + "\n")
    expect(code.locator(".tok-kw").first).to_have_text("def")
    expect(code.locator(".tok-com").first).to_have_text("# greet the household")
    expect(code.locator(".code-view__gutter")).to_have_text("1\n2\n3\n4\n5")
    shot(page, "files-view-code")
    page.go_back()  # the viewer is in the address: back closes it
    _listing(page, "~")

    # -- a PDF, drawn by the vendored pdf.js (module and worker from 'self') -----------
    page.get_by_test_id("files-upload-input").set_input_files(
        _upload("letter.pdf", "application/pdf", _tiny_pdf(PDF_TEXT))
    )
    _row(page, "letter.pdf").get_by_test_id("files-open").click()
    expect(viewer).to_have_attribute("data-kind", "pdf")
    pdf = page.get_by_test_id("files-viewer-pdf")
    expect(pdf).to_have_attribute("data-status", "ready")
    expect(pdf).to_have_attribute("data-pages", "1")
    canvas = page.get_by_test_id("files-pdf-page")
    expect(canvas).to_have_count(1)
    ink = canvas.evaluate(
        """(c) => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let dark = 0; for (let i = 0; i < d.length; i += 4) if (d[i] < 128) dark += 1; return dark; }"""
    )
    assert ink > 100, f"the PDF page looks blank ({ink} dark pixels)"
    shot(page, "files-view-pdf")
    page.get_by_test_id("files-viewer-close").click()
    _listing(page, "~")

    # -- an image: straight from the API into an <img> (img-src 'self') --------------
    page.get_by_test_id("files-upload-input").set_input_files(
        _upload("dot.png", "image/png", _tiny_png(48, 32))
    )
    _row(page, "dot.png").get_by_test_id("files-open").click()
    expect(viewer).to_have_attribute("data-kind", "image")
    image = page.get_by_test_id("files-viewer-image")
    expect(image).to_be_visible()
    expect(image).to_have_js_property("naturalWidth", 48)
    page.get_by_test_id("files-viewer-close").click()
    _listing(page, "~")

    # -- a new folder, and a file uploaded into it -------------------------------------
    page.get_by_test_id("files-new-folder").click()
    dialog = page.get_by_test_id("files-folder-dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_test_id("files-folder-input").fill("garden")
    dialog.get_by_test_id("files-folder-save").click()
    expect(dialog).to_have_count(0)
    folder = _row(page, "garden")
    expect(folder).to_have_attribute("data-type", "dir")
    # Folders come first.
    expect(page.get_by_test_id("files-row").first).to_have_attribute("data-name", "garden")
    folder.get_by_test_id("files-open").click()
    _listing(page, "~/garden")
    expect(page.get_by_test_id("files-empty")).to_be_visible()
    page.get_by_test_id("files-upload-input").set_input_files(
        _upload("todo.txt", "text/plain", TODO_TXT.encode())
    )
    expect(_row(page, "todo.txt")).to_be_visible()
    crumbs = page.get_by_test_id("files-crumb")
    expect(crumbs).to_have_count(2)
    crumbs.first.click()
    _listing(page, "~")

    # -- rename --------------------------------------------------------------------------
    _row(page, "hello.py").get_by_test_id("files-rename").click()
    dialog = page.get_by_test_id("files-rename-dialog")
    field = dialog.get_by_test_id("files-rename-input")
    expect(field).to_have_value("hello.py")
    field.fill("greet.py")
    dialog.get_by_test_id("files-rename-save").click()
    expect(dialog).to_have_count(0)
    expect(_row(page, "greet.py")).to_be_visible()
    expect(_row(page, "hello.py")).to_have_count(0)

    # -- downloads: a file, and the folder as a ZIP -------------------------------------
    with page.expect_download() as info:
        _row(page, "greet.py").get_by_test_id("files-download").click()
    download = info.value
    assert download.suggested_filename == "greet.py"
    assert Path(download.path()).read_text() == HELLO_PY

    with page.expect_download() as info:
        _row(page, "garden").get_by_test_id("files-row-zip").click()
    download = info.value
    assert download.suggested_filename == "garden.zip"
    with zipfile.ZipFile(io.BytesIO(Path(download.path()).read_bytes())) as archive:
        names = archive.namelist()
        assert "garden/todo.txt" in names, names
        assert archive.read("garden/todo.txt").decode() == TODO_TXT

    # -- delete (asks first) --------------------------------------------------------------
    _row(page, "notes.md").get_by_test_id("files-delete").click()
    confirm = page.get_by_test_id("confirm-dialog")
    expect(confirm).to_contain_text("notes.md")
    confirm.get_by_test_id("confirm-ok").click()
    expect(confirm).to_have_count(0)
    expect(_row(page, "notes.md")).to_have_count(0)
    expect(page.get_by_test_id("files-row")).to_have_count(
        4
    )  # garden, dot.png, greet.py, letter.pdf

    # -- the manual: read-only, no write actions, and the API agrees -------------------
    page.locator('[data-testid="files-place"][data-place="docs"]').click()
    docs = _listing(page, "docs")
    expect(docs).to_have_attribute("data-writable", "false")
    expect(page.get_by_test_id("files-readonly")).to_be_visible()
    expect(page.get_by_test_id("files-drop")).to_have_count(0)
    expect(_row(page, "README.md")).to_be_visible()
    assert _write_actions(page) == 0
    expect(page.get_by_test_id("files-download").first).to_be_visible()  # reading is fine
    shot(page, "files-docs-readonly")
    _row(page, "README.md").get_by_test_id("files-open").click()
    expect(page.get_by_test_id("files-viewer-markdown")).to_be_visible()
    assert _write_actions(page) == 0
    page.get_by_test_id("files-viewer-close").click()
    _listing(page, "docs")

    status = page.evaluate(
        """async () => {
          const me = await (await fetch('api/auth/me')).json();
          const res = await fetch('api/file', {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': me.csrf_token },
            body: JSON.stringify({ path: 'docs/defaced.md', content: 'x' }),
          });
          return res.status;
        }"""
    )
    assert status == 403
    page.reload()
    _listing(page, "docs")
    expect(_row(page, "defaced.md")).to_have_count(0)

    # -- a phone: the places become a select, no sideways scrolling --------------------
    phone = watch.attach(
        "phone", new_context(viewport={"width": 375, "height": 740}, is_mobile=True).new_page()
    )
    sign_in(phone, MEMBER, MEMBER_PW)
    phone.goto("/#/files")
    _listing(phone, "~")
    expect(phone.get_by_test_id("files-places")).to_be_hidden()
    select = phone.get_by_test_id("files-place-select")
    expect(select).to_be_visible()
    expect(_row(phone, "greet.py").get_by_test_id("files-rename")).to_be_visible()
    _no_sideways_scroll(phone)
    shot(phone, "files-phone-home")
    _row(phone, "greet.py").get_by_test_id("files-open").click()
    expect(phone.get_by_test_id("files-viewer-code")).to_be_visible()
    _no_sideways_scroll(phone)
    shot(phone, "files-phone-code")
    select.select_option("docs")
    _listing(phone, "docs")
    expect(phone.get_by_test_id("files-readonly")).to_be_visible()
    assert _write_actions(phone) == 0
    _no_sideways_scroll(phone)
    shot(phone, "files-phone-docs")
