"""The hooks a built-in feature binds (`skald/plugins/lazy.py`): what each answers, and
that nothing named is imported before the hook is called."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from skald.plugins import lazy
from skald.store.migrations.owner import CHAT, SETTINGS
from skald.store.migrations.registry import ACCOUNTS

NAMED = """
import msgspec

CAP = "a capability"

class Section(msgspec.Struct):
    pass

class Kept:
    def __init__(self, server):
        self.server = server
"""


def test_migrations_answer_the_features_of_the_schema_asked() -> None:
    hook = lazy.migrations(
        registry=("skald.store.migrations.registry:ACCOUNTS",),
        owner=("skald.store.migrations.owner:SETTINGS", "skald.store.migrations.owner:CHAT"),
    )
    assert hook("registry") == [ACCOUNTS]
    assert hook("owner") == [SETTINGS, CHAT]
    assert hook("elsewhere") == []
    assert lazy.migrations(owner=("skald.store.migrations.owner:CHAT",))("registry") == []


def test_a_named_module_is_imported_when_the_hook_is_called(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "lazy_named.py").write_text(NAMED)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazy_named", raising=False)
    capabilities = lazy.capabilities("lazy_named:CAP")
    section = lazy.config_section("named", "lazy_named:Section")
    built = lazy.built_with_server("lazy_named:Kept", "lazy_named:Kept")
    assert "lazy_named" not in sys.modules
    answered = capabilities()
    named = sys.modules["lazy_named"]
    assert answered == [named.CAP]
    assert section() == {"named": named.Section}
    server = object()
    kept = built(server)  # type: ignore[arg-type]  # any object stands for the server
    assert [type(k) for k in kept] == [named.Kept, named.Kept]
    assert all(k.server is server for k in kept)
