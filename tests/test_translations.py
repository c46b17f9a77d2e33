"""Every string a member can see exists in English, Italian and French.

The rule (docs/dev/web.md, "Translations"): the web app shows no text that is not in
web/i18n (the app shell's keys) and the features' `i18n/` folders (collected by
`skald.plugins.web`, as the server serves them), and every error code the server can answer with has a sentence there
(`error.code.<code>`), so the UI can say it in the member's language. Role names of the
built-in roles (`role_name.<name>`) and every built-in capability (`capability.<name>`,
with `capability.<name>.hint`) too.

These checks read the code, not a list: a new `t('…')` key, a new error code (a
`SkaldError` subclass, an `ApiError(…, "code", …)`, a `{"code": …}` body), a new built-in
capability or role, or English typed straight into a page's template fails here until it
is translated. Trap: a key built at run time (`t(\\`models.cap_${c}\\`)`) can only be
checked by its pattern; keep such families small and closed.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from skald.plugins.specs import WebFiles
from skald.plugins.web import collect

ROOT = Path(__file__).resolve().parent.parent
WEB = ROOT / "web"
LOCALES = ("en", "it", "fr")

# Text in a template that is not a sentence: the product's name, URL fragments, examples.
# Not words: a name, URL parts, a tool id, an HTTP header written as it is sent.
NOT_WORDS = {
    "Skald",
    "&file=",
    "https://…",
    "write_file",
    "Authorization: Bearer {SECRET:TOKEN}",
}


def _parts() -> list[WebFiles]:
    from skald.plugins.manager import Plugins

    return Plugins.builtin().web_files()


def _strings(locale: str) -> dict[str, str]:
    """The catalogue the server serves: the shell's file and every feature's."""
    return collect(WEB, _parts(), locale)


def _js_files() -> list[Path]:
    """The app's scripts: the shell's and every feature's pages."""
    found = sorted((WEB / "js").rglob("*.js"))
    return found + sorted(js for part in _parts() for js in (part.folder / "web").rglob("*.js"))


def _js_sources() -> dict[Path, str]:
    out = {}
    for js in _js_files():
        lines = js.read_text(encoding="utf-8").splitlines()
        out[js] = "\n".join(line for line in lines if not line.lstrip().startswith("//"))
    return out


def _missing(keys: set[str]) -> dict[str, list[str]]:
    """locale -> keys among `keys` it lacks (or has blank)."""
    gaps = {}
    for loc in LOCALES:
        table = _strings(loc)
        lacking = sorted(k for k in keys if not str(table.get(k, "")).strip())
        if lacking:
            gaps[loc] = lacking
    return gaps


def server_error_codes() -> set[str]:
    """Every error code the server can put in `{"error": {"code": …}}`, read from the source.

    Class attributes `code = "…"` (SkaldError subclasses), `ApiError(status, "code", …)`
    and `error_response(status, "code", …)` calls, the status→code table, and literal JSON
    bodies (`"code":"…"`, as the edge writes before the app runs).
    """
    codes: set[str] = set()
    for path in (ROOT / "skald").rglob("*.py"):
        if "tests" in path.parts:
            continue
        source = path.read_text(encoding="utf-8")
        codes |= set(re.findall(r'\\?"code\\?"\s*:\s*\\?"([a-z_]+)\\?"', source))
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    target = (
                        stmt.targets[0]
                        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                        else stmt.target
                        if isinstance(stmt, ast.AnnAssign)
                        else None
                    )
                    value = getattr(stmt, "value", None)
                    if (
                        isinstance(target, ast.Name)
                        and target.id == "code"
                        and isinstance(value, ast.Constant)
                        and isinstance(value.value, str)
                    ):
                        codes.add(value.value)
            elif isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in ("ApiError", "error_response") and len(node.args) >= 2:
                    arg = node.args[1]
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        codes.add(arg.value)
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "_HTTP_CODES" for t in node.targets
            ):
                assert isinstance(node.value, ast.Dict)
                codes |= {v.value for v in node.value.values if isinstance(v, ast.Constant)}
    return codes


def test_every_key_the_web_app_names_exists_in_every_language() -> None:
    en = _strings("en")
    areas = {k.split(".")[0] for k in en}
    named: set[str] = set()
    patterns: set[str] = set()
    prefixes: set[str] = set()
    for code in _js_sources().values():
        for literal in re.findall(r"'([a-z_]+\.[a-z0-9_.]+)'", code):
            if literal.split(".")[0] not in areas:
                continue
            if literal.endswith("."):
                # A prefix the code completes at run time ('chat.error.' + code): a family.
                prefixes.add(literal)
            else:
                named.add(literal)
        named |= set(re.findall(r"\bt\(\s*'([a-z0-9_.]+)'", code))
        patterns |= set(re.findall(r"\bt\(\s*`([a-z0-9_.]+\$\{[^`]*)`", code))
    assert named, "no keys found: the scan is broken"
    assert not _missing(named), _missing(named)
    for pattern in patterns:
        regex = re.sub(r"\\\$\\\{[^}]*\\\}", "[a-z0-9_]+", re.escape(pattern))
        family = {k for k in en if re.fullmatch(regex, k)}
        assert family, f"no key matches t(`{pattern}`)"
        assert not _missing(family), (pattern, _missing(family))
    for prefix in prefixes:
        family = {k for k in en if k.startswith(prefix)}
        assert family, f"no key starts with '{prefix}'"
        assert not _missing(family), (prefix, _missing(family))


def test_navigation_titles_of_the_built_in_pages_exist_in_every_language() -> None:
    from skald.plugins.manager import Plugins

    titles = {page.title for page in Plugins.builtin().pages()}
    assert titles
    assert not _missing(titles), _missing(titles)


def test_templates_hold_no_english_typed_outside_the_translations() -> None:
    """Text between tags and in title/aria-label/placeholder/alt attributes of html``
    templates must come from t(): a sentence typed into a template is English forever."""
    found = []
    text_node = re.compile(r">([^<>`${}]*[A-Za-z]{3,}[^<>`${}]*)(?=<|\$\{)")
    attribute = re.compile(
        r"""\b(?:title|aria-label|placeholder|alt)=["']([^"'$]*[A-Za-z]{2,}[^"']*)["']"""
    )
    for path, code in _js_sources().items():
        for template in re.findall(r"html`((?:[^`\\]|\\.)*)`", code, flags=re.S):
            for match in [*text_node.findall(template), *attribute.findall(template)]:
                text = match.strip()
                if text and text not in NOT_WORDS and not re.search(r"[;=]|=>", text):
                    found.append((path.name, text))
    assert not found, found


def test_every_error_code_the_server_can_send_has_a_sentence_in_every_language() -> None:
    codes = server_error_codes()
    # The scan must see the codes it is meant to see, or it proves nothing.
    assert {"invalid_input", "csrf", "wrong_password", "cross_origin", "throttled"} <= codes
    keys = {f"error.code.{code}" for code in codes}
    assert not _missing(keys), _missing(keys)


def test_built_in_roles_and_capabilities_have_names_in_every_language() -> None:
    from skald.permissions import declared
    from skald.plugins.manager import Plugins
    from skald.store.migrations.registry import ROLES_V1

    # The built-in features' capabilities and the reserved ones (a plugin loaded by
    # another test declares its own, which has no key and shows the server's text).
    builtin = {c.name for c in Plugins.builtin().capabilities()}
    caps = sorted(builtin | {c.name for c in declared() if c.reserved_for})
    assert "chat" in caps and "admin.roles" in caps
    keys = {f"capability.{c}" for c in caps} | {f"capability.{c}.hint" for c in caps}
    keys |= {f"role_name.{name}" for name in ROLES_V1}
    assert not _missing(keys), _missing(keys)
    en = _strings("en")
    for name, (display, _caps, _attrs) in ROLES_V1.items():
        # The UI recognises an untouched built-in name by its English text.
        assert en[f"role_name.{name}"] == display, name


def test_a_feature_page_names_only_its_own_keys_or_the_shells() -> None:
    """A key a feature's page uses lives in that feature's `i18n/` or in the shell's
    file, never only in another feature's (which a plugin set without it would lack)."""
    shell = json.loads((WEB / "i18n" / "en.json").read_text("utf-8"))
    wrong = []
    for part in _parts():
        own_file = part.folder / "i18n" / "en.json"
        own = json.loads(own_file.read_text("utf-8")) if own_file.is_file() else {}
        for js in (part.folder / "web").rglob("*.js"):
            code = _js_sources()[js]
            for key in set(re.findall(r"\bt\(\s*'([a-z0-9_.]+)'", code)):
                if key not in own and key not in shell:
                    wrong.append((part.name, js.name, key))
    assert not wrong, wrong
