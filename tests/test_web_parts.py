"""Pages, web files and translations per feature (docs/dev/plugins.md, "Web files").

The rule: nothing central lists the built-in pages or holds their translations. Every
page is described by its feature's `skald_pages` answer (its ES module, the export that
is its component, icon, flags), the module is a file of the feature's `web/` folder
(`skald_web_files`, served under `/plugins/<name>/`), and `/i18n/<locale>.json` is the
shell's file merged with every feature's and plugin's `i18n/`. A key defined twice or a
broken file stops the start with a message naming the files.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from conftest import PASSWORD, TEST_ENV, Client

from skald.api.app import create_app
from skald.config import load_config
from skald.core.runtime import Runtime
from skald.errors import ConfigError
from skald.paths import DataLayout
from skald.plugins.manager import Plugins
from skald.plugins.specs import WebFiles, feature_folder
from skald.plugins.web import Catalogues, check_names, collect

ROOT = Path(__file__).resolve().parent.parent
WEB = ROOT / "web"


def _folder(tmp_path: Path, name: str, strings: dict[str, object] | str) -> WebFiles:
    folder = tmp_path / name
    (folder / "i18n").mkdir(parents=True)
    text = strings if isinstance(strings, str) else json.dumps(strings)
    (folder / "i18n" / "en.json").write_text(text, encoding="utf-8")
    return WebFiles(name, folder)


def test_every_built_in_page_names_a_module_of_its_features_web_folder_exporting_its_component() -> (
    None
):
    plugins = Plugins.builtin()
    folders = {part.name: part.folder / "web" for part in plugins.web_files()}
    pages = plugins.pages()
    assert len(pages) >= 16
    for page in pages:
        assert page.module and page.component and page.icon and page.testid, page
        prefix, name, file = page.module.split("/", 2)
        assert prefix == "plugins" and name in folders, page.module
        source = (folders[name] / file).read_text(encoding="utf-8")
        assert re.search(rf"export (function|const) {page.component}\b", source), page


def test_the_catalogue_is_the_shells_keys_then_each_features_and_plugins() -> None:
    parts = Plugins.load(["plugins.sample_plugin"], entry_points=False).web_files()
    assert [p.name for p in parts][-1] == "sample"
    it = collect(WEB, parts, "it")
    assert it["sample.hello_title"] == "Pagina di saluto"  # the plugin's
    assert "nav.files" in it and "files.upload" in it  # a feature's
    assert it["common.loading"]  # the shell's
    shell = json.loads((WEB / "i18n" / "it.json").read_text(encoding="utf-8"))
    assert "files.upload" not in shell  # moved to the files feature, not copied
    served = Catalogues(WEB, parts)
    assert json.loads(served.body("it") or b"") == it
    assert served.body("de") is None


def test_a_key_defined_twice_stops_the_start_naming_both_files(tmp_path: Path) -> None:
    clash = _folder(tmp_path, "clash", {"common.loading": "Wait"})
    with pytest.raises(ConfigError, match=r"'common\.loading' is defined twice: web/i18n/en"):
        collect(WEB, [clash], "en")
    a = _folder(tmp_path, "a", {"x.one": "One"})
    b = _folder(tmp_path, "b", {"x.one": "Uno"})
    with pytest.raises(ConfigError, match=re.escape(str(b.folder))):
        collect(WEB, [a, b], "en")


@pytest.mark.parametrize("text", ['{"x.one": 1}', "[]", "{not json"])
def test_a_translation_file_that_is_not_flat_text_is_refused(tmp_path: Path, text: str) -> None:
    bad = _folder(tmp_path, "bad", text)
    with pytest.raises(ConfigError, match=r"translations .*bad/i18n/en\.json"):
        collect(WEB, [bad], "en")


def test_a_web_files_name_is_a_url_segment_taken_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="two plugins ship web files named 'a'"):
        check_names([WebFiles("a", tmp_path), WebFiles("a", tmp_path)])
    with pytest.raises(ConfigError, match=r"\[a-z0-9_-\]"):
        check_names([WebFiles("../up", tmp_path)])


def test_a_features_folder_is_found_before_and_after_it_becomes_a_package(tmp_path: Path) -> None:
    features = tmp_path / "features"
    assert feature_folder(str(features / "chat.py"), "chat") == features / "chat"
    assert feature_folder(str(features / "chat" / "__init__.py"), "chat") == features / "chat"
    assert feature_folder(str(features / "chat" / "hooks.py"), "chat") == features / "chat"


@pytest.fixture
async def plugged(tmp_path: Path) -> AsyncIterator[Runtime]:
    """A runtime with the sample plugin, and a household: mum (admin), ada, tim (child)."""
    layout = DataLayout(tmp_path / "data")
    env = {**TEST_ENV, "SKALD_PLUGINS_MODULES": "plugins.sample_plugin"}
    rt = await Runtime.boot(layout, load_config(layout.root, env), announce=io.StringIO())
    for name, role in (("mum", "admin"), ("ada", "member"), ("tim", "children")):
        await rt.core.users.create(name, PASSWORD, role)
    yield rt
    await rt.shutdown()


async def test_only_built_in_pages_a_member_may_not_see_say_not_allowed(plugged: Runtime) -> None:
    transport = httpx.ASGITransport(app=create_app(plugged), client=("127.0.0.1", 50000))
    for who in ("ada", "tim"):
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            client = Client(http)
            await client.login(who)
            visible = {p["path"] for p in (await client.call("GET", "/api/pages")).json()}
            r = await client.call("GET", "/api/pages/hidden")
            hidden = {h["path"]: h["full_only"] for h in r.json()}
        assert "/admin/users" in hidden and not hidden["/admin/users"]
        assert not visible & set(hidden)
        # A plugin's page (no `say_not_allowed`) stays "not found" for who may not see it.
        assert not {"/sample", "/sample/hello"} & set(hidden)
        assert hidden["/welcome"] is True  # the simple shell goes home, the full one refuses
    assert "/overview" in hidden and hidden["/overview"] is True  # tim: the simple shell


async def test_the_app_serves_a_plugins_translations_merged_and_its_files(plugged: Runtime) -> None:
    transport = httpx.ASGITransport(app=create_app(plugged), client=("127.0.0.1", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        r = await http.get("/i18n/it.json")  # public: the login page needs it
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        strings = r.json()
        assert strings["sample.hello_title"] == "Pagina di saluto"
        assert strings["nav.files"] and strings["common.loading"]
        again = await http.get("/i18n/it.json", headers={"If-None-Match": r.headers["etag"]})
        assert again.status_code == 304
        assert (await http.get("/i18n/xx.json")).status_code == 404
        icon = await http.get("/plugins/sample/icon.svg")
        assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg")
        page = await http.get("/plugins/files/files.js")
        assert page.status_code == 200 and "export function FilesPage" in page.text
        # Only the folder's web/ is served, never its translations' source or anything above.
        assert (await http.get("/plugins/sample/i18n/it.json")).status_code == 404
        assert (await http.get("/plugins/sample/../sample_plugin.py")).status_code == 404
