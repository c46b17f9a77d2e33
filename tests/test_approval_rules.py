"""The approval rule engine: patterns, categories, paths, priorities, groups, seeding."""

from __future__ import annotations

from pathlib import Path

import pytest

from skald.approvals.rules import (
    NO_PATH,
    SEED_RULES,
    CallFacts,
    Rule,
    evaluate,
    normalise_path,
    path_matches,
    tool_matches,
    valid_tool_pattern,
)
from skald.core.approvals import default_rules
from skald.store.registry import Registry

READ = frozenset({"@fs_read"})
WRITE = frozenset({"@fs_write"})


@pytest.mark.parametrize(
    ("pattern", "tool", "categories", "expected"),
    [
        ("execute_cmd", "execute_cmd", frozenset(), True),
        ("execute_cmd", "execute_cmd2", frozenset(), False),
        ("memory_*", "memory_search", frozenset(), True),
        ("memory_*", "read_file", frozenset(), False),
        ("*", "anything", frozenset(), True),
        ("@fs_read", "read_file", READ, True),
        ("@fs_read", "write_file", WRITE, False),
        ("@exec", "execute_cmd", frozenset({"@exec"}), True),
        ("@mcp:calendar", "events", frozenset({"@mcp:calendar"}), True),
        ("@mcp:calendar", "events", frozenset({"@mcp:mail"}), False),
    ],
)
def test_tool_patterns(pattern: str, tool: str, categories: frozenset[str], expected: bool) -> None:
    assert tool_matches(pattern, CallFacts(tool, categories)) is expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, NO_PATH),
        ("user-memory/a.md", "user-memory/a.md"),
        ("./user-memory//a.md", "user-memory/a.md"),
        ("shared-memory\\x.md", "shared-memory/x.md"),
        ("", None),
        ("   ", None),
        (7, None),
        ("/etc/passwd", None),
        ("~/x", "x"),
        ("~", NO_PATH),
        ("~/shared-memory/x.md", "shared-memory/x.md"),
        ("/home/skald/a/b.txt", "a/b.txt"),
        ("~ada/x", None),
        ("a\x00b", None),
        ("user-memory/../shared-memory/x.md", None),
        (".", NO_PATH),
    ],
)
def test_normalise_path(raw: object, expected: str | None) -> None:
    assert normalise_path(raw) == expected


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        (None, "anything", True),
        (None, None, True),
        ("user-memory/**", "user-memory/people/ada.md", True),
        ("user-memory/**", "user-memory", True),
        ("user-memory/**", "shared-memory/x.md", False),
        ("user-memory/*.md", "user-memory/a.md", True),
        ("user-memory/*.md", "user-memory/people/a.md", False),
        ("**", "notes.txt", True),
        ("**", NO_PATH, False),
        (NO_PATH, NO_PATH, True),
        (NO_PATH, "x", False),
        ("**", None, False),
    ],
)
def test_path_patterns(pattern: str | None, path: str | None, expected: bool) -> None:
    assert path_matches(pattern, path) is expected


def rule(
    id: int, tool: str, action: str, priority: int, path: str | None = None, group: str = "g"
) -> Rule:
    return Rule(id, group, tool, path, action, priority, f"r{id}")  # type: ignore[arg-type]


def test_lower_priority_first_then_id() -> None:
    rules = [rule(3, "*", "deny", 5), rule(2, "x", "allow", 5), rule(1, "x", "require", 9)]
    verdict = evaluate(rules, "g", CallFacts("x"))
    assert (verdict.action, verdict.rule_id) == ("allow", 2)
    assert "rule 2" in verdict.explanation and "'g'" in verdict.explanation


def test_only_the_groups_rules_count() -> None:
    rules = [rule(1, "*", "allow", 1, group="other"), rule(2, "*", "deny", 2)]
    assert evaluate(rules, "g", CallFacts("x")).action == "deny"
    assert evaluate(rules, "other", CallFacts("x")).action == "allow"


def test_no_rule_asks_a_person() -> None:
    verdict = evaluate([], "g", CallFacts("x"))
    assert (verdict.action, verdict.rule_id) == ("require", None)
    assert "no rule" in verdict.explanation


@pytest.mark.parametrize(
    ("tool", "categories", "path", "action", "key"),
    [
        ("read_file", READ, "user-memory/a.md", "allow", "default.own-memory-read"),
        ("write_file", WRITE, "user-memory/a.md", "allow", "default.own-memory-write"),
        ("read_file", READ, "shared-memory/a.md", "allow", "default.shared-memory-read"),
        ("write_file", WRITE, "shared-memory/a.md", "require", "default.shared-memory-write"),
        ("read_file", READ, "docs/index.md", "allow", "default.docs-read"),
        ("list_files", READ, NO_PATH, "allow", "default.no-path-read"),
        ("write_file", WRITE, "notes/todo.txt", "allow", "default.home-write"),
        ("write_file", WRITE, None, "require", "default.catch-all"),
        ("write_file", WRITE, NO_PATH, "require", "default.catch-all"),
        ("execute_cmd", frozenset({"@exec"}), NO_PATH, "require", "default.execute-cmd"),
        ("execute_task", frozenset(), NO_PATH, "allow", "default.execute-task"),
        ("web_fetch", frozenset(), NO_PATH, "require", "default.catch-all"),
    ],
)
def test_seeded_defaults(
    tool: str, categories: frozenset[str], path: str | None, action: str, key: str
) -> None:
    verdict = evaluate(default_rules(), "default", CallFacts(tool, categories, path))
    assert verdict.action == action
    keys = [r.key for r in SEED_RULES]
    assert verdict.rule_id == keys.index(key) + 1


def test_valid_tool_patterns() -> None:
    assert all(valid_tool_pattern(p) for p in ["x", "x*", "*", "@fs_read", "@mcp:cal"])
    assert not any(valid_tool_pattern(p) for p in ["", "a*b", "@nope", "@mcp:", "a b"])


async def test_seeding_is_idempotent_and_respects_edits(tmp_path: Path) -> None:
    path = tmp_path / "system.db"
    reg = await Registry.open(path)
    try:
        rules = await reg.approval_rules("default")
        assert len(rules) == len(SEED_RULES)
        # an admin edits one default and deletes another
        await reg.db.call(
            lambda c: c.execute(
                "UPDATE approval_rules SET action='deny' WHERE seed_key='default.execute-cmd'"
            )
        )
        await reg.db.call(
            lambda c: c.execute("DELETE FROM approval_rules WHERE seed_key='default.docs-read'")
        )
    finally:
        await reg.close()
    reg = await Registry.open(path)  # the next boot seeds again
    try:
        rules = await reg.approval_rules("default")
        assert len(rules) == len(SEED_RULES) - 1
        by_tool = {r.tool_pattern: r for r in rules}
        assert by_tool["execute_cmd"].action == "deny"
        assert not any(r.path_pattern == "docs/**" for r in rules)
    finally:
        await reg.close()
