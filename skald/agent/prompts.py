"""Agents as data: loading `agents/<id>/` definitions and composing their system prompts.

An agent is a folder holding `meta.json` (id, display name, type, description, the
shared fragments it includes, optional model strength and tool allow-list) and
`AGENT.md` (its instructions). Two kinds of markers may appear in the Markdown:

- `{{include:NAME}}` alone on a line pulls in `agents/common/NAME.md`. Fragments may
  include other fragments; a cycle is an error. Includes are resolved first. A prompt
  may be composed in variants (Skald's compact profile for small models), folders
  under `common/` tried in order: `common/<variant>/NAME.md` stands in for `NAME.md`
  where it exists (an empty one drops the fragment); AGENT.md is the same in all.
- `<!-- NAME -->` (upper-case) is a placeholder filled at run time with a complete block
  (heading included) or with nothing. Values are substituted in one pass, so text inside a
  value is never read as a marker. A line left empty by placeholders is dropped.

Which names exist and what fills them is the caller's business (Skald's features declare
and fill theirs, `skald/core/prompt_blocks.py`): this module knows no placeholder by name.

Everything else is copied into the prompt as written, so fragments carry no comments.
Content that changes more often belongs lower in a prompt: the provider caches the
longest unchanged prefix, so values that change often go in placeholders placed last.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Annotated, Final, Literal

import msgspec

from skald.errors import SkaldError

AgentType = Literal["chat", "task", "system"]
ModelStrength = Literal["low", "average", "high"]

META_FILE: Final = "meta.json"
PROMPT_FILE: Final = "AGENT.md"
COMMON_DIR: Final = "common"
DEFAULT_CHAT_AGENT: Final = "assistant"
MAX_INCLUDE_DEPTH: Final = 8

# The tag the harness wraps around context it adds to a message (attachments, what the
# user is looking at...). The fragments name it literally; untrusted text goes through
# `defuse_harness_tags` so that only the harness can write one.
HARNESS_TAG: Final = "skald-context"

_ID = r"^[a-z0-9][a-z0-9-]{0,47}$"
_FRAGMENT = re.compile(r"[a-z0-9][a-z0-9_-]{0,47}")
_HARNESS_TAG_TEXT = re.compile(rf"<(/?\s*{HARNESS_TAG})", re.IGNORECASE)
_INCLUDE_LINE = re.compile(r"^\s*\{\{\s*include\s*:\s*(?P<name>[^{}]*?)\s*\}\}\s*$")
PLACEHOLDER_NAME: Final = re.compile(r"[A-Z][A-Z0-9_]*")
_PLACEHOLDER = re.compile(rf"<!--\s*(?P<name>{PLACEHOLDER_NAME.pattern})\s*-->")

AgentId = Annotated[str, msgspec.Meta(pattern=_ID)]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1, max_length=2000)]
ToolName = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
# An emoji or a few letters shown on the Agents page (no spaces or control characters).
Icon = Annotated[str, msgspec.Meta(min_length=1, max_length=16, pattern=r"^[^\s\x00-\x1f]+$")]
Language = Annotated[str, msgspec.Meta(pattern=r"^[a-z]{2}$")]
Friendly = Annotated[str, msgspec.Meta(min_length=1, max_length=300)]
# A note injected into the agent's prompt: user-memory/… or shared-memory/…, a .md file.
NotePathText = Annotated[
    str,
    msgspec.Meta(
        max_length=300,
        pattern=r"^(user|shared)-memory/(?!(.*/)?\.\.?(/|$))[^\x00-\x1f\\]+\.md$",
    ),
]
MAX_INJECTED_NOTES: Final = 8


class AgentDefinitionError(SkaldError):
    """A shipped or installed agent definition is broken; the message names the file."""

    code = "bad_agent_definition"


class AgentDef(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The contents of an agent's `meta.json`.

    `includes` lists, in order, the fragments its AGENT.md includes directly (checked at
    load). `tools` absent means every tool the session offers; an empty list means none.
    Unknown fields are refused so that a misspelt `tools` never silently grants all.
    """

    id: AgentId
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=80)]
    type: AgentType
    description: NonEmpty
    includes: tuple[str, ...] = ()
    model_strength: ModelStrength | None = None
    tools: tuple[ToolName, ...] | None = None
    # For people (issue 31): an icon, and a friendly description per language ("en",
    # "it", ...), shown on the Agents page instead of `description` when there is one.
    icon: Icon | None = None
    about: dict[Language, Friendly] | None = None
    # Notes whose text goes into this agent's prompt, in order (at most 8).
    inject_memory: tuple[NotePathText, ...] = ()
    # Not a meta.json field: the folder of an operator-added agent (`load_agents`);
    # None for a shipped one (under the agents root).
    home: str | None = None


# -- loading -----------------------------------------------------------------------------


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AgentDefinitionError(f"{path} is missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentDefinitionError(f"{path} cannot be read: {exc}") from exc


def _include_name(line: str, path: Path, lineno: int) -> str | None:
    """The fragment an include line names, None for an ordinary line."""
    if "{{" not in line or "include" not in line:
        return None
    found = _INCLUDE_LINE.match(line)
    if found is None:
        raise AgentDefinitionError(
            f"{path} line {lineno}: an include must stand alone on its line as {{{{include:NAME}}}}"
        )
    name = found["name"]
    if not _FRAGMENT.fullmatch(name):
        raise AgentDefinitionError(
            f"{path} line {lineno}: {name!r} is not a fragment name "
            "(lower-case letters, digits, '-' and '_')"
        )
    return name


def direct_includes(text: str, path: Path) -> list[str]:
    """The fragments a piece of agent Markdown includes itself (not transitively)."""
    names = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        name = _include_name(line, path, lineno)
        if name is not None:
            names.append(name)
    return names


Stamp = tuple[int, int, int, int] | None


def _stamp(path: Path) -> Stamp:
    """What changes when a file is edited or replaced (None: it cannot be read)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


Variants = tuple[str, ...]


def _fragment(root: Path, name: str, variants: Variants) -> Path:
    """The file an include of `name` reads: the first variant's own, else the plain one."""
    for variant in variants:
        own = root / COMMON_DIR / variant / f"{name}.md"
        if own.is_file():
            return own
    return root / COMMON_DIR / f"{name}.md"


def _expand(
    root: Path,
    text: str,
    path: Path,
    chain: tuple[str, ...],
    seen: list[tuple[Path, Stamp]] | None = None,
    variants: Variants = (),
) -> list[str]:
    out: list[str] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        name = _include_name(line, path, lineno)
        if name is None:
            out.append(line)
            continue
        if name in chain:
            cycle = " -> ".join((*chain[chain.index(name) :], name))
            raise AgentDefinitionError(f"{path} line {lineno}: include cycle {cycle}")
        if len(chain) >= MAX_INCLUDE_DEPTH:
            raise AgentDefinitionError(
                f"{path} line {lineno}: includes nested deeper than {MAX_INCLUDE_DEPTH}"
            )
        fragment = _fragment(root, name, variants)
        if not fragment.is_file():
            raise AgentDefinitionError(
                f"{path} line {lineno}: includes {name!r} but {fragment} does not exist"
            )
        if seen is not None:
            seen.append((fragment, _stamp(fragment)))
        body = _read(fragment).rstrip("\n")
        if body:
            out.extend(_expand(root, body, fragment, (*chain, name), seen, variants))
    return out


def resolve_includes(
    agent: AgentDef,
    root: Path,
    seen: list[tuple[Path, Stamp]] | None = None,
    variants: Variants = (),
) -> str:
    """The agent's AGENT.md with every include expanded (placeholders still in place).

    `seen` collects every file read, each stamped (`_stamp`) before it was read. Trap:
    a variant's fragment added later is not noticed by the cache (it watches only the
    files it read): the variants ship with the release.
    """
    path = agent_folder(agent, root) / PROMPT_FILE
    if seen is not None:
        seen.append((path, _stamp(path)))
    return "\n".join(_expand(root, _read(path), path, (), seen, variants)) + "\n"


# A file changed this recently may change again within the same timestamp tick without
# its stamp changing: such a text is used but not kept.
SETTLED_AFTER_S: Final = 2.0


class _Resolved(msgspec.Struct, frozen=True):
    files: tuple[tuple[Path, Stamp], ...]
    text: str


def _resolve_stamped(
    agent: AgentDef, root: Path, variants: Variants
) -> tuple[str, _Resolved | None]:
    seen: list[tuple[Path, Stamp]] = []
    text = resolve_includes(agent, root, seen, variants)
    settled = time.time_ns() - int(SETTLED_AFTER_S * 1e9)
    if any(stamp is None or stamp[0] > settled or stamp[1] > settled for _, stamp in seen):
        return text, None
    return text, _Resolved(tuple(seen), text)


class PromptCache:
    """Agents' AGENT.md with includes resolved, kept while none of their files changed.

    Every use checks each file the text was made from with one `stat()` (metadata only,
    done on the event loop: microseconds); only when one changed (edited, replaced,
    removed) are the files read and expanded again, in a thread. So an edited AGENT.md
    or fragment applies from the next turn on, as without the cache.
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[Path, str, Variants], _Resolved] = {}

    def _cached(self, key: tuple[Path, str, Variants]) -> str | None:
        entry = self._entries.get(key)
        if entry is None or any(_stamp(path) != stamp for path, stamp in entry.files):
            return None
        return entry.text

    async def resolved(self, agent: AgentDef, root: Path, variants: Variants = ()) -> str:
        """`resolve_includes(agent, root, variants=variants)`, from memory while its
        files are unchanged."""
        key = (root, agent.id, variants)
        cached = self._cached(key)
        if cached is not None:
            return cached
        text, entry = await asyncio.to_thread(_resolve_stamped, agent, root, variants)
        if entry is None:
            self._entries.pop(key, None)
        else:
            self._entries[key] = entry
        return text

    async def compose(
        self,
        agent: AgentDef,
        root: Path,
        values: Mapping[str, str],
        variants: Variants = (),
    ) -> str:
        """`compose_prompt(agent, root, values)` through the cache (in `variants`)."""
        return fill_placeholders(await self.resolved(agent, root, variants), values)


def agent_folder(agent: AgentDef, root: Path) -> Path:
    """Where the agent's own files are: its operator folder, else `root/<id>`."""
    return Path(agent.home) if agent.home is not None else root / agent.id


def _load_one(root: Path, folder: Path, operator: bool = False) -> AgentDef:
    meta_path = folder / META_FILE
    if not meta_path.is_file():
        raise AgentDefinitionError(f"{meta_path} is missing (every agent folder needs one)")
    try:
        agent = msgspec.json.decode(_read(meta_path), type=AgentDef)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise AgentDefinitionError(f"{meta_path}: {exc}") from None
    if agent.home is not None:
        raise AgentDefinitionError(f"{meta_path}: 'home' is not a meta.json field")
    if len(agent.inject_memory) > MAX_INJECTED_NOTES:
        raise AgentDefinitionError(
            f"{meta_path}: inject_memory lists more than {MAX_INJECTED_NOTES} notes"
        )
    if len(set(agent.inject_memory)) != len(agent.inject_memory):
        raise AgentDefinitionError(f"{meta_path}: a note is listed twice in inject_memory")
    if agent.about is not None and not agent.about:
        raise AgentDefinitionError(f"{meta_path}: about is empty; leave it out or add a language")
    if operator:
        agent = msgspec.structs.replace(agent, home=str(folder))
    if agent.id != folder.name:
        raise AgentDefinitionError(
            f"{meta_path}: id {agent.id!r} must match its folder name {folder.name!r}"
        )
    for name in agent.includes:
        if not _FRAGMENT.fullmatch(name):
            raise AgentDefinitionError(f"{meta_path}: {name!r} is not a fragment name")
    if agent.tools is not None and len(set(agent.tools)) != len(agent.tools):
        raise AgentDefinitionError(f"{meta_path}: a tool is listed twice")
    prompt_path = folder / PROMPT_FILE
    if not prompt_path.is_file():
        raise AgentDefinitionError(f"{prompt_path} is missing (every agent folder needs one)")
    text = _read(prompt_path)
    if not text.strip():
        raise AgentDefinitionError(f"{prompt_path} is empty")
    used = direct_includes(text, prompt_path)
    if used != list(agent.includes):
        raise AgentDefinitionError(
            f"{meta_path}: includes {list(agent.includes)} but {prompt_path} includes {used}; "
            "list the same fragments in the same order"
        )
    resolve_includes(agent, root)  # every fragment exists, no cycles
    return agent


def load_agents(root: Path) -> dict[str, AgentDef]:
    """Every agent under `root` (one folder each; `common/` holds fragments), by id.

    Any broken definition fails the whole load with an error naming the file: agents are
    shipped with the release, so a broken one is a packaging bug to catch at boot.
    """
    if not root.is_dir():
        raise AgentDefinitionError(f"agent directory {root} does not exist")
    agents: dict[str, AgentDef] = {}
    for folder in sorted(root.iterdir()):
        if not folder.is_dir() or folder.name == COMMON_DIR or folder.name[0] in "._":
            continue
        agent = _load_one(root, folder)
        agents[agent.id] = agent
    return agents


def load_operator_agents(
    root: Path, added: Path, shipped: Collection[str]
) -> tuple[dict[str, AgentDef], list[AgentDefinitionError]]:
    """The agents an operator put in `added` (the data directory's `agents/`), checked
    as the shipped ones are, their includes read from the shipped `root/common/`.

    Unlike a shipped agent, a broken one does not stop the start: it is left out and its
    error returned (the caller logs it), so one typo never takes the assistant down. An
    id a shipped agent has is refused (an update could not tell them apart)."""
    found: dict[str, AgentDef] = {}
    broken: list[AgentDefinitionError] = []
    if not added.is_dir():
        return found, broken
    for folder in sorted(added.iterdir()):
        if not folder.is_dir() or folder.name == COMMON_DIR or folder.name[0] in "._":
            continue
        try:
            agent = _load_one(root, folder, operator=True)
            if agent.id in shipped:
                raise AgentDefinitionError(
                    f"{folder}: an agent called {agent.id!r} ships with Skald; give yours "
                    "another id (folder and meta.json)"
                )
        except AgentDefinitionError as exc:
            broken.append(exc)
            continue
        found[agent.id] = agent
    return found, broken


def default_chat_agent(role_attrs_default: str, agents: Mapping[str, AgentDef]) -> AgentDef:
    """The chat agent a role names, or `assistant` when that one is missing or not chat."""
    chosen = agents.get(role_attrs_default)
    if chosen is not None and chosen.type == "chat":
        return chosen
    fallback = agents.get(DEFAULT_CHAT_AGENT)
    if fallback is None or fallback.type != "chat":
        raise AgentDefinitionError(f"the default chat agent {DEFAULT_CHAT_AGENT!r} is missing")
    return fallback


# -- composing ---------------------------------------------------------------------------


def placeholders_in(text: str) -> list[str]:
    """Placeholder names in order of first appearance."""
    return list(dict.fromkeys(m["name"] for m in _PLACEHOLDER.finditer(text)))


def unknown_placeholders(agent: AgentDef, root: Path, known: Collection[str]) -> list[str]:
    """Placeholders the agent uses (includes resolved) that are not in `known` (the names
    the caller fills; Skald's come from the features' `skald_placeholders`)."""
    return [n for n in placeholders_in(resolve_includes(agent, root)) if n not in known]


def fill_placeholders(text: str, values: Mapping[str, str]) -> str:
    """Substitute placeholders in one pass; missing or unknown ones become empty."""
    lines = []
    for part in _template(text):
        if isinstance(part, str):
            lines.append(part)
            continue
        line, bare = part
        filled = _PLACEHOLDER.sub(lambda m: values.get(m["name"], ""), line)
        if filled != line and not filled.strip() and not bare:
            continue  # a line of placeholders that all rendered empty
        lines.append(filled)
    return _one_blank_line("\n".join(lines)).strip() + "\n"


def _one_blank_line(text: str) -> str:
    r"""Every run of three or more line breaks as two, as `re.sub(r"\n{3,}", "\n\n", text)`
    would, but that regex tries every position (70 us on a 7 KB prompt, every turn) where
    splitting at the runs is done at C speed. The line breaks next to a cut belong to it."""
    pieces = text.split("\n\n\n")
    if len(pieces) == 1:
        return text
    middle = (p.strip("\n") for p in pieces[1:-1])  # empty: the same run went on
    return "\n\n".join([pieces[0].rstrip("\n"), *(p for p in middle if p), pieces[-1].lstrip("\n")])


@functools.lru_cache(maxsize=32)
def _template(text: str) -> tuple[str | tuple[str, str], ...]:
    """`text` cut once for `fill_placeholders` (every turn fills the same agent's text):
    each run of lines without a placeholder joined (a str), and each line that may hold
    one as (the line, what is left of it without its placeholders, stripped)."""
    parts: list[str | tuple[str, str]] = []
    plain: list[str] = []
    for line in text.split("\n"):
        if "<!--" not in line:
            plain.append(line)
            continue
        if plain:
            parts.append("\n".join(plain))
            plain = []
        parts.append((line, _PLACEHOLDER.sub("", line).strip()))
    if plain:
        parts.append("\n".join(plain))
    return tuple(parts)


def compose_prompt(agent: AgentDef, root: Path, values: Mapping[str, str]) -> str:
    """The agent's system prompt: includes resolved, then placeholders filled."""
    return fill_placeholders(resolve_includes(agent, root), values)


# -- harness hygiene -----------------------------------------------------------------


def one_line(text: str) -> str:
    """`text` with every run of white space, line breaks included, as one space: what
    members wrote (a name, a description, a search snippet) then stands in a prompt as
    one line and cannot start a heading or a line of its own."""
    return " ".join(text.split())


def defuse_harness_tags(text: str) -> str:
    """Make `<skald-context>` in untrusted text (a message, a tool result) inert.

    The prompts tell the model that only Skald writes these blocks; that stays true only
    if everything else that could contain the tag goes through here first.
    """
    return _HARNESS_TAG_TEXT.sub(lambda m: "‹" + m[1], text)
