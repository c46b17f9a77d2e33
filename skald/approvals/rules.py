"""The approval rule engine: which rule decides a tool call, and why (pure, no I/O).

A rule names a security group, a tool pattern, an optional path pattern and an action.
The rules of the call's group are tried in order of (priority, id); the first that
matches decides, and the verdict says which rule that was. No rule matching at all
(an admin deleted the catch-all) asks a person.

Tool patterns: an exact tool name (`execute_cmd`), a prefix ending in `*` (`memory_*`),
`*` for every tool, or a category: `@fs_read` / `@fs_write` (the file and note tools that
read or write), `@suggested` (a change a report suggested, accepted on the Reports
page), `@fs_append` (`append_file`, which is a write too: a rule on it placed
before the write rules can allow appending where writing asks), `@exec` (tools that run commands), `@mcp:<server>` (a connector's tools).

Path patterns match the call's `path` argument after normalising it (backslashes to
slashes, `.` and empty segments dropped, Unicode NFC; `~/` and `/home/skald/` name the
home, so `~/notes.txt` is `notes.txt` and `~/shared-memory/x.md` is the shared memory). `*` matches within one segment,
`**` any number of segments (none included). A call without a path matches only the
pattern `.`. A path that could escape (`..`, absolute, `~`) or is not text matches no
path pattern at all, so it falls to rules without one (the catch-all asks).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Final, Literal

import msgspec

from skald.agent.tools import EXEC, FS_APPEND, FS_READ, FS_WRITE, PAID
from skald.paths import CONTAINER_HOME

__all__ = [
    "ACTIONS",
    "DEFAULT_GROUP",
    "SEED_RULES",
    "SUGGESTED",
    "Action",
    "CallFacts",
    "Rule",
    "SeedRule",
    "Verdict",
    "evaluate",
    "normalise_path",
    "path_matches",
    "tool_matches",
    "valid_tool_pattern",
]

Action = Literal["allow", "require", "deny"]
ACTIONS: Final[tuple[Action, ...]] = ("allow", "require", "deny")
DEFAULT_GROUP: Final = "default"
NO_PATH: Final = "."
# A call that applies a change a report suggested (memory upkeep: accepted on the
# Reports page); the system agents feature adds it, and a seeded rule asks a person.
SUGGESTED: Final = "@suggested"
CATEGORIES: Final = frozenset(
    {FS_READ, FS_WRITE, FS_APPEND, EXEC, PAID, SUGGESTED}
)  # the tool contract's own


class Rule(msgspec.Struct, frozen=True):
    """One stored rule; the admin API shows these fields as they are (`RuleOut`)."""

    id: int
    group: str
    tool_pattern: str
    path_pattern: str | None
    action: Action
    priority: int
    description: str


@dataclass(frozen=True)
class CallFacts:
    """What the rules look at: the tool's name, its categories and the call's path.

    `path` is the normalised path, `NO_PATH` when the call has none, and None when the
    call's path is malformed (it then matches no path pattern).
    """

    tool: str
    categories: frozenset[str] = field(default_factory=frozenset)
    path: str | None = NO_PATH


@dataclass(frozen=True)
class Verdict:
    action: Action
    rule: Rule | None
    explanation: str

    @property
    def rule_id(self) -> int | None:
        return None if self.rule is None else self.rule.id


def normalise_path(raw: object) -> str | None:
    """The path as rules see it: `NO_PATH` for no path, None for a malformed one."""
    if raw is None:
        return NO_PATH
    if not isinstance(raw, str) or not raw.strip():
        return None
    text = unicodedata.normalize("NFC", raw.replace("\\", "/"))
    if any(unicodedata.category(ch) == "Cc" for ch in text):
        return None
    # The home as the file tools spell it: `~`, `~/…` or the sandbox's `/home/skald/…`.
    if text == CONTAINER_HOME or text.startswith(CONTAINER_HOME + "/"):
        text = text[len(CONTAINER_HOME) :]
    elif text == "~" or text.startswith("~/"):
        text = text[1:]
    elif text.startswith(("/", "~")):
        return None
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        return None
    return "/".join(parts) if parts else NO_PATH


def _match_segments(pattern: list[str], parts: list[str]) -> bool:
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_match_segments(rest, parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], head) and _match_segments(rest, parts[1:])


def path_matches(pattern: str | None, path: str | None) -> bool:
    """Does the rule's path pattern cover this (normalised) path? None matches any."""
    if pattern is None:
        return True
    if path is None:
        return False
    if path == NO_PATH or pattern == NO_PATH:
        return pattern == path
    return _match_segments([p for p in pattern.split("/") if p], path.split("/"))


def tool_matches(pattern: str, facts: CallFacts) -> bool:
    if pattern == "*":
        return True
    if pattern.startswith("@"):
        return pattern in facts.categories
    if pattern.endswith("*"):
        return facts.tool.startswith(pattern[:-1])
    return facts.tool == pattern


def valid_tool_pattern(pattern: str) -> bool:
    if not pattern or len(pattern) > 200 or any(ch.isspace() for ch in pattern):
        return False
    if pattern.startswith("@"):
        return pattern in CATEGORIES or (pattern.startswith("@mcp:") and len(pattern) > 5)
    return "*" not in pattern[:-1]


def _describe(rule: Rule) -> str:
    where = "" if rule.path_pattern is None else f" on {rule.path_pattern}"
    about = f": {rule.description}" if rule.description else ""
    return f"rule {rule.id} ({rule.tool_pattern}{where} -> {rule.action}){about}"


def evaluate(rules: Iterable[Rule], group: str, facts: CallFacts) -> Verdict:
    """The first matching rule of `group` in (priority, id) order decides."""
    ordered = sorted((r for r in rules if r.group == group), key=lambda r: (r.priority, r.id))
    for rule in ordered:
        if tool_matches(rule.tool_pattern, facts) and path_matches(rule.path_pattern, facts.path):
            return Verdict(rule.action, rule, f"matched {_describe(rule)} in group {group!r}")
    return Verdict("require", None, f"no rule of group {group!r} matched, so a person decides")


@dataclass(frozen=True)
class SeedRule:
    """A rule Skald adds once; `key` remembers it was added even after it is deleted."""

    key: str
    tool_pattern: str
    path_pattern: str | None
    action: Action
    priority: int
    description: str
    group: str = DEFAULT_GROUP


SHARED_WRITE_REASON: Final = "writing to the household's shared memory"

SEED_RULES: Final[tuple[SeedRule, ...]] = (
    SeedRule("default.own-memory-read", "@fs_read", "user-memory/**", "allow", 10,
             "reading your own memory"),
    SeedRule("default.own-memory-write", "@fs_write", "user-memory/**", "allow", 10,
             "writing your own memory"),
    SeedRule("default.shared-memory-read", "@fs_read", "shared-memory/**", "allow", 20,
             "reading the household's shared memory"),
    SeedRule("default.shared-memory-write", "@fs_write", "shared-memory/**", "require", 20,
             SHARED_WRITE_REASON),
    SeedRule("default.docs-read", "@fs_read", "docs/**", "allow", 30, "reading the manual"),
    SeedRule("default.no-path-read", "@fs_read", NO_PATH, "allow", 30,
             "listing or searching your own places"),
    SeedRule("default.home-read", "@fs_read", "**", "allow", 40, "reading your home folder"),
    SeedRule("default.home-write", "@fs_write", "**", "allow", 40, "writing your home folder"),
    SeedRule("default.execute-cmd", "execute_cmd", None, "require", 50,
             "running a command in your sandbox"),
    SeedRule("default.execute-task", "execute_task", None, "allow", 50,
             "handing work to a helper (its own calls pass these rules too)"),
    SeedRule("default.ask-user", "ask_user", None, "allow", 50, "asking you a question"),
    SeedRule("default.schedule", "schedule", None, "allow", 50,
             "managing your scheduled jobs (each run's own calls pass these rules too)"),
    SeedRule("default.background-task", "background_task", None, "allow", 50,
             "handing work to a background helper (its own calls pass these rules too)"),
    SeedRule("default.notify", "notify", None, "allow", 50, "sending you a notification"),
    SeedRule("default.paid", "@paid", None, "require", 45,
             "a request the model provider may bill, such as drawing a picture"),
    SeedRule("default.suggested", SUGGESTED, None, "require", 5,
             "applying a change a report suggested"),
    SeedRule("default.catch-all", "*", None, "require", 10000, "using the tool {tool}"),
)  # fmt: skip
