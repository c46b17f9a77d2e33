"""What every browser test shares: Debian's Chromium through Playwright, a browser
context that records CSP violations, signing in through the login form, watching the
console, and the screenshots a failure leaves behind.

The rule: a change in how the app is launched or signed into is made here, once: a
browser test's server is `server_fixture` (or `harness.household` with the API helpers
here), its pages are `watched_page` or a `watched_scenario`. Only the system Chromium
is used (`SKALD_CHROMIUM`, never a browser downloaded by Playwright); when it or the
`playwright` package is missing a test skips, except under `SKALD_CI`, where it fails
(`prerequisites.unavailable`).

The trap: Playwright is optional, so its names exist only when `PLAYWRIGHT_MISSING` is
empty; modules import them under `if not PLAYWRIGHT_MISSING:` and use them in
annotations only (postponed by `from __future__ import annotations`). The fixtures
(`browser`, `fake`) are imported once, by tests/conftest.py, like `fake_llm_fixture`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM
from harness import ADMIN, ADMIN_PW, Api, ServerProcess, household
from prerequisites import unavailable

try:
    from playwright.sync_api import (
        Browser,
        BrowserContext,
        ConsoleMessage,
        Locator,
        Page,
        Route,
        expect,
        sync_playwright,
    )

    PLAYWRIGHT_MISSING = ""
except ImportError as exc:  # pragma: no cover - depends on the machine
    PLAYWRIGHT_MISSING = f"the Python package 'playwright' is not installed ({exc})"

CHROMIUM = os.environ.get("SKALD_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "screenshots"

# A scenario run twice: on a phone's 375 px in Italian and a desktop's 1280 px in
# English (the test takes `width` and `lang`).
BOTH_WIDTHS = pytest.mark.parametrize(("width", "lang"), [(375, "it"), (1280, "en")])


@functools.cache
def _texts(lang: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in [ROOT / "web" / "i18n", *sorted((ROOT / "skald" / "features").glob("*/i18n"))]:
        if (path / f"{lang}.json").is_file():
            found.update(json.loads((path / f"{lang}.json").read_text(encoding="utf-8")))
    return found


def ui_text(lang: str, key: str) -> str:
    """The UI's text `key` in `lang` (web/i18n and the features' i18n files), so a test
    asserts a page's words from the translations, never from a guess; `{...}`
    placeholders are left as written."""
    return _texts(lang)[key]


def fits(page: Page, width: int) -> None:
    """Nothing widens the page beyond `width` (no horizontal scrolling)."""
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"the page is {scroll} px wide at {width} px"


# Chromium logs every failed fetch as a console error. `Watch` lets through those of the
# household walkthrough (test_ui_e2e.py): 401/403 anywhere (no session yet, wrong
# password, refused admin calls, a paused account) and the 409 of the deliberate attempt
# to unencrypt a used role. `SignedInWatch` lets through only the boot-time 401.
EXPECTED_STATUS = re.compile(r"status of (401|403) \(")
EXPECTED_CONFLICT = re.compile(r"status of 409 \(")
CONFLICT_URL = "/api/roles/member"
BOOT_401 = re.compile(r"status of 401 \(")

# Runs in every document before the app: CSP violations are recorded here as well as
# in the console, so the check does not depend on how Chromium words its messages.
CSP_RECORDER = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__cspViolations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline'));
});
"""


def browser_or_skip() -> str:
    """The Chromium to use; skip (or, under SKALD_CI, fail) when something is missing."""
    missing = PLAYWRIGHT_MISSING
    if not missing and not os.access(CHROMIUM, os.X_OK):
        missing = f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium)"
    if missing:
        unavailable(f"browser tests need: {missing}")
    return CHROMIUM


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's Chromium launched headless with the flags above (skips, or fails under
    SKALD_CI, when it or Playwright is missing)."""
    executable = browser_or_skip()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture(name="browser")
def browser_fixture() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture(name="fake")
def fake_fixture() -> Iterator[FakeLLM]:
    """The fake provider under the name the browser tests use (see `fake_llm_fixture`)."""
    with FakeLLM() as llm:
        yield llm


class Watch:
    """Console errors, page errors and CSP violations of every page in the scenario."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.pages: dict[str, Page] = {}

    def attach(self, name: str, page: Page) -> Page:
        self.pages[name] = page

        def on_console(msg: ConsoleMessage) -> None:
            text = msg.text
            if "Content Security Policy" in text:
                self.problems.append(f"{name}: CSP: {text}")
            elif msg.type == "error" and not self.expected(text, msg.location.get("url", "")):
                self.problems.append(f"{name}: console error: {text} ({msg.location})")

        page.on("console", on_console)
        page.on("pageerror", lambda err: self.problems.append(f"{name}: page error: {err}"))
        return page

    @staticmethod
    def expected(text: str, url: str) -> bool:
        if EXPECTED_STATUS.search(text):
            return True
        return bool(EXPECTED_CONFLICT.search(text)) and url.endswith(CONFLICT_URL)

    def csp_violations(self) -> list[str]:
        found = []
        for name, page in self.pages.items():
            if page.is_closed():
                continue
            for v in page.evaluate("() => window.__cspViolations || []"):
                found.append(f"{name}: {v}")
        return found


class SignedInWatch(Watch):
    """`Watch` allowing only the boot-time "who am I?" (a 401) before a login."""

    @staticmethod
    def expected(text: str, url: str) -> bool:
        return bool(BOOT_401.search(text))


def open_context(
    browser: Browser, server: ServerProcess, *, timeout: float = 10_000, **options: Any
) -> BrowserContext:
    """A context on `server` in English (unless `locale` says otherwise) whose pages
    record CSP violations; `options` go to `Browser.new_context`."""
    options.setdefault("locale", "en-US")
    context = browser.new_context(base_url=server.url, **options)
    context.set_default_timeout(timeout)
    context.add_init_script(CSP_RECORDER)
    return context


def login(page: Page, username: str, password: str) -> None:
    """Fill in and send the login form shown on `page`."""
    page.get_by_test_id("login-username").fill(username)
    page.get_by_test_id("login-password").fill(password)
    page.get_by_test_id("login-submit").click()


def sign_in(page: Page, username: str, password: str) -> Page:
    """Open the app, log in through the form and wait for the chat (the home page)."""
    page.goto("/")
    login(page, username, password)
    expect(page.get_by_test_id("chat-page")).to_be_visible()
    return page


def url_hash(page: Page) -> str:
    # The app routes with location.replace(); Playwright's page.url can lag behind it.
    return str(page.evaluate("() => location.hash"))


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def clear_failure_shots(prefix: str) -> None:
    """Remove the `failure-<prefix>…png` screenshots a previous failed run left, so the
    folder shows only this run's."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for stale in SHOTS.glob(f"failure-{prefix}*.png"):
        stale.unlink()


def report_failure(server: ServerProcess, watch: Watch, prefix: str) -> None:
    """For an `except` block before `raise`: a screenshot of every watched page
    (`failure-<prefix>-<page>.png`), the server's log tail and the console problems (a
    page error often explains a timeout)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for name, page in watch.pages.items():
        with contextlib.suppress(Exception):  # a crashed page must not hide the error
            page.screenshot(path=str(SHOTS / f"failure-{prefix}-{name}.png"), full_page=True)
    print(server.log()[-4000:])
    print("\n".join(watch.problems))


def api_as(server: ServerProcess, username: str = ADMIN, password: str = ADMIN_PW) -> Api:
    """An API client signed in as `username` (the administrator unless named)."""
    api = Api(server.url)
    api.login(username, password)
    return api


def speaking(server: ServerProcess, username: str, password: str, locale: str) -> Api:
    """An API client signed in as `username`, whose language is now `locale`."""
    api = api_as(server, username, password)
    assert api.patch("/api/auth/me", json={"locale": locale}).status_code == 200
    return api


def add_fake_model(server: ServerProcess, fake: FakeLLM, model: str = "fake-main") -> None:
    """The administrator adds the fake provider (its OpenAI-compatible side) and `model`."""
    admin = api_as(server)
    admin.add_model(fake.base_url_openai, model)
    admin.close()


def add_provider_on_page(page: Page, name: str, base_url: str, api_key: str) -> None:
    """An admin adds an OpenAI-compatible provider through the Models page's dialog."""
    page.get_by_test_id("provider-add").click()
    dialog = page.get_by_test_id("provider-dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_test_id("provider-name").fill(name)
    dialog.get_by_test_id("provider-kind").select_option("openai_compatible")
    dialog.get_by_test_id("provider-base-url").fill(base_url)
    dialog.get_by_test_id("provider-api-key").fill(api_key)
    dialog.get_by_test_id("provider-save").click()
    expect(dialog).to_have_count(0)


def configured(root: Path, config: str) -> Path:
    """`root`, with `config` written as the config.toml its server will read (before the
    setup, which keeps it); for `harness.household(configured(tmp_path, ...))`."""
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "data" / "config.toml").write_text(config)
    return root


def server_fixture(
    *people: tuple[str, str],
    role: str = "member",
    others: tuple[tuple[str, str, str], ...] = (),
    config: str = "",
    model: str = "",
    scope: str = "function",
    **env_extra: str,
) -> Any:
    """The `server` fixture of a browser test, to assign at module level
    (`server = server_fixture((MEMBER, MEMBER_PW))`): a running `harness.household` with
    `people` in `role` and `others` as (name, password, role), `config` as its
    config.toml, and when `model` is named the `fake` provider with that model
    (`add_fake_model`). `scope="module"` shares one server among a module's tests."""

    @pytest.fixture(name="server", scope=scope)  # type: ignore[call-overload]
    def server(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[ServerProcess]:
        root = tmp_path_factory.mktemp("server")
        with household(
            configured(root, config) if config else root, *people, role=role, **env_extra
        ) as srv:
            for name, password, other_role in others:
                srv.add_user(name, password, other_role)
            if model:
                add_fake_model(srv, request.getfixturevalue("fake"), model)
            yield srv

    return server


def feed_household(
    root: Path, feed: Path, *people: tuple[str, str], settings: str = ""
) -> contextlib.AbstractContextManager[ServerProcess]:
    """`harness.household` whose connectors come from the local `feed` (`settings`: more
    lines of its `[connectors]` table)."""
    return household(configured(root, f'[connectors]\nfeed = "{feed}"\n{settings}'), *people)


def install_connector(server: ServerProcess, name: str) -> None:
    """The administrator installs the feed's connector `name` through the API."""
    admin = api_as(server)
    assert admin.post(f"/api/marketplace/{name}/install", json={}).status_code in (200, 201)
    admin.close()


def switch_on(page: Page, name: str, state: str = "Running", timeout: float = 60_000) -> Locator:
    """On the Connectors page, the card of the connector `name`, switched on and in
    `state` (its words on the card)."""
    page.goto("/#/connectors")
    card = page.locator(f'[data-testid="connector"][data-name="{name}"]')
    card.get_by_test_id("connector-toggle").click()
    expect(card.get_by_test_id("connector-state")).to_have_text(state, timeout=timeout)
    return card


def connector_admin_page(
    browser: Browser, server: ServerProcess, prefix: str, width: int, height: int, **options: Any
) -> contextlib.AbstractContextManager[Page]:
    """The connector tests' administrator page at `width` × `height` (`watched_page`,
    named `prefix`) under a `Watch` (a 401 or 403 is no problem); actions wait 20 s."""
    viewport = {"width": width, "height": height}
    return watched_page(
        browser,
        server,
        ADMIN,
        ADMIN_PW,
        prefix=prefix,
        watch=Watch(),
        viewport=viewport,
        timeout=20_000,
        **options,
    )


def go(page: Page, where: str, testid: str) -> None:
    """Go to the route `where` and wait for the page `testid`; the chat's own first
    redirect after a sign-in may land after the hash is set, so set it again when it did."""
    for _ in range(3):
        page.evaluate(f"location.hash = {where!r}")
        try:
            expect(page.get_by_test_id(testid)).to_be_visible(timeout=5_000)
            return
        except AssertionError:
            continue
    expect(page.get_by_test_id(testid)).to_be_visible()


@contextlib.contextmanager
def reported(server: ServerProcess, watch: Watch, prefix: str) -> Iterator[None]:
    """A browser test's scenario runs in the `with` block; when it ends no console problem
    and no CSP violation may have been seen. A failure (a pytest timeout too, which is not
    an `Exception`) leaves the screenshots and the server's log (`report_failure`, named
    `prefix`) before it goes on."""
    try:
        yield
        problems = watch.problems + [f"CSP violation: {v}" for v in watch.csp_violations()]
        assert not problems, "\n".join(problems)
    except BaseException:
        report_failure(server, watch, prefix)
        raise


class Scenario:
    """The browser contexts of one scenario on `server` (see `watched_scenario`)."""

    def __init__(
        self, browser: Browser, server: ServerProcess, watch: Watch, defaults: dict[str, Any]
    ) -> None:
        self.browser, self.server, self.watch, self.defaults = browser, server, watch, defaults
        self.opened: list[BrowserContext] = []

    def context(self, **options: Any) -> BrowserContext:
        """A new context: `open_context` with the scenario's defaults and `options`."""
        context = open_context(self.browser, self.server, **{**self.defaults, **options})
        self.opened.append(context)
        return context

    def open(self, name: str, **options: Any) -> Page:
        """A page of a new context (`options` as `context` takes them), watched as
        `name`, not signed in."""
        return self.watch.attach(name, self.context(**options).new_page())

    def page(self, username: str, password: str, *, name: str = "", **options: Any) -> Page:
        """`username` signed in on a new watched page (`open`; as `name`, their username
        unless given)."""
        return sign_in(self.open(name or username, **options), username, password)


@contextlib.contextmanager
def watched_scenario(
    browser: Browser,
    server: ServerProcess,
    watch: Watch | None = None,
    *,
    prefix: str,
    **defaults: Any,
) -> Iterator[Scenario]:
    """A scenario with browser contexts on `server` (`Scenario`; `defaults` for every
    context): its pages are watched by `watch` (a new `SignedInWatch` unless given) as
    `reported` says, named `prefix`; every context opened is closed either way."""
    scenario = Scenario(browser, server, SignedInWatch() if watch is None else watch, defaults)
    try:
        with reported(server, scenario.watch, prefix):
            yield scenario
    finally:
        for context in scenario.opened:
            context.close()


@contextlib.contextmanager
def watched_page(
    browser: Browser,
    server: ServerProcess,
    username: str,
    password: str,
    *,
    prefix: str,
    watch: Watch | None = None,
    name: str = "",
    **options: Any,
) -> Iterator[Page]:
    """One person's page, signed in, in a new context (`options` as `open_context`
    takes them), under `watch` (a new `SignedInWatch` unless given) as `name` (their
    username unless given). The scenario runs in the `with` block; when it ends no
    console problem and no CSP violation may have been seen. A failure leaves the
    screenshots and the server's log (`report_failure`, named `prefix`); the context is
    closed either way."""
    with watched_scenario(browser, server, watch, prefix=prefix) as scenario:
        yield scenario.page(username, password, name=name, **options)


@contextlib.contextmanager
def case_page(
    browser: Browser,
    server: ServerProcess,
    username: str,
    password: str,
    prefix: str,
    watch: Watch,
    lang: str,
    width: int,
    height: int,
) -> Iterator[Page]:
    """One case of a test that walks languages and widths: the `watched_page` named
    LANG-WIDTH at that size, once its first requests have settled."""
    viewport = {"width": width, "height": height}
    with watched_page(
        browser,
        server,
        username,
        password,
        prefix=prefix,
        watch=watch,
        name=f"{lang}-{width}",
        viewport=viewport,
        timeout=15_000,
    ) as page:
        page.wait_for_load_state("networkidle")
        yield page


class HeldRequests:
    """Requests to one route that a test holds back to open a race window (the page has
    asked, the answer has not come), then lets go with `route.continue_()` or
    `route.fulfill(...)`. The next `count` requests of `method` are held, later ones pass;
    `hold` arms it again."""

    def __init__(self, page: Page, pattern: str, *, count: int = 1, method: str = "GET") -> None:
        self.page = page
        self.routes: list[Route] = []
        self._left = count
        self._method = method
        page.route(pattern, self._on)

    def hold(self, count: int = 1) -> None:
        self._left = count

    def wait(self, count: int = 1) -> list[Route]:
        """The held routes, once `count` of them have come."""
        while len(self.routes) < count:
            self.page.wait_for_timeout(50)
        return self.routes

    def _on(self, route: Route) -> None:
        if self._left and route.request.method == self._method:
            self._left -= 1
            self.routes.append(route)
        else:
            route.continue_()
