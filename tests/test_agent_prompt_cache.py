"""The per-process cache of resolved agent prompts: used while the files are unchanged,
read again (in a thread) as soon as one of them is edited, replaced or removed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from skald.agent import prompts
from skald.agent.prompts import (
    AgentDefinitionError,
    PromptCache,
    compose_prompt,
    load_agents,
    resolve_includes,
)
from skald.assets import asset_dir


@pytest.fixture
def root(tmp_path: Path) -> Path:
    copy = tmp_path / "agents"
    shutil.copytree(asset_dir("agents"), copy)
    return copy


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    seen: list[Path] = []
    real = prompts._read

    def counting(path: Path) -> str:
        seen.append(path)
        return real(path)

    monkeypatch.setattr(prompts, "_read", counting)
    return seen


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    # The files were just copied: without this, they are too fresh to be kept.
    monkeypatch.setattr(prompts, "SETTLED_AFTER_S", 0.0)


async def test_unchanged_files_are_not_read_again(
    root: Path, reads: list[Path], settled: None
) -> None:
    agent = load_agents(root)["assistant"]
    cache = PromptCache()
    first = await cache.resolved(agent, root)
    assert first == resolve_includes(agent, root)
    reads.clear()
    assert await cache.resolved(agent, root) == first
    assert reads == []
    values = {"USER_PROFILE": "## Who you are talking with\n- Name: Ada"}
    assert await cache.compose(agent, root, values) == compose_prompt(agent, root, values)


async def test_an_edited_agent_or_fragment_applies_at_once(
    root: Path, reads: list[Path], settled: None
) -> None:
    agent = load_agents(root)["assistant"]
    cache = PromptCache()
    await cache.resolved(agent, root)
    with (root / "assistant" / "AGENT.md").open("a") as f:
        f.write("\nAlways answer in rhyme.\n")
    assert "Always answer in rhyme." in await cache.resolved(agent, root)
    # An included fragment counts as much as the agent's own file.
    fragment = root / "common" / "safety.md"
    fragment.write_text(fragment.read_text() + "\nNever juggle knives.\n")
    assert "Never juggle knives." in await cache.resolved(agent, root)
    # Replaced by another file (a new inode), as an editor or an update does.
    replacement = root / "common" / "safety.md.new"
    replacement.write_text("Only this safety rule.\n")
    replacement.replace(fragment)
    text = await cache.resolved(agent, root)
    assert "Only this safety rule." in text and "Never juggle knives." not in text
    reads.clear()
    await cache.resolved(agent, root)
    assert reads == []


async def test_a_removed_fragment_fails_as_without_the_cache(root: Path, settled: None) -> None:
    agent = load_agents(root)["assistant"]
    cache = PromptCache()
    await cache.resolved(agent, root)
    (root / "common" / "safety.md").unlink()
    with pytest.raises(AgentDefinitionError, match="safety"):
        await cache.resolved(agent, root)


async def test_files_changed_just_now_are_used_but_not_kept(root: Path, reads: list[Path]) -> None:
    # Within one timestamp tick a same-size edit would keep its stamp: a text made from
    # a file that changed less than SETTLED_AFTER_S ago is read again next time.
    agent = load_agents(root)["assistant"]
    cache = PromptCache()
    reads.clear()
    first = await cache.resolved(agent, root)
    count = len(reads)
    assert count > 1
    assert await cache.resolved(agent, root) == first
    assert len(reads) == 2 * count
