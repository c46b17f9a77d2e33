"""The conversation review as a system agent: once per supervised member, in the runtime
of one of their supervisors, no tools, nothing stored but the report.

Rule: the acting supervisor for a subject is the first of their supervisors (oldest
link first) whose data is unlocked, so a pass runs once per subject whichever parent
signs in, and a locked parent is skipped until they unlock. The subject is reachable
when their data is open and, for an encrypted account, only when they chose "let my
assistant work while I'm signed out" (their own opt-in; children's accounts are not
encrypted). A pass reads the window `[covered_through, now)` (audited before the model
sees it), asks the model once (strength `high`, no tools, no stored conversation), and
then: `NOTHING_TO_REPORT` writes nothing; a report is redacted and checked (a leak
fails the pass for that subject with the reason, nothing stored); only a completed pass
moves the coverage to `now`.

Trap: the model call is the slow part; everything before it is bounded by the budget
(the transcript is read newest first and stops there), so a month of messages costs
what fits in the model's context, not the month.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

from skald.core.model_select import compact_threshold
from skald.core.prompt_blocks import profile_block
from skald.errors import SkaldError
from skald.features.review.redact import find_identifiers, leaks, redact
from skald.features.review.store import AuditLine, ReviewStore
from skald.features.review.transcript import Transcript, has_lines, read_window, render
from skald.llm.client import ModelClient
from skald.llm.types import Finished, Message, Request, TextDelta, TextPart
from skald.log import get_logger
from skald.plugins.facade import Member, Server
from skald.plugins.specs import AgentRun, NewReport
from skald.store.llm import ModelRow
from skald.store.people import MemberProfile, profile_of, supervised_by, supervisors_of
from skald.store.registry import now_iso

__all__ = ["AGENT_ID", "ConversationReview", "ReviewFailed"]

log = get_logger("skald.features.review")

AGENT_ID = "conversation-review"
QUIET = "NOTHING_TO_REPORT"
PROMPT = (Path(__file__).parent / "prompt.md").read_text(encoding="utf-8")
# Characters per token (the rough estimate used elsewhere), and the budget when no
# model says how large its context is.
CHARS_PER_TOKEN = 4
DEFAULT_PROMPT_TOKENS = 24_000
ANSWER_TOKENS = 2_000


class ReviewFailed(SkaldError):
    """A pass that must not store what it produced (a leak, an answer that is no report)."""


@dataclass(frozen=True)
class Subject:
    id: str
    member: Member


def subject_block(p: MemberProfile, today: date) -> str:
    """The subject as the member's own prompt describes them (the same `profile_block`),
    without its heading: the reviewer is not talking with them."""
    block = profile_block(p.display_name, {}, p.locale, directory=p.directory, today=today)
    return block.split("\n", 1)[1]


def parse_report(answer: str) -> tuple[str, str, str, bool] | None:
    """(title, summary, body, worth attention) from the model's report; None when quiet."""
    text = answer.strip()
    if text == QUIET:
        return None
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# "):
        raise ReviewFailed("the model's answer was not a report (no title line): nothing stored")
    title = lines[0][2:].strip()[:200]
    body = "\n".join(lines[1:]).strip()
    summary = body.split("\n## ", 1)[0].strip()
    attention = "## Worth your attention" in body
    if not title or not summary:
        raise ReviewFailed("the model's report had no title or no summary: nothing stored")
    return title, summary[:1000], body, attention


class ConversationReview:
    id = AGENT_ID
    scope = "member"
    interval_s = 24 * 3600

    def __init__(self, server: Server) -> None:
        self.server = server
        self.store = ReviewStore(server.db)

    async def subjects(self, acting: Member) -> list[Subject]:
        """The members this one reviews now: those they supervise whose first unlocked
        supervisor they are, and whose data the review may open."""
        out = []
        for subject_id in await supervised_by(self.server.db, acting.id):
            supervisors = await supervisors_of(self.server.db, subject_id)
            first = next((s for s in supervisors if self.server.member(s) is not None), None)
            if first != acting.id:
                continue
            member = self.server.member(subject_id)
            if member is None or (
                member.user.encrypted and not self.server.works_signed_out(subject_id)
            ):
                log.info("review skipped: subject's data not open to it", user_id=subject_id)
                continue
            out.append(Subject(subject_id, member))
        return out

    async def has_work(self, run: AgentRun) -> bool:
        until = now_iso()
        for subject in await self.subjects(run.member):
            since = await self.store.covered_through(subject.id)
            if await has_lines(subject.member.db, since, until):
                return True
        return False

    async def run(self, run: AgentRun) -> dict[str, int]:
        stats = {"subjects": 0, "messages": 0, "reports": 0, "quiet": 0, "failed": 0}
        failures = []
        for subject in await self.subjects(run.member):
            try:
                await self._review(run, subject, stats)
            except (ReviewFailed, SkaldError) as exc:
                stats["failed"] += 1
                failures.append(str(exc))
        if failures:
            raise ReviewFailed("; ".join(failures))
        return stats

    async def _review(self, run: AgentRun, subject: Subject, stats: dict[str, int]) -> None:
        since = await self.store.covered_through(subject.id)
        until = now_iso()
        source = await self.server.llm.source(run.member.id, strength="high")
        budget = self._budget([m for m, _ in source.candidates])
        transcript = await read_window(subject.member.db, since, until, budget)
        if not transcript.lines:
            await self.store.advance(subject.id, until)
            return
        stats["subjects"] += 1
        stats["messages"] += len(transcript.lines)
        await self.store.audit(
            AuditLine(
                subject_id=subject.id,
                reader_id=run.member.id,
                window_start=since,
                window_end=until,
                messages=len(transcript.lines),
                at=now_iso(),
            )
        )
        today = datetime.now(subject.member.timezone()).date()
        profile = await profile_of(self.server.db, subject.id, today)
        answer = await self._ask(source, subject_block(profile, today), since, until, transcript)
        parsed = parse_report(answer)
        if parsed is None:
            stats["quiet"] += 1
        else:
            await self._store(run, subject, parsed, since, until, transcript)
            stats["reports"] += 1
        await self.store.advance(subject.id, until)

    def _budget(self, models: list[ModelRow]) -> int:
        window = compact_threshold(models, ANSWER_TOKENS, DEFAULT_PROMPT_TOKENS)
        tokens = (window or DEFAULT_PROMPT_TOKENS) - len(PROMPT) // CHARS_PER_TOKEN - 500
        return max(tokens, 1000) * CHARS_PER_TOKEN

    async def _ask(
        self,
        source: ModelClient,
        subject: str,
        since: str | None,
        until: str,
        transcript: Transcript,
    ) -> str:
        system = PROMPT.replace("{SUBJECT_PROFILE}", subject)
        window = f"from {since or 'their first message'} to {until} (UTC)"
        trigger = f"The window under review: {window}.\n\n---\n\n{render(transcript)}"
        request = Request(
            model="",
            messages=[
                Message(role="system", content=[TextPart(text=system)]),
                Message(role="user", content=[TextPart(text=trigger)]),
            ],
            max_tokens=ANSWER_TOKENS,
        )
        parts: list[str] = []
        async for event in source.stream(request):
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, Finished) and event.reason == "length":
                raise ReviewFailed("the model's report was cut off at its length limit")
        return "".join(parts)

    async def _store(
        self,
        run: AgentRun,
        subject: Subject,
        parsed: tuple[str, str, str, bool],
        since: str | None,
        until: str,
        transcript: Transcript,
    ) -> None:
        title, summary, body, attention = parsed
        known = find_identifiers("\n".join(line.text for line in transcript.lines))
        title, summary, body = redact(title), redact(summary), redact(body)
        if found := leaks("\n".join((title, summary, body)), known):
            raise ReviewFailed(
                f"the report still contained {', '.join(found)} after redaction: not stored"
            )
        await run.report(
            NewReport(
                title=title,
                summary=summary,
                body=body,
                severity="alert" if attention else "info",
                audience="supervisors",
                subject_id=subject.id,
                period_start=since,
                period_end=until,
            )
        )
