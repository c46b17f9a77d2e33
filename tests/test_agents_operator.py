"""Agents the operator adds in the data directory's `agents/` (issue 31): checked as the
shipped ones are, their includes from the shipped fragments; a broken one is left out
with its file named (the start goes on); the metadata for people (icon, friendly
descriptions by language) and `inject_memory` (notes put into the agent's prompt)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import TEST_ENV

from skald.agent.prompts import AgentDefinitionError, load_agents, load_operator_agents
from skald.assets import asset_dir
from skald.config import load_config
from skald.core.runtime import Runtime
from skald.paths import DataLayout

SHIPPED = asset_dir("agents")


def add_agent(folder: Path, agent_id: str, **meta: Any) -> Path:
    """An operator's task agent in `folder`, including a shipped fragment."""
    home = folder / agent_id
    home.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {
        "id": agent_id,
        "name": "Recipe finder",
        "type": "task",
        "description": "Finds recipes in the household's notes.",
        "includes": ["safety"],
        "icon": "🍲",
        "about": {"en": "Finds a recipe for you", "it": "Ti trova una ricetta"},
        "inject_memory": ["shared-memory/kitchen.md", "user-memory/diet.md"],
    }
    data.update(meta)
    (home / "meta.json").write_text(json.dumps(data, ensure_ascii=False))
    (home / "AGENT.md").write_text("# Recipe finder\nFind recipes.\n{{include:safety}}\n")
    return home


def test_an_operator_agent_loads_with_its_metadata_and_the_shipped_fragments(
    tmp_path: Path,
) -> None:
    home = add_agent(tmp_path, "recipes")
    found, broken = load_operator_agents(SHIPPED, tmp_path, load_agents(SHIPPED))
    assert broken == [] and list(found) == ["recipes"]
    agent = found["recipes"]
    assert agent.home == str(home) and agent.icon == "🍲"
    assert agent.about == {"en": "Finds a recipe for you", "it": "Ti trova una ricetta"}
    assert agent.inject_memory == ("shared-memory/kitchen.md", "user-memory/diet.md")
    assert load_agents(SHIPPED)["worker"].home is None


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({"about": {"italiano": "x"}}, "about"),
        ({"about": {}}, "about is empty"),
        ({"icon": "two words"}, "icon"),
        ({"inject_memory": ["../etc/passwd.md"]}, "inject_memory"),
        ({"inject_memory": ["user-memory/../shared-memory/x.md"]}, "inject_memory"),
        ({"inject_memory": ["notes/x.md"]}, "inject_memory"),
        ({"inject_memory": [f"user-memory/{n}.md" for n in range(9)]}, "more than 8"),
        ({"inject_memory": ["user-memory/a.md", "user-memory/a.md"]}, "listed twice"),
        ({"home": "/etc"}, "'home' is not a meta.json field"),
        ({"includes": ["no-such-fragment"]}, "includes"),
        ({"id": "worker"}, "must match its folder"),
    ],
)
def test_a_broken_operator_agent_is_left_out_with_its_file_named(
    tmp_path: Path, meta: dict[str, Any], message: str
) -> None:
    add_agent(tmp_path, "good")
    add_agent(tmp_path, "bad", **meta)
    found, broken = load_operator_agents(SHIPPED, tmp_path, load_agents(SHIPPED))
    assert list(found) == ["good"]
    assert len(broken) == 1 and str(tmp_path / "bad") in str(broken[0])
    assert message in str(broken[0]), str(broken[0])


def test_an_operator_agent_may_not_take_a_shipped_agents_id(tmp_path: Path) -> None:
    add_agent(tmp_path, "worker", id="worker")
    found, broken = load_operator_agents(SHIPPED, tmp_path, load_agents(SHIPPED))
    assert found == {} and "ships with Skald" in str(broken[0])


def test_the_same_metadata_checks_hold_for_shipped_agents(tmp_path: Path) -> None:
    add_agent(tmp_path, "x", about={"english": "x"})
    (tmp_path / "common").symlink_to(SHIPPED / "common")
    with pytest.raises(AgentDefinitionError, match="about"):
        load_agents(tmp_path)


async def test_the_runtime_offers_operator_agents_and_injects_their_notes(tmp_path: Path) -> None:
    layout = DataLayout(tmp_path / "data")
    add_agent(layout.root / "agents", "recipes")
    add_agent(layout.root / "agents", "broken", includes=["missing"])
    rt = await Runtime.boot(layout, load_config(layout.root, TEST_ENV), announce=io.StringIO())
    try:
        assert "recipes" in rt.agents and "broken" not in rt.agents
        assert "worker" in rt.agents  # the shipped ones are all there
        ada = (await rt.core.users.create("ada", "correct horse battery", "member")).user.id
        handle = await rt.core.users.unlock("ada", "correct horse battery")
        mine = await rt.attach(handle)
        await handle.store.note_put("diet.md", "# Diet\nNo peanuts.\n")
        await rt.shared_memory.note_put("kitchen.md", "# Kitchen\nThe oven runs hot.\n", ada)
        injected = await mine._injected(rt.agents["recipes"])
        assert "### shared-memory/kitchen.md\n# Kitchen\nThe oven runs hot." in injected
        assert "### user-memory/diet.md\n# Diet\nNo peanuts." in injected
        assert await mine._injected(rt.agents["worker"]) == ""
        # A role without the household's notes (children) never gets them injected.
        await rt.core.users.create("tim", "correct horse battery", "children")
        child = await rt.attach(await rt.core.users.unlock("tim", "correct horse battery"))
        hidden = await child._injected(rt.agents["recipes"])
        assert "oven" not in hidden
        assert "### shared-memory/kitchen.md\n(not available to this member)" in hidden
    finally:
        await rt.shutdown()
