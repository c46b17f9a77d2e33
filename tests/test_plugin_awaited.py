"""The plugin manager's awaited hooks: every implementation is called (its coroutine
made) before the first is awaited, so one that raises must not leave the others'
coroutines behind, never awaited."""

from __future__ import annotations

import gc
import warnings
from types import SimpleNamespace

import pluggy
import pytest

from skald.plugins import PROJECT, hookimpl, specs
from skald.plugins.manager import Plugins

_MEMBER = SimpleNamespace(id="m", role=SimpleNamespace(capabilities=[]))


class _Broken:
    @hookimpl
    async def skald_prompt_blocks(self, member: object, conversation_id: str | None) -> None:
        raise RuntimeError("a built-in's prompt block failed")


class _Fine:
    def __init__(self) -> None:
        self.ran = False

    @hookimpl
    async def skald_prompt_blocks(
        self, member: object, conversation_id: str | None
    ) -> dict[str, str]:
        self.ran = True
        return {"FINE": "yes"}


async def test_a_built_in_hook_that_raises_leaves_no_coroutine_unawaited() -> None:
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(specs)
    fine = _Fine()
    # Answers are awaited in registration order: the broken one's first.
    pm.register(_Broken(), "broken")
    pm.register(fine, "fine")
    plugins = Plugins(pm)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="prompt block failed"):
            await plugins._awaited("skald_prompt_blocks", member=_MEMBER, conversation_id=None)
        gc.collect()
    assert not fine.ran  # the broken one came first: the fine one's coroutine was left
    never = [w for w in seen if "never awaited" in str(w.message)]
    assert never == []
