"""The chat hub of one member: conversations, one FIFO queue and one consumer each.

Every message to a conversation goes through its queue, so turns, recoveries and
compactions of one conversation never overlap, while different conversations run side
by side. Every event goes to every open client of the member through the event hub;
the history in the owner database stays the authority (a client that missed events
re-reads it).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

import msgspec

from skald.agent import (
    AgentLoop,
    ApprovalRequested,
    Event,
    LoopConfig,
    ModelSwitched,
    ToolCallUpdate,
    ToolFinished,
    TurnDone,
    TurnResult,
    UsageReport,
)
from skald.agent.approval import ApprovalGate
from skald.agent.tools import Tool
from skald.core.events import ChatEvent, ConversationUpdated, EventHub, UserMessage
from skald.core.plain_errors import OWN_WORDS, plain
from skald.errors import InvalidInputError, SkaldError
from skald.llm.client import ModelClient
from skald.llm.errors import LlmError
from skald.llm.types import ContentPart, ImagePart, Interruption, Message, TextPart, VideoPart
from skald.log import get_logger
from skald.plugins.specs import AfterTurn, BeforeTurn
from skald.store.conversations import (
    Attachment,
    Claim,
    Conversation,
    ConversationStore,
    HistoryItem,
    OwnerHistory,
    display_text,
)
from skald.store.database import Database
from skald.store.registry import now_iso

log = get_logger("skald.chat")

JobKind = Literal["turn", "resume", "compact"]


@dataclass
class TurnJob:
    kind: JobKind
    message: Message | None = None
    attachments: list[Attachment] = field(default_factory=list)
    done: asyncio.Future[TurnResult] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    # The top-level tool calls that finished `done` while this message's turn ran (from
    # the moment it was taken in), as the clients saw them: `POST /api/chat` tells from
    # them which files the turn wrote, without reading the history again.
    finished: list[ToolCallUpdate] = field(default_factory=list)
    # How the message's conversation was when it was queued (`ChatHub.queue_message`).
    claim: Claim | None = None


@dataclass(frozen=True)
class TurnSetup:
    """What one turn runs with, assembled fresh for every turn (prompt, tools, model)."""

    model: ModelClient
    tools: list[Tool]
    gate: ApprovalGate
    config: LoopConfig


# The member's runtime provides this: everything about a turn that depends on the world
# outside the hub (which agent, which model, which tools, what the prompt says).
SetupFactory = Callable[[Conversation, tuple[str, ...]], Awaitable[TurnSetup]]
# The plugins' say before a turn (conversation id, the member's text) and after it
# (conversation id, the reply): skald_before_turn / skald_after_turn.
BeforeHook = Callable[[str, str], Awaitable[BeforeTurn]]
AfterHook = Callable[[str, str], Awaitable[AfterTurn]]
BLOCKED = "plugin_blocked"  # the failure code of a turn a plugin blocked (its reason shown)


class ConversationRunner:
    def __init__(self, hub: ChatHub, conversation_id: str) -> None:
        self.hub = hub
        self.conversation_id = conversation_id
        self.queue: asyncio.Queue[TurnJob] = asyncio.Queue()
        self.loop: AgentLoop | None = None
        # While a turn (or a resume) runs: messages sent meanwhile, which it takes in at
        # its next step (`_take_joined`); None when no running turn accepts them.
        self.joinable: list[TurnJob] | None = None
        self.joined: list[TurnJob] = []  # taken in by the running turn: they end with it
        self.current: TurnJob | None = None  # the job running now
        self.awaiting_approval = asyncio.Event()
        self.task = asyncio.create_task(self._consume(), name=f"chat-{conversation_id}")

    async def _consume(self) -> None:
        while True:
            job = await self.queue.get()
            self.current = job
            try:
                result = await self._execute(job)
            except Exception as exc:
                log.error(
                    "turn crashed", conversation=self.conversation_id, error=str(exc), exc_info=True
                )
                result = TurnResult(status="failed", error=f"the turn failed: {exc}")
                await self.hub.set_status(self.conversation_id, "idle")
            finally:
                self.current = None
            if not job.done.done():
                job.done.set_result(result)
            if self.queue.empty():
                # Idle: let go, so a member's many old conversations hold no tasks. A new
                # message makes a new runner (nothing can be queued here in between: the
                # hub looks the runner up and queues without yielding).
                self.hub.forget_runner(self)
                return

    async def _execute(self, job: TurnJob) -> TurnResult:
        # Marked running and read: by the message's own claim when no conversation was
        # written since (no trip), else here in one trip. A setup that fails sets it idle.
        claim = job.claim
        if claim is not None and self.hub.store.unchanged_since(claim):
            conversation = claim.conversation
        else:
            conversation = await self.hub.update(self.conversation_id, status="running")
        # Only a picture actually inlined needs a vision model (one no model can see was
        # sent as a note: see ConversationService._enqueue).
        parts = () if job.message is None else job.message.content
        needs = tuple(
            need
            for need, kind in (("vision", ImagePart), ("video", VideoPart))
            if any(isinstance(p, kind) for p in parts)
        )
        history = OwnerHistory(self.hub.db, self.conversation_id)
        history.pending_attachments = job.attachments
        before = BeforeTurn()
        if job.kind == "turn" and job.message is not None and self.hub.before_turn is not None:
            before = await self.hub.before_turn(self.conversation_id, display_text(job.message))
            if before.block is not None:
                # The member reads the plugin's reason (not replaced by a plain sentence).
                return await self._not_started(history, job, before.block, BLOCKED)
            if before.append:
                job.message = Message(
                    role="user", content=[*job.message.content, TextPart(text=before.append)]
                )
        try:
            setup = await self.hub.setup_factory(conversation, needs)
        except SkaldError as exc:
            code = exc.kind if isinstance(exc, LlmError) else exc.code
            return await self._not_started(history, job, str(exc), code)
        if before.system:
            prompt = f"{setup.config.system_prompt}\n\n{before.system}"
            config = msgspec.structs.replace(setup.config, system_prompt=prompt)
            setup = TurnSetup(model=setup.model, tools=setup.tools, gate=setup.gate, config=config)
        self.awaiting_approval.clear()
        joins = job.kind in ("turn", "resume")

        async def take_joined() -> Message | None:
            if not self.joinable:
                return None
            joined = self.joinable.pop(0)
            self.joined.append(joined)
            history.pending_attachments = joined.attachments
            return joined.message

        loop = AgentLoop(
            setup.model,
            setup.tools,
            history,
            setup.gate,
            self._sink,
            setup.config,
            joined=take_joined if joins else None,
        )
        self.loop = loop
        self.joinable = [] if joins else None
        try:
            result = await self._run(loop, job)
            if job.kind == "turn" and result.status == "done" and self.hub.after_turn is not None:
                result = await self._after(history, result)
        finally:
            self.loop = None
            self._end_joins()
        for joined in self.joined:
            if not joined.done.done():
                joined.done.set_result(result)
        self.joined = []
        # A deferred approval ends the turn but not the conversation's business.
        await self.hub.set_status(
            self.conversation_id,
            "awaiting_approval" if result.status == "awaiting_approval" else "idle",
        )
        return result

    async def _not_started(
        self, history: OwnerHistory, job: TurnJob, error: str, code: str
    ) -> TurnResult:
        """No turn could start (no usable model, a plugin blocked it...): keep the message
        and the failure (as an empty interrupted answer, like a failed turn), and say why
        to every client the same way a failed turn would."""
        if job.message is not None:
            await history.append(job.message)
            why = Interruption(code=code, detail=error)
            await history.append(Message(role="assistant", interrupted=why))
        await self._sink(
            TurnDone(
                conversation_id=self.conversation_id, status="failed", error=error, error_code=code
            )
        )
        await self.hub.set_status(self.conversation_id, "idle")
        return TurnResult(status="failed", error=error, error_code=code)

    async def _after(self, history: OwnerHistory, result: TurnResult) -> TurnResult:
        """The plugins' say on the answer: replaced, hidden ("suppressed") or with files
        attached; kept in the history and in the turn's result (`POST /api/chat`, the
        bridges). Trap: a web tab already showed the streamed answer; it reads the
        revised one when it loads the conversation again."""
        assert self.hub.after_turn is not None
        after = await self.hub.after_turn(self.conversation_id, result.text)
        if after.replace is None and not after.suppress and not after.attach:
            return result
        text = (
            "" if after.suppress else (after.replace if after.replace is not None else result.text)
        )
        await history.revise_reply(text, list(after.attach))
        return msgspec.structs.replace(result, text=text)

    async def _run(self, loop: AgentLoop, job: TurnJob) -> TurnResult:
        if job.kind == "turn":
            assert job.message is not None
            return await loop.run_turn(job.message)
        if job.kind == "resume":
            return await loop.resume()
        compacted = await loop.compact()
        note = "nothing to compact yet" if compacted is None else "the conversation was compacted"
        return TurnResult(status="done", text=note)

    async def _sink(self, event: Event) -> None:
        if isinstance(event, TurnDone) and event.status == "failed":
            event = self.hub.plain_failure(event)
        elif isinstance(event, ModelSwitched) and not self.hub.shows_detail():
            event = msgspec.structs.replace(event, reason="")  # may name a provider
        # Approvals and usage count at every depth: a helper's request waits for a person
        # just like the main agent's, and its tokens cost the same.
        if isinstance(event, ApprovalRequested):
            self.awaiting_approval.set()
            await self.hub.set_status(self.conversation_id, "awaiting_approval")
        elif isinstance(event, ToolCallUpdate):
            if event.status == "done" and event.depth == 0 and self.current is not None:
                for job in (self.current, *self.joined):
                    job.finished.append(event)
            if self.awaiting_approval.is_set():
                self.awaiting_approval.clear()
                await self.hub.set_status(self.conversation_id, "running")
        if isinstance(event, UsageReport):
            await self.hub.store.add_usage(
                self.conversation_id, event.input_tokens, event.output_tokens, event.cost_usd
            )
        self.hub.events.publish(self.hub.user_id, ChatEvent(event=event))
        if isinstance(event, ToolFinished):
            # A call settled without the gate (e.g. closed by a new message): forget any
            # request or early decision still kept for it.
            self.hub.retire_approval(event.call_id)
        if isinstance(event, TurnDone) and event.depth == 0:
            self.awaiting_approval.clear()

    def join_or_queue(self, job: TurnJob) -> None:
        """A new message: into the running turn when one takes messages and nothing is
        queued before it (order is kept), else into the queue."""
        if job.kind == "turn" and self.joinable is not None and self.queue.empty():
            self.joinable.append(job)
        else:
            self.queue.put_nowait(job)

    def _end_joins(self) -> None:
        """The turn ended: messages it did not take in become turns of their own, ahead
        of anything queued after them (they were sent first)."""
        left, self.joinable = self.joinable or [], None
        if not left:
            return
        later = []
        while not self.queue.empty():
            later.append(self.queue.get_nowait())
        for job in [*left, *later]:
            self.queue.put_nowait(job)

    def stop(self) -> int:
        """/stop: drop what is queued and stop what runs (the whole tree of sub-agents)."""
        dropped = 0
        for job in self.joinable or []:
            job.done.set_result(TurnResult(status="stopped", error="stopped before it started"))
            dropped += 1
        if self.joinable:
            self.joinable = []
        while not self.queue.empty():
            job = self.queue.get_nowait()
            job.done.set_result(TurnResult(status="stopped", error="stopped before it started"))
            dropped += 1
        if self.loop is not None:
            self.loop.stop()
        return dropped

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


class ChatHub:
    def __init__(
        self,
        user_id: str,
        db: Database,
        events: EventHub,
        setup_factory: SetupFactory,
        default_agent: str,
        *,
        retire: Callable[[str], None] | None = None,
        shows_detail: Callable[[], bool] = lambda: False,
        before_turn: BeforeHook | None = None,
        after_turn: AfterHook | None = None,
    ) -> None:
        self.user_id = user_id
        self.db = db
        self.store = ConversationStore(db)
        self.events = events
        self.setup_factory = setup_factory
        self.default_agent = default_agent
        self._runners: dict[str, ConversationRunner] = {}
        # A call settled without a decision here: the member's Inbox closes its item.
        self.retire = retire
        # Whether this member may see a failure's technical detail (admin.models).
        self.shows_detail = shows_detail
        self.before_turn = before_turn
        self.after_turn = after_turn

    def plain_failure(self, done: TurnDone) -> TurnDone:
        """A failed turn as the member reads it: the plain sentence for its code, the
        technical text only for those who manage models (see plain_errors). A turn a
        plugin blocked keeps the plugin's reason: it is written for the member."""
        if done.error_code == BLOCKED:
            return done
        code = done.error_code or "internal"
        detail = done.error_detail or done.error
        own = code in OWN_WORDS and done.error
        return msgspec.structs.replace(
            done,
            error=done.error if own else plain(code),
            error_code=code,
            error_detail=detail if self.shows_detail() else None,
        )

    def _runner(self, conversation_id: str) -> ConversationRunner:
        runner = self._runners.get(conversation_id)
        if runner is None:
            runner = self._runners[conversation_id] = ConversationRunner(self, conversation_id)
        return runner

    async def set_status(self, conversation_id: str, status: str) -> None:
        conversation = await self.store.update(conversation_id, status=status)
        self.events.publish(self.user_id, ConversationUpdated(conversation=conversation))

    async def new_conversation(self, title: str = "", agent_id: str | None = None) -> Conversation:
        """A new conversation with the member's default chat agent, or `agent_id` (a
        feature's own conversation: a project's runs the project coordinator)."""
        agent = agent_id or self.default_agent
        conversation = await self.store.create(secrets.token_hex(8), agent, title)
        self.events.publish(self.user_id, ConversationUpdated(conversation=conversation))
        return conversation

    async def update(self, conversation_id: str, **fields: object) -> Conversation:
        conversation = await self.store.update(conversation_id, **fields)
        self.events.publish(self.user_id, ConversationUpdated(conversation=conversation))
        return conversation

    async def send(
        self,
        conversation_id: str,
        content: list[ContentPart],
        attachments: list[Attachment],
        typed: str = "",
    ) -> asyncio.Future[TurnResult]:
        """Queue a user message (`typed`: what the person wrote, for the title); the future
        resolves when its turn ends."""
        job = await self.queue_message(conversation_id, content, attachments, typed)
        return job.done

    async def queue_message(
        self,
        conversation_id: str,
        content: list[ContentPart],
        attachments: list[Attachment],
        typed: str = "",
    ) -> TurnJob:
        """`send`, answering the queued job itself (its `finished` calls as the turn runs).
        `typed`: what the person wrote, for the title of an untitled conversation.

        One trip: the conversation's claim (`ConversationStore.claim`) proves it exists,
        marks it running and names it; its runner takes that mark as its own. Shielded:
        a request cancelled while the claim is on its way must not leave a conversation
        marked running with no turn queued (the message goes through)."""
        if not any(isinstance(p, TextPart) and p.text.strip() for p in content) and not attachments:
            raise InvalidInputError("the message is empty")
        first_line = typed.strip().splitlines()[0][:60] if typed.strip() else ""
        title = first_line or (attachments[0].name if attachments else "Chat")
        job = TurnJob(
            kind="turn", message=Message(role="user", content=content), attachments=attachments
        )
        await asyncio.shield(self._queue(conversation_id, job, title))
        # Let the runner take its first step before the caller goes on to answer the
        # request and write its log line.
        await asyncio.sleep(0)
        return job

    async def _queue(self, conversation_id: str, job: TurnJob, title: str) -> None:
        job.claim = claim = await self.store.claim(conversation_id, title)
        if claim.marked_at is not None or claim.named:
            # Marked or named by this claim: every tab re-reads it.
            self.events.publish(self.user_id, ConversationUpdated(conversation=claim.conversation))
        self._runner(conversation_id).join_or_queue(job)
        self.events.publish(
            self.user_id,
            UserMessage(
                conversation_id=conversation_id,
                item=HistoryItem(
                    seq=0,
                    role="user",
                    text=display_text(job.message) if job.message else "",
                    attachments=job.attachments,
                    tool_calls=[],
                    tool_call_id=None,
                    is_error=False,
                    created_at=now_iso(),
                ),
            ),
        )

    async def resume(self, conversation_id: str) -> asyncio.Future[TurnResult]:
        job = TurnJob(kind="resume")
        await self._runner(conversation_id).queue.put(job)
        return job.done

    async def compact(self, conversation_id: str) -> asyncio.Future[TurnResult]:
        await self.store.get(conversation_id)
        job = TurnJob(kind="compact")
        await self._runner(conversation_id).queue.put(job)
        return job.done

    async def stop(self, conversation_id: str) -> None:
        await self.store.get(conversation_id)
        runner = self._runners.get(conversation_id)
        if runner is not None:
            runner.stop()

    def forget_runner(self, runner: ConversationRunner) -> None:
        if self._runners.get(runner.conversation_id) is runner:
            del self._runners[runner.conversation_id]

    def retire_approval(self, call_id: str) -> None:
        if self.retire is not None:
            self.retire(call_id)

    def awaiting_approval(self, conversation_id: str) -> asyncio.Event:
        return self._runner(conversation_id).awaiting_approval

    async def resume_interrupted(self) -> list[str]:
        """After a restart or an unlock: finish what a crash cut short, in each conversation."""
        ids = await self.store.needing_attention()
        for conversation_id in ids:
            log.info("resuming conversation", conversation=conversation_id)
            await self.resume(conversation_id)
        return ids

    async def close(self) -> None:
        """Cancel everything; recovery picks the turns up at the next unlock."""
        runners, self._runners = list(self._runners.values()), {}
        await asyncio.gather(*(r.close() for r in runners), return_exceptions=True)
