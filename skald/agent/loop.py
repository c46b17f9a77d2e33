"""The agent loop: rounds of model call -> tool calls -> results, until the model answers.

One `AgentLoop` serves one conversation (one history store) and runs one turn at a
time; the caller (Skald's chat hub) serialises turns per conversation. Entry points:
- `run_turn(message)`: settle any calls left open (as interrupted), store the user
  message, run rounds.
- `resume()`: continue unfinished work after a crash or a deferred approval: re-run,
  re-ask or report the open calls (see `recovery.py`), then run rounds.
- `stop()`: `/stop`; reaches the model stream, tools, approval waits and sub-agents.
- `compact()`: `/compact`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

import msgspec

from skald.agent import compaction
from skald.agent.approval import ApprovalGate
from skald.agent.calls import CallRunner, Outcome, interrupted
from skald.agent.cancel import DEFAULT_GRACE_S, CancelScope, Stopped
from skald.agent.compaction import CompactionError, CompactionResult
from skald.agent.events import Emitter, EventSink, TurnStatus
from skald.agent.history import CallState, HistoryStore, project
from skald.agent.recovery import needs_resume, recovery_action, repair_text
from skald.agent.streaming import Reply, call_model, normalise_call_ids
from skald.agent.tools import Tool, ToolResult
from skald.llm import tokens
from skald.llm.client import ModelClient
from skald.llm.errors import LlmError
from skald.llm.types import (
    ContentPart,
    Interruption,
    Message,
    Request,
    Restart,
    TextPart,
    ToolCall,
    Usage,
)
from skald.log import get_logger

log = get_logger("skald.agent")

ROUND_LIMIT = (
    "Stopped after {n} model calls: the limit for one turn was reached. Send a message to continue."
)
TURN_BUDGET_SPENT = (
    "Stopped after {used} tokens: the budget for one turn ({limit}) was used up. "
    "Send a message to continue."
)
REPEATED_FAILURE = (
    "Stopped: the assistant tried the same failing step ({name}) {n} times in a row. "
    "Send a message to continue, perhaps with a hint."
)
# What a call cut off by the output limit gets instead of running: its arguments are
# incomplete, and running it would hide the cut behind a "missing argument" error.
CUT_CALL = (
    "Not run: your answer reached the output limit while writing this call, so its "
    "arguments are incomplete. Make it smaller: split a long text into several calls, "
    "or write less at a time."
)
CUT_ANSWER = "the answer reached the output limit"


DEFAULT_MAX_TOKENS = 4096


class LoopConfig(msgspec.Struct, frozen=True, kw_only=True):
    model: str  # the wire model id the model source expects
    system_prompt: str = ""
    max_rounds: int = 25  # model calls per turn
    # The longest answer, unless the model source knows the model's own.
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float | None = None
    max_parallel_calls: int = 8
    max_result_chars: int = 60_000  # longer tool output is cut (the model sees a note)
    # Texts inside earlier calls' arguments are sent back to the model cut to this (the
    # history keeps them whole): a 10 MiB write_file is not re-sent at every round.
    max_argument_chars: int | None = 16_384
    model_retries: int = 1  # retriable errors before the first token
    retry_backoff_s: float = 1.0
    compact_at_tokens: int | None = None  # automatic compaction threshold (chars/4 estimate)
    compact_keep_last: int = 8
    stop_grace_s: float = DEFAULT_GRACE_S  # time stopped work gets to unwind
    # Guards against runaway turns: input + output tokens of all model calls of one turn
    # (None: no limit), and how often the very same call may fail in a row.
    max_turn_tokens: int | None = None
    max_repeated_failures: int = 3
    # The tools whose schemas go with every request (None: all of them). The others
    # still run when the model calls them by name, so a catalogue tool can describe
    # them on demand (the compact profile for small models); the gate sees each call
    # under its real name either way.
    offered_tools: frozenset[str] | None = None


class TurnResult(msgspec.Struct, frozen=True, kw_only=True):
    status: TurnStatus
    text: str = ""  # the final assistant text
    error: str | None = None  # failed: what went wrong; stopped: the stop reason
    error_code: str | None = None  # failed: what kind of failure (skald.llm.errors codes)
    rounds: int = 0
    usage: Usage = msgspec.field(default_factory=Usage)


@dataclass
class _Turn:
    scope: CancelScope
    runner: CallRunner
    rounds: int = 0
    text: str = ""
    usage: Usage = field(default_factory=Usage)
    reply: Reply | None = None  # the model answer being streamed, until it is stored
    compacted: bool = False
    overflow_retried: bool = False  # compacted and asked again after a context overflow
    # The last failing call (name + arguments) and how often it failed in a row.
    failing: tuple[str, str] | None = None
    failures: int = 0

    def result(
        self, status: TurnStatus, error: str | None = None, code: str | None = None
    ) -> TurnResult:
        return TurnResult(
            status=status,
            text=self.text,
            error=error,
            error_code=code,
            rounds=self.rounds,
            usage=self.usage,
        )


TurnBody = Callable[[_Turn], Awaitable[TurnResult]]
# The member's messages sent while the turn runs, one at a time (None: no more now).
JoinedMessages = Callable[[], Awaitable[Message | None]]


class AgentLoop:
    def __init__(
        self,
        model: ModelClient,
        tools: Iterable[Tool],
        history: HistoryStore,
        gate: ApprovalGate,
        sink: EventSink,
        config: LoopConfig,
        *,
        cancel: CancelScope | None = None,
        depth: int = 0,
        extras: Mapping[str, object] | None = None,
        joined: JoinedMessages | None = None,
    ) -> None:
        self.model = model
        self.tools = _by_name(tools)
        self.history = history
        self.gate = gate
        self.config = config
        self.emit = Emitter(sink, history.conversation_id, depth)
        self.extras: Mapping[str, object] = extras or {}
        self._parent = cancel
        self._joined = joined
        offered = config.offered_tools
        self._specs = [t.spec for t in self.tools.values() if offered is None or t.name in offered]
        self._scope: CancelScope | None = None  # of the running turn or compaction

    @property
    def busy(self) -> bool:
        return self._scope is not None

    def stop(self, reason: str = "stopped by the user") -> None:
        """Stop the running turn (or compaction); a no-op when idle."""
        if self._scope is not None:
            self._scope.cancel(reason)

    async def run_turn(self, message: Message | str) -> TurnResult:
        if isinstance(message, str):
            message = Message(role="user", content=[TextPart(message)])
        user_message = message

        async def body(turn: _Turn) -> TurnResult:
            # Usually no call is open: store the message and read the history at once.
            loaded = await self.history.start_turn(user_message)
            if loaded is None:
                await self._repair(turn)
                await self.history.append(user_message)
            return await self._drive(turn, loaded)

        return await self._run(body, resumed=False)

    async def resume(self) -> TurnResult:
        """Finish interrupted work; returns `done` with 0 rounds (no events) if there is none."""
        if not await needs_resume(self.history):
            return TurnResult(status="done")
        return await self._run(self._resume_body, resumed=True)

    async def compact(self, keep_last_n: int | None = None) -> CompactionResult | None:
        """Summarise the older messages now (`/compact`); None when there is nothing to cut."""
        scope = self._claim()
        try:
            keep = self.config.compact_keep_last if keep_last_n is None else keep_last_n
            return await self._compact(scope, keep)
        finally:
            self._scope = None

    async def _compact(self, scope: CancelScope, keep_last_n: int) -> CompactionResult | None:
        """The history compacted with this loop's model, the clients told what was cut
        (by `/compact` and before a round alike); None when there was nothing to cut."""
        done = await compaction.compact(
            self.history,
            self.model,
            model_id=self.config.model,
            keep_last_n=keep_last_n,
            scope=scope,
        )
        if done is not None:
            await self.emit.compacted(done.dropped, done.kept)
        return done

    # -- turn lifecycle -----------------------------------------------------------------

    def _claim(self) -> CancelScope:
        if self._scope is not None:
            raise RuntimeError("this conversation is already running a turn")
        self._scope = CancelScope(self._parent, grace_s=self.config.stop_grace_s)
        return self._scope

    async def _run(self, body: TurnBody, *, resumed: bool) -> TurnResult:
        scope = self._claim()
        try:
            turn = _Turn(scope=scope, runner=self._runner(scope))
            await self.emit.turn_started(resumed=resumed)
            result = await self._guard(turn, body)
            await self.emit.turn_done(
                result.status,
                error=result.error,
                error_code=result.error_code,
                text=result.text,
                rounds=result.rounds,
                usage=result.usage,
            )
            return result
        finally:
            self._scope = None

    async def _guard(self, turn: _Turn, body: TurnBody) -> TurnResult:
        try:
            return await body(turn)
        except Stopped as stop:
            return await self._end_stopped(turn, stop.reason)
        except LlmError as exc:
            return await self._end_failed(turn, exc.kind, str(exc))
        except Exception as exc:
            log.exception("agent turn failed", conversation_id=self.history.conversation_id)
            return await self._end_failed(
                turn, "internal", f"internal error: {type(exc).__name__}: {exc}"
            )

    async def _end_stopped(self, turn: _Turn, reason: str) -> TurnResult:
        try:
            await self._keep_partial(turn, Interruption(code="stopped", detail=reason))
            for open_call in await self.history.unfinished_calls():
                await turn.runner.settle(
                    open_call.call, interrupted("Stopped by the user before it finished.")
                )
        except Exception as exc:
            log.exception(
                "could not record a stopped turn", conversation_id=self.history.conversation_id
            )
            return turn.result(
                "failed", error=f"internal error while stopping: {exc}", code="internal"
            )
        return turn.result("stopped", error=reason)

    async def _end_failed(self, turn: _Turn, code: str, error: str) -> TurnResult:
        """Keep what the member saw and record the failure in the history (as the
        interruption of the answer; an answer of nothing when nothing was said)."""
        try:
            if not await self.history.unfinished_calls():  # never between a call and its result
                await self._keep_partial(turn, Interruption(code=code, detail=error), empty=True)
        except Exception:
            log.exception(
                "could not record a failed turn", conversation_id=self.history.conversation_id
            )
        return turn.result("failed", error=error, code=code)

    async def _keep_partial(self, turn: _Turn, why: Interruption, *, empty: bool = False) -> None:
        """Store the streamed text of an answer that did not finish, marked interrupted."""
        reply, turn.reply = turn.reply, None
        text = reply.text if reply is not None else ""
        if not text and not empty:
            return
        content: list[ContentPart] = [TextPart(text)] if text else []
        await self.history.append(Message(role="assistant", content=content, interrupted=why))
        if text:
            turn.text = text

    def _runner(self, scope: CancelScope) -> CallRunner:
        return CallRunner(
            tools=self.tools,
            gate=self.gate,
            history=self.history,
            emit=self.emit,
            scope=scope,
            extras=self.extras,
            max_parallel=self.config.max_parallel_calls,
            max_result_chars=self.config.max_result_chars,
        )

    # -- rounds -------------------------------------------------------------------------

    async def _drive(self, turn: _Turn, loaded: list[Message] | None = None) -> TurnResult:
        """Rounds until the model answers; `loaded`: the history as just read, if it was."""
        cfg = self.config
        while turn.rounds < cfg.max_rounds:
            turn.scope.check()
            if await self._take_joined():
                loaded = None  # the history grew: read it again
            used = turn.usage.input_tokens + turn.usage.output_tokens
            if cfg.max_turn_tokens is not None and used >= cfg.max_turn_tokens:
                error = TURN_BUDGET_SPENT.format(used=used, limit=cfg.max_turn_tokens)
                return turn.result("failed", error=error, code="turn_budget")
            messages = await self._prepare(turn, loaded)
            loaded = None
            reply = await self._ask_or_compact(turn, messages)
            cut = reply.finish == "length"
            message = reply.message()
            if cut and not reply.calls and message.content:
                why = Interruption(code="cut_off", detail=CUT_ANSWER)
                message = msgspec.structs.replace(message, interrupted=why)
            if message.content or message.tool_calls:
                await self.history.append(message)  # before any call runs
            turn.reply = None
            turn.text = reply.text
            if not reply.calls:
                if await self._take_joined():
                    continue  # the member wrote meanwhile: answer that in this turn
                return turn.result("done")
            for call in reply.calls:
                await self.emit.call(call, "pending")
            if cut:
                # Cut off while writing the calls: none runs, the model is told why.
                for call in reply.calls:
                    refused = Outcome(ToolResult.error(CUT_CALL), CallState.ERROR)
                    await turn.runner.settle(call, refused)
            elif not await turn.runner.run_batch(reply.calls):
                return turn.result("awaiting_approval")
            if (repeated := self._repeated_failure(turn, reply.calls)) is not None:
                error = REPEATED_FAILURE.format(name=repeated, n=turn.failures)
                return turn.result("failed", error=error, code="repeated_failure")
        turn.scope.check()
        return turn.result("failed", error=ROUND_LIMIT.format(n=cfg.max_rounds), code="turn_budget")

    async def _take_joined(self) -> int:
        """Store the messages the member sent while this turn ran (between rounds, when
        no call is open): the model sees them at its next step. How many there were."""
        if self._joined is None:
            return 0
        count = 0
        while (message := await self._joined()) is not None:
            await self.history.append(message)
            count += 1
        return count

    def _repeated_failure(self, turn: _Turn, calls: list[ToolCall]) -> str | None:
        """The name of a call that just failed for the Nth time in a row with the same
        arguments (a model stuck retrying), else None."""
        settled = turn.runner.outcomes
        failed = [c for c in calls if (o := settled.get(c.id)) is not None and o.result.is_error]
        if not failed or len(failed) < len(calls):
            turn.failing, turn.failures = None, 0  # something worked: not stuck
            return None
        key = (failed[0].name, msgspec.json.encode(failed[0].arguments, order="sorted").decode())
        turn.failures = turn.failures + 1 if key == turn.failing else 1
        turn.failing = key
        return key[0] if turn.failures >= self.config.max_repeated_failures else None

    async def _ask_model(self, turn: _Turn, messages: list[Message]) -> Reply:
        cfg = self.config
        system = (
            [Message(role="system", content=[TextPart(cfg.system_prompt)])]
            if cfg.system_prompt
            else []
        )
        request = Request(
            model=cfg.model,
            messages=system + messages,
            tools=self._specs,
            max_tokens=cfg.max_tokens,
            temperature=cfg.temperature,
        )
        reply = turn.reply = Reply()
        try:
            await call_model(
                self.model,
                request,
                reply,
                turn.scope,
                self.emit.token,
                retries=cfg.model_retries,
                backoff_s=cfg.retry_backoff_s,
                on_restart=lambda restart: self._restarted(turn, restart),
                on_reasoning=self.emit.reasoning,
            )
        except (Stopped, LlmError) as exc:
            # A stopped or broken answer still cost what was streamed (estimated: the
            # server reports usage only at the end); one refused up front cost nothing.
            if reply.started or isinstance(exc, Stopped):
                await self._count(turn, tokens.completed(None, request, reply.text, reply.calls))
            raise
        turn.rounds += 1
        reply.usage = tokens.completed(reply.usage, request, reply.text, reply.calls)
        reply.calls = normalise_call_ids(reply.calls)
        await self._count(turn, reply.usage)
        return reply

    async def _ask_or_compact(self, turn: _Turn, messages: list[Message]) -> Reply:
        """Ask the model; when the provider says the conversation is too long for it,
        compact now (whatever the threshold said) and ask once more."""
        try:
            return await self._ask_model(turn, messages)
        except LlmError as exc:
            if exc.kind != "context_overflow" or turn.overflow_retried:
                raise
            turn.overflow_retried = True
            log.info("context overflow; compacting and asking again", error=str(exc))
            shorter = await self._compact_now(turn)
            if shorter is None:
                raise  # nothing left to cut: the member reads "too long for the model"
            return await self._ask_model(turn, shorter)

    async def _restarted(self, turn: _Turn, restart: Restart) -> None:
        """The model source switched models mid-answer: count the void part, tell the
        clients to drop its text."""
        await self._count(turn, restart.usage)
        await self.emit.switched(restart.model, restart.reason)

    async def _count(self, turn: _Turn, usage: Usage) -> None:
        turn.usage = add_usage(turn.usage, usage)
        await self.emit.usage(self.config.model, usage)

    async def _prepare(self, turn: _Turn, loaded: list[Message] | None = None) -> list[Message]:
        """The projection for the next model call, compacted first when over the threshold."""
        messages = self._project(loaded if loaded is not None else await self.history.load())
        limit = self.config.compact_at_tokens
        if limit is None or turn.compacted:
            return messages
        size = compaction.estimate_tokens(
            messages, system=self.config.system_prompt, tools=self._specs
        )
        if size <= limit:
            return messages
        turn.compacted = True  # once per turn, even if it did not help
        shorter = await self._compact_now(turn)
        return messages if shorter is None else shorter

    async def _compact_now(self, turn: _Turn) -> list[Message] | None:
        """Compact the history; the new projection, or None when nothing was cut (or
        the compaction failed, which is logged: the turn goes on uncompacted)."""
        try:
            done = await self._compact(turn.scope, self.config.compact_keep_last)
        except (LlmError, CompactionError) as exc:
            log.warning("compaction failed", error=str(exc))
            return None
        if done is None:
            return None
        return self._project(await self.history.load())

    def _project(self, messages: list[Message]) -> list[Message]:
        return project(
            messages,
            max_argument_chars=self.config.max_argument_chars,
            max_result_chars=self.config.max_result_chars,
        )

    # -- recovery -----------------------------------------------------------------------

    async def _repair(self, turn: _Turn) -> None:
        """A new message arrived: close every call still open, without running it."""
        for open_call in await self.history.unfinished_calls():
            text = repair_text(open_call, self.tools.get(open_call.call.name))
            await turn.runner.settle(open_call.call, interrupted(text))

    async def _resume_body(self, turn: _Turn) -> TurnResult:
        runnable = []
        for open_call in await self.history.unfinished_calls():
            text = recovery_action(open_call, self.tools.get(open_call.call.name))
            if text is None:
                runnable.append(open_call.call)
            else:
                await turn.runner.settle(open_call.call, interrupted(text))
        for call in runnable:
            outcome = await turn.runner.evaluate(call)
            if outcome is None:
                return turn.result("awaiting_approval")
            await turn.runner.settle(call, outcome)
        messages = self._project(await self.history.load())
        if messages and messages[-1].role not in ("user", "tool"):
            return turn.result("done")
        return await self._drive(turn)


def add_usage(a: Usage, b: Usage) -> Usage:
    cost = (
        None
        if a.cost_usd is None and b.cost_usd is None
        else (a.cost_usd or 0.0) + (b.cost_usd or 0.0)
    )
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cost_usd=cost,
        estimated=a.estimated or b.estimated,
    )


def _by_name(tools: Iterable[Tool]) -> dict[str, Tool]:
    out: dict[str, Tool] = {}
    for tool in tools:
        if tool.name in out:
            raise ValueError(f"two tools are named {tool.name!r}")
        out[tool.name] = tool
    return out
