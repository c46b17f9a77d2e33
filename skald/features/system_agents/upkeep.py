"""Memory upkeep: a weekly look over the notes for contradictions, stale facts,
duplicates and broken links, reported (never repaired).

One implementation, two instances that differ only by fields: `memory-upkeep` (scope
`member`: the member's own `user-memory/`, in their runtime) and
`household-memory-upkeep` (scope `household`: the shared `shared-memory/`, run as the
first active unlocked admin; its report is for the admins).

Rule: report only, enforced twice. The prompt says so, and the pass runs behind
`ReportOnlyGate`: a call that writes (any `@fs_write`, any tool that is no reader) is
denied before the member's rules are even asked, and counted (`writes_denied` in the
run's counters, a WARNING line); a read outside the instance's own store is denied the
same way (the household pass runs as an admin, whose private notes are not its
business). Everything else goes to the member's unattended gate, which refuses at once
whatever would ask a person. What the model finds it hands to `report_finding`; the
pass stores one report with every finding and the edit that would fix it, which a
reader accepts on the Reports page (an approval request, never a direct write).

Trap: a household report is read by every admin, and restating a sensitive line is the
harm being flagged: the prompt asks for which note and what kind of problem, and any
line of a note (20 characters or more) that the model copied into its words anyway is
replaced before the report is stored.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

from skald.agent import (
    Allow,
    ApprovalOutcome,
    ApprovalRequest,
    Decision,
    Deny,
    LoopConfig,
    MemoryHistory,
    Rejected,
    Tool,
    ToolContext,
    ToolResult,
)
from skald.agent.loop import AgentLoop
from skald.agent.tools import FS_WRITE
from skald.approvals.rules import normalise_path
from skald.core.approvals import UNATTENDED_REASON, facts_of
from skald.errors import SkaldError
from skald.files.tools import memory_tools
from skald.llm.types import ToolCall, tool_spec
from skald.log import get_logger
from skald.plugins.facade import Member, Server
from skald.plugins.specs import AgentRun, NewReport, Suggestion
from skald.store.notes import NoteInfo
from skald.store.owner import OwnerStore

__all__ = ["KINDS", "MemoryUpkeep", "ReportOnlyGate", "UpkeepFailed"]

log = get_logger("skald.features.system_agents.upkeep")

Store = Literal["user-memory", "shared-memory"]
KINDS: Final = ("contradiction", "stale", "duplicate", "broken_link")
WEEK_S: Final = 7 * 24 * 3600
PROMPT: Final = (Path(__file__).parent / "upkeep.md").read_text(encoding="utf-8")
REPORT_ONLY: Final = "memory upkeep only reports: it never changes a note"
MAX_FINDINGS: Final = 50
MAX_LISTED: Final = 300
MAX_INDEX_CHARS: Final = 8000
QUOTE_MIN: Final = 20  # a household note's line this long is never repeated in a report
KIND_WORDS: Final = {
    "contradiction": "Contradiction",
    "stale": "Stale fact",
    "duplicate": "Duplicate",
    "broken_link": "Broken link",
}


class UpkeepFailed(SkaldError):
    """A pass that ended without a usable answer (the model failed or stopped)."""


class Finding:
    def __init__(self, kind: str, notes: list[str], problem: str, suggestion: str) -> None:
        self.kind = kind
        self.notes = notes
        self.problem = problem
        self.suggestion = suggestion
        self.edit: Suggestion | None = None


class ReportOnlyGate:
    """The pass's gate: no write ever, no read outside `store`, the rest to `inner` (the
    member's unattended gate). Denied writes are counted in `writes_denied`."""

    def __init__(self, inner: Any, store: Store) -> None:
        self.inner = inner
        self.store = store
        self.writes_denied = 0
        self.outside_denied = 0

    def _mine(self, path: str | None) -> bool:
        return path is not None and (path == self.store or path.startswith(self.store + "/"))

    async def check(self, call: ToolCall, tool: Tool, ctx: ToolContext) -> Decision:
        if tool.name == FindingTool.spec.name:
            return Allow()
        facts = facts_of(call, tool)
        if FS_WRITE in facts.categories or tool.kind != "read":
            self.writes_denied += 1
            log.warning(
                "memory upkeep tried to write: denied",
                tool=call.name,
                path=facts.path,
                store=self.store,
            )
            return Deny(REPORT_ONLY)
        if call.name == "memory_search":
            within = call.arguments.get("store") == self.store
        else:
            within = self._mine(normalise_path(_first_path(tool, call.arguments)))
        if not within:
            self.outside_denied += 1
            return Deny(f"memory upkeep reads {self.store}/ only")
        decision: Decision = await self.inner.check(call, tool, ctx)
        return decision

    async def wait(self, request: ApprovalRequest) -> ApprovalOutcome:
        # Nobody is there: never ask a person, whatever the inner gate would do.
        return Rejected(UNATTENDED_REASON)


def _first_path(tool: Tool, args: Mapping[str, Any]) -> str | None:
    paths = tool.touches(args).paths
    return str(paths[0]) if paths else None


class FindingTool(Tool):
    """`report_finding`: how the model hands over one problem (it touches nothing)."""

    kind = "read"
    spec = tool_spec(
        "report_finding",
        "Report one problem found in the notes (the only way to report; nothing is changed).",
        {
            "kind": {"type": "string", "enum": list(KINDS)},
            "notes": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The full paths of the notes involved.",
            },
            "problem": {"type": "string", "description": "The problem, in plain words."},
            "suggestion": {"type": "string", "description": "What you would change."},
            "note": {"type": "string", "description": "The note one exact edit would fix."},
            "old_text": {"type": "string", "description": "Text in that note now, exactly."},
            "new_text": {"type": "string", "description": "What should stand there instead."},
        },
        ["kind", "notes", "problem", "suggestion"],
    )

    def __init__(self, store: Store) -> None:
        self.store = store
        self.findings: list[Finding] = []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        kind = str(args.get("kind", ""))
        if kind not in KINDS:
            return ToolResult.error(f"kind is one of {', '.join(KINDS)}")
        raw_notes = args.get("notes")
        notes = [str(n) for n in raw_notes] if isinstance(raw_notes, list) else []
        notes = [n for n in (normalise_path(n) for n in notes) if n is not None]
        if not notes or any(not n.startswith(self.store + "/") for n in notes):
            return ToolResult.error(f"notes names the notes involved, each under {self.store}/")
        problem = str(args.get("problem", "")).strip()[:1000]
        suggestion = str(args.get("suggestion", "")).strip()[:1000]
        if not problem:
            return ToolResult.error("problem says what is wrong")
        if len(self.findings) >= MAX_FINDINGS:
            return ToolResult.error(f"at most {MAX_FINDINGS} findings in one pass")
        finding = Finding(kind, notes[:10], problem, suggestion)
        note = normalise_path(str(args.get("note") or "")) if args.get("note") else None
        old, new = str(args.get("old_text") or ""), str(args.get("new_text") or "")
        if note is not None and note.startswith(self.store + "/") and old and old != new:
            finding.edit = Suggestion(
                kind=kind, note=note, text=suggestion or problem, old_text=old, new_text=new
            )
        self.findings.append(finding)
        return ToolResult(content=f"Finding {len(self.findings)} noted.")


async def _silent(_: object) -> None:
    return None


class MemoryUpkeep:
    """One instance per store (`private` / `household`); see the module's docstring."""

    def __init__(self, server: Server, store: Store) -> None:
        self.server = server
        self.store: Store = store
        self.household = store == "shared-memory"
        self.id = "household-memory-upkeep" if self.household else "memory-upkeep"
        self.scope = "household" if self.household else "member"
        self.interval_s = WEEK_S

    @classmethod
    def private(cls, server: Server) -> MemoryUpkeep:
        return cls(server, "user-memory")

    @classmethod
    def shared(cls, server: Server) -> MemoryUpkeep:
        return cls(server, "shared-memory")

    def _notes(self, member: Member) -> Any:
        return self.server.shared_memory if self.household else OwnerStore(member.db)

    async def notes(self, member: Member) -> list[NoteInfo]:
        listed: list[NoteInfo] = await self._notes(member).note_list()
        return listed

    async def has_work(self, run: AgentRun) -> bool:
        # Nothing to look at: no run row and no weekly report for a member without notes.
        return bool(await self.notes(run.member))

    async def run(self, run: AgentRun) -> dict[str, int]:
        member = run.member
        listed = await self.notes(member)
        store = self._notes(member)
        finder = FindingTool(self.store)
        gate = ReportOnlyGate(member.unattended_gate, self.store)
        tools = [
            *memory_tools(
                OwnerStore(member.db),
                self.server.shared_memory,
                member.id,
                shared_readable=self.household,
                budget=member.budget,
                mounts=member.mounts,
            ),
            finder,
        ]
        source = await self.server.llm.source(member.id, strength="average")
        loop = AgentLoop(
            source,
            tools,
            MemoryHistory(f"system-agent-{self.id}-{secrets.token_hex(4)}"),
            gate,
            _silent,
            LoopConfig(
                model="auto", system_prompt=await self._prompt(store, listed), max_rounds=30
            ),
        )
        result = await loop.run_turn("Look over the notes now and report what you find.")
        stats = {
            "notes": len(listed),
            "findings": len(finder.findings),
            "writes_denied": gate.writes_denied,
            "reads_denied": gate.outside_denied,
            "reports": 0,
        }
        if result.status != "done":
            raise UpkeepFailed(result.error or f"the pass ended {result.status}")
        if finder.findings:
            await run.report(await self._report(store, listed, finder.findings))
            stats["reports"] = 1
        return stats

    async def _prompt(self, store: Any, listed: list[NoteInfo]) -> str:
        index = (
            await store.note_get("index.md") if any(n.path == "index.md" for n in listed) else ""
        )
        listing = "\n".join(
            f"- {self.store}/{n.path} ({n.size} bytes, updated {n.updated_at})"
            for n in listed[:MAX_LISTED]
        )
        if len(listed) > MAX_LISTED:
            listing += f"\n- … and {len(listed) - MAX_LISTED} more (use list_files)"
        if self.household:
            who = "the household's shared notes, which every member's assistant reads"
            reader = "the household's administrators"
            privacy = (
                "\nThese notes are shared: name the note and the kind of problem, and never "
                "copy a line of a note into `problem` or `suggestion` (a line that should not "
                "be there must not be repeated in the report either).\n"
            )
        else:
            who = "one member's private notes"
            reader = "that member"
            privacy = ""
        return (
            PROMPT.replace("{STORE_WHO}", who)
            .replace("{READER}", reader)
            .replace("{PRIVACY}", privacy)
            .replace("{STORE}", self.store)
            .replace("{INDEX}", (index or "(file not created yet)")[:MAX_INDEX_CHARS])
            .replace("{LISTING}", listing)
        )

    async def _report(self, store: Any, listed: list[NoteInfo], found: list[Finding]) -> NewReport:
        lines: set[str] = set()
        if self.household:
            for info in listed:
                text = await store.note_get(info.path)
                for raw in text.splitlines():
                    line = raw.strip().lstrip("#-*> ").rstrip(".,;:!? ")
                    if len(line) >= QUOTE_MIN:
                        lines.add(line)
        quoted = [
            re.compile(re.escape(line), re.IGNORECASE)
            for line in sorted(lines, key=len, reverse=True)
        ]

        def said(text: str) -> str:
            for pattern in quoted:
                text = pattern.sub("[a line of the note]", text)
            return text

        counts: dict[str, int] = {}
        for f in found:
            counts[f.kind] = counts.get(f.kind, 0) + 1
        where = "the household's notes" if self.household else "your notes"
        title = f"Memory upkeep: {_plural(len(found), 'finding')} in {where}"
        summary = ", ".join(f"{KIND_WORDS[k]}: {n}" for k, n in counts.items())
        body = []
        suggestions = []
        for i, f in enumerate(found, start=1):
            body.append(f"### {i}. {KIND_WORDS[f.kind]}: {', '.join(f.notes)}")
            body.append(said(f.problem))
            if f.suggestion:
                body.append(f"Suggestion: {said(f.suggestion)}")
            body.append("")
            if f.edit is not None:
                suggestions.append(
                    Suggestion(
                        kind=f.kind,
                        note=f.edit.note,
                        text=said(f.edit.text),
                        old_text=f.edit.old_text,
                        new_text=f.edit.new_text,
                    )
                )
        return NewReport(
            title=title,
            summary=summary,
            body="\n".join(body).strip(),
            severity="notice",
            audience="admins" if self.household else "owner",
            suggestions=tuple(suggestions),
        )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
