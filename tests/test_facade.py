"""Features see Skald through two documented facades (`Server`, `Member`), keep their
objects in typed state slots instead of module-level registries, and a new feature is
one folder named in `[plugins] modules`."""

from __future__ import annotations

import ast
import inspect
import io
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from conftest import PASSWORD, TEST_ENV, Client
from plugins import sample_plugin

from skald.agent import CancelScope, ToolContext
from skald.api.app import create_app
from skald.cli import plugin_sections
from skald.config import load_config
from skald.core.runtime import Runtime
from skald.errors import ConfigError
from skald.paths import DataLayout
from skald.plugins import hookimpl
from skald.plugins.facade import Member, Server

ROOT = Path(__file__).resolve().parent.parent
SKALD = ROOT / "skald"
PLUGINS_DOC = ROOT / "docs" / "dev" / "plugins.md"
SAMPLE = Path(sample_plugin.__file__)
RUNTIMES = ("skald.core.runtime", "skald.core.user_runtime")
# What a module-level name must not hold: the server's or a member's live objects.
RUNTIME_TYPES = re.compile(
    r"\b(Runtime|UserRuntime|Plugins|Server|Member|Scheduler|BackupScheduler|Connectors)\b"
)
WEAK = re.compile(r"Weak(Key|Value)Dictionary|WeakSet")
WEAK_MAPPING = re.compile(r"Weak(Key|Value)Dictionary")  # keyed by someone else's object


def _ctx() -> ToolContext:
    return ToolContext(conversation_id="c", call_id="x", depth=0, cancel=CancelScope(), sink=None)  # type: ignore[arg-type]


async def _boot(root: Path, config: str) -> Runtime:
    layout = DataLayout(root)
    layout.root.mkdir(parents=True, exist_ok=True)
    (layout.root / "config.toml").write_text(config)
    loaded = load_config(layout.root, TEST_ENV, plugin_sections)
    return await Runtime.boot(layout, loaded, announce=io.StringIO())


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    rt = await _boot(tmp_path / "data", '[plugins]\nmodules = ["plugins.sample_plugin"]\n')
    yield rt
    await rt.shutdown()


# -- no registries, no runtimes in features ----------------------------------------------


def _module_level_registries(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            text = ast.unparse(node)
            annotation = ast.unparse(node.annotation) if isinstance(node, ast.AnnAssign) else ""
            if WEAK.search(text) or RUNTIME_TYPES.search(annotation):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:90]}")
    return found


def test_no_module_level_registry_holds_runtime_objects() -> None:
    found = [hit for path in sorted(SKALD.rglob("*.py")) for hit in _module_level_registries(path)]
    weak_anywhere = [
        str(p.relative_to(ROOT))
        for p in SKALD.rglob("*.py")
        if WEAK_MAPPING.search(p.read_text(encoding="utf-8"))
    ]
    assert found == [] and weak_anywhere == []


def _imports(path: Path) -> set[str]:
    # Every import, those under `if TYPE_CHECKING:` and inside functions included.
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def _reaches_behind(path: Path) -> bool:
    # `server._live`, `member._live`; an object's own `self._live` is its own business.
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(n, ast.Attribute)
        and n.attr == "_live"
        and not (isinstance(n.value, ast.Name) and n.value.id == "self")
        for n in ast.walk(tree)
    )


def _imports_a_runtime(path: Path) -> bool:
    return any(name.startswith(RUNTIMES) for name in _imports(path))


def test_features_and_the_sample_plugin_see_the_facade_never_the_runtimes() -> None:
    # Every module of every feature package (they are folders: `features/*.py` alone
    # would see only their __init__).
    features = SKALD / "features"
    modules = {str(p.relative_to(features)): p for p in sorted(features.rglob("*.py"))}
    assert "inbox/routes.py" in modules
    assert [name for name, p in modules.items() if _imports_a_runtime(p)] == []
    assert [name for name, p in modules.items() if _reaches_behind(p)] == []
    assert not _imports_a_runtime(SAMPLE)
    assert not _reaches_behind(SAMPLE)


# What the composition used to patch on after construction (one level: `x.attr = ...`).
WIRED_LATE = {"runtime.notifications", "connectors.supervisor", "inst.boxes", "runtime.listen"}
WIRED_LATE |= {"plugins.config", "runtime.hub", "hub.retire", "hub.shows_detail"}


def _late_wiring(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                    # `self.hub.retire = ...`: setting what another object owns.
                    nested = isinstance(t, ast.Attribute) and isinstance(t.value, ast.Attribute)
                    if nested or (isinstance(t, ast.Attribute) and ast.unparse(t) in WIRED_LATE):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(t)}")
    return found


def test_no_collaborator_is_patched_onto_an_object_after_construction() -> None:
    assert [hit for p in sorted(SKALD.rglob("*.py")) for hit in _late_wiring(p)] == []


# -- the facade is documented ---------------------------------------------------------------


def _public(cls: type) -> set[str]:
    # Its own and those of its bases (`state` comes from the shared `_Facade`).
    names = {n for base in cls.__mro__[:-1] for n in vars(base) if not n.startswith("_")}
    # Attributes set in __init__ (`self.server = ...`).
    for node in ast.walk(ast.parse(inspect.getsource(cls.__init__).strip())):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and isinstance(node.ctx, ast.Store)
            and not node.attr.startswith("_")
        ):
            names.add(node.attr)
    return names


@pytest.mark.parametrize(("cls", "prefix"), [(Server, "server"), (Member, "member")])
def test_every_public_attribute_of_the_facades_is_documented(cls: type, prefix: str) -> None:
    doc = PLUGINS_DOC.read_text(encoding="utf-8")
    documented = set(re.findall(rf"^\| `{prefix}\.([a-z_]+)", doc, flags=re.MULTILINE))
    public = _public(cls)
    assert public, "the facade has no public attributes?"
    assert sorted(public - documented) == []
    assert sorted(documented - public) == []  # nor documents one that is gone


# -- state slots ----------------------------------------------------------------------------


async def test_a_features_server_and_member_objects_are_found_by_type(
    runtime: Runtime,
) -> None:
    created = await runtime.core.users.create("ada", PASSWORD, "member")
    await runtime.core.users.unlock("ada", PASSWORD)
    mine = await runtime.user_runtime(created.user)
    server, member = runtime.server, mine.facade
    assert server.member(created.user.id) is member and member.server is server
    stamp = next(t for t in mine.all_tools() if t.name == "sample_stamp")
    await stamp.run({"text": "bread"}, _ctx())
    await stamp.run({"text": "milk"}, _ctx())
    assert server.state(sample_plugin.Tally).stamps == 2
    pad = member.state(sample_plugin.StampPad)
    assert (pad.owner, pad.stamps) == (created.user.id, 2)
    # A member's slot lives as long as their unlock: a new one after a lock.
    await runtime.lock(created.user.id)
    await runtime.core.users.unlock("ada", PASSWORD)
    again = await runtime.user_runtime(created.user)
    assert again.facade.state(sample_plugin.StampPad).stamps == 0
    assert server.state(sample_plugin.Tally).stamps == 2  # the server's outlives it
    # Nobody keeps a `str`: an error naming it, or None when asked for a default.
    with pytest.raises(LookupError, match="no feature keeps a str in the server state"):
        server.state(str)
    assert server.state(str, None) is None and member.state(str, None) is None


async def test_two_features_keeping_one_type_stop_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        sample_plugin,
        "skald_server_state",
        hookimpl(lambda: [sample_plugin.Tally(), sample_plugin.Tally()]),
    )
    with pytest.raises(ConfigError, match="two features keep a Tally in the server state"):
        await _boot(tmp_path / "data", '[plugins]\nmodules = ["plugins.sample_plugin"]\n')


# -- events and channels per feature ------------------------------------------------------


async def test_a_features_event_types_are_registered_and_no_others_are_published(
    runtime: Runtime,
) -> None:
    from skald.core.events import Ping

    events = runtime.server.events
    conn = events.connect("u1", "t1")
    events.publish("u1", sample_plugin.WidgetsChanged(count=3))
    assert conn.queue.get_nowait() == sample_plugin.WidgetsChanged(count=3)

    class Stray(sample_plugin.msgspec.Struct, tag="stray"):
        pass

    with pytest.raises(TypeError, match="Stray is not a registered event type"):
        events.publish("u1", Stray())
    events.publish("u1", Ping(t=1.0))  # the server's own need no registration


async def test_two_event_types_with_one_tag_stop_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skald.features.notifications.events import Notified

    class Mine(sample_plugin.msgspec.Struct, tag="notified"):
        pass

    assert Notified.__struct_config__.tag == "notified"
    monkeypatch.setattr(sample_plugin, "skald_event_types", hookimpl(lambda: [Mine]))
    with pytest.raises(ConfigError, match="two event types are tagged 'notified'"):
        await _boot(tmp_path / "data", '[plugins]\nmodules = ["plugins.sample_plugin"]\n')


def test_the_core_events_import_no_feature() -> None:
    # The chat's own (conversations, history) stay: the stream is the chat's first.
    features = (
        "skald.features.notifications.store",
        "skald.features.schedule.store",
        "skald.features.schedule",
    )
    imported = _imports(SKALD / "core" / "events.py")
    assert {
        n
        for n in imported
        if n.startswith((*features, "skald.features.notifications", "skald.features.connectors"))
    } == set()


async def test_the_web_notification_channel_comes_through_the_hook_like_any_other(
    runtime: Runtime,
) -> None:
    assert list(runtime.notifications.channels) == ["web", "telegram", "pigeon"]
    answered = runtime.plugins.notification_channels(runtime.server)
    assert [c.name for c in answered] == ["web", "telegram", "pigeon"]


# -- a feature is one folder ----------------------------------------------------------------


def _walkthrough() -> tuple[dict[str, str], str]:
    """The files of 'Adding a feature: one folder' in docs/dev/plugins.md: the package's
    files by their path inside `skald_jar/`, and `config.toml`."""
    doc = PLUGINS_DOC.read_text(encoding="utf-8")
    section = doc.split("## Adding a feature: one folder", 1)[1].split("\n## ", 1)[0]
    files = dict(
        re.findall(r"`skald_jar/([\w./]+)`[^\n]*:\n\n```\w+\n(.*?)```", section, re.DOTALL)
    )
    config = re.search(r"`config\.toml`:\n\n```toml\n(.*?)```", section, re.DOTALL)
    assert config is not None
    assert {"__init__.py", "web/jar.js", "i18n/en.json", "i18n/it.json"} <= set(files), files
    return files, config.group(1)


async def test_the_documented_one_folder_feature_works_from_a_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files, config = _walkthrough()
    folder = tmp_path / "features" / "skald_jar"
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    monkeypatch.syspath_prepend(str(folder.parent))
    monkeypatch.delitem(sys.modules, "skald_jar", raising=False)
    rt = await _boot(tmp_path / "data", config)
    try:
        await _use_the_jar(rt)
    finally:
        await rt.shutdown()


async def _use_the_jar(rt: Runtime) -> None:
    import msgspec

    # Its capability is in the catalogue; a role holding it gets its tool.
    role = await rt.core.registry.get_role("member")
    assert role is not None
    granted = msgspec.structs.replace(role, capabilities=[*role.capabilities, "jar.use"])
    await rt.core.registry.save_role(granted, create=False)
    await rt.core.users.create("ada", PASSWORD, "member")
    await rt.core.users.create("tim", PASSWORD, "children")
    transport = httpx.ASGITransport(app=create_app(rt), client=("127.0.0.1", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        ada = Client(http)
        await ada.login("ada")
        mine = await rt.user_runtime(await rt.core.users.get("ada"))
        drop = next(t for t in mine.all_tools() if t.name == "jar_drop")
        assert not (await drop.run({"note": "for the bakery"}, _ctx())).is_error
        # Its table is in her own database, its route reads it, its page is listed.
        r = await ada.call("GET", "/api/jar")
        assert r.status_code == 200 and r.json() == {"coins": 1}, r.text
        pages = (await ada.call("GET", "/api/pages")).json()
        assert any(p["path"] == "/jar" for p in pages), pages
        # Its page module is served from its own folder, its words join the app's.
        page = await ada.call("GET", "/plugins/jar/jar.js")
        assert page.status_code == 200 and "export async function render" in page.text
        italian = (await ada.call("GET", "/i18n/it.json")).json()
        assert italian["jar.title"] == "Salvadanaio", italian.get("jar.title")
        assert italian["nav.files"]  # beside the app's own
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        tim = Client(http)
        await tim.login("tim")
        child = await rt.user_runtime(await rt.core.users.get("tim"))
        assert "jar_drop" not in {t.name for t in child.all_tools()}
        assert (await tim.call("GET", "/api/jar")).status_code == 403
        assert all(p["path"] != "/jar" for p in (await tim.call("GET", "/api/pages")).json())
