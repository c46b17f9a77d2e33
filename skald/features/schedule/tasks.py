"""Background tasks: the assistant hands work to a helper and keeps talking.

A task is a turn in a conversation of its own (created for it, titled "⚙ …"), run by
the member's default chat agent with their tools, as one of the member's chores. Its
history is therefore stored call by call exactly as a chat turn is. When it ends, its
result — completed with the answer, failed with the error, or cancelled — is posted to
the conversation that started it as a task-completed message, which starts a turn
there: an idle conversation wakes up and the assistant relays it (a busy one takes it
after the current turn).

Rule: a task's state moves queued → running → completed|failed|cancelled once
(`TaskStore.move` with `only_from`), and `relayed` is set only after the message is in
the origin conversation, so a crash between the two relays at the next start instead
of losing the result. After a crash, at the member's next start, a task left queued
starts and one left running is finished: its turn is resumed exactly as the chat
recovery resumes any turn (a tool call that had started is reported interrupted to the
model, never run again), and its old run row is `interrupted`, a new one records the
finish. Nothing runs twice, nothing is lost.

Every state write goes through `Tasks._move` (and the first one through `start`), which
tells the owner's open clients (`tasks_changed`); nothing else writes a task's state.

Trap: the origin conversation may be deleted meanwhile (its tasks go with it, by the
foreign key); the member may be locked when the task ends (the relay waits for the
next unlock, as above).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import TYPE_CHECKING, Unpack

from skald.agent import TurnResult
from skald.agent.prompts import HARNESS_TAG, defuse_harness_tags
from skald.core.events import ConversationUpdated
from skald.errors import DatabaseClosedError, InvalidInputError, NotFoundError
from skald.features.schedule.asking import RunAsking
from skald.features.schedule.events import TasksChanged
from skald.features.schedule.notices import notify
from skald.features.schedule.store import (
    ScheduleStore,
    Task,
    TaskEnd,
    TaskState,
    TaskStore,
    iso,
    new_id,
)
from skald.llm.types import TextPart
from skald.log import get_logger

if TYPE_CHECKING:
    from skald.features.schedule.scheduler import Scheduler
    from skald.plugins.facade import Member

__all__ = ["Tasks", "completion_message"]

log = get_logger("skald.features.schedule")

MAX_PROMPT = 20_000


def completion_message(task: Task, last_said: str = "") -> str:
    """What the origin conversation receives when a task ends (model and member alike).

    A task that did not complete says so in capitals, so the model cannot mistake it for
    a result: FAILED (no final answer, with the error) or STOPPED (unfinished, not to be
    reported as done), each with the last thing the task said, often the only clue."""
    if task.state == "completed":
        lines = [f'The background task "{task.title}" is done.']
        if task.result:
            lines += ["", defuse_harness_tags(task.result)]
        cue = "A background task you started has ended (above): tell the user what came of it."
    else:
        if task.state == "cancelled":
            head = (
                f'The background task "{task.title}" was STOPPED before it finished: its '
                "work is incomplete and must not be reported as done."
            )
            if task.error:
                head += f"\nWhy: {task.error}"
        elif task.state == "failed":
            head = (
                f'The background task "{task.title}" FAILED: it never reached a final '
                f"answer.\nError: {task.error or 'unknown'}"
            )
        else:
            head = f'The background task "{task.title}" ended ({task.state}).'
        lines = [defuse_harness_tags(head)]
        if last_said.strip():
            lines += [
                "",
                "Last thing the task said before stopping:",
                defuse_harness_tags(last_said.strip()[:4000]),
            ]
        cue = (
            "A background task you started did not finish (above): tell the user it "
            "did not complete and why; do not present any of it as a finished result."
        )
    # Shown to the member as it is; the harness block (hidden from them) is the model's cue.
    lines += ["", f"<{HARNESS_TAG}>", cue, f"</{HARNESS_TAG}>"]
    return "\n".join(lines)


class _Ended(Exception):
    """The task ends failed before its turn goes on (a decision made before a restart)."""


class Tasks:
    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        # The turn each relay started in its origin conversation, by task id (the
        # relay does not wait for it; tests and callers that need the answer do).
        self.relay_turns: dict[str, asyncio.Future[TurnResult]] = {}

    @property
    def now(self) -> datetime:
        return self.scheduler.clock.now()

    async def start(
        self, member: Member, origin_conversation: str, title: str, prompt: str
    ) -> Task:
        title = " ".join(title.split())[:120]
        prompt = prompt.strip()
        if not prompt:
            raise InvalidInputError("the task is empty: write what the helper should do")
        if len(prompt) > MAX_PROMPT:
            raise InvalidInputError(f"the task is longer than {MAX_PROMPT} characters")
        store = TaskStore(member.db)
        limit = self.scheduler.config.max_tasks
        if await store.active_count() >= limit:
            raise InvalidInputError(
                f"{limit} background tasks are already queued or running, the most allowed: "
                "wait for one to finish or cancel one"
            )
        await member.conversations.store.get(origin_conversation)  # it exists and is theirs
        conversation = await member.conversations.store.create(
            new_id(), member.conversations.default_agent, f"⚙ {title or prompt[:60]}"
        )
        member.server.events.publish(member.id, ConversationUpdated(conversation=conversation))
        task = Task(
            id=new_id(),
            title=title or prompt[:60],
            prompt=prompt,
            origin_conversation=origin_conversation,
            conversation_id=conversation.id,
            state="queued",
            result=None,
            error=None,
            relayed=False,
            created_at=iso(self.now),
            ended_at=None,
        )
        await store.add(task)
        self._changed(member, task, "queued")
        self.scheduler.launch_chore(member, f"task-{task.id}", lambda: self._run(member, task))
        return task

    async def recent(self, member: Member) -> list[Task]:
        return await TaskStore(member.db).recent()

    async def get(self, member: Member, task_id: str) -> Task:
        task = await TaskStore(member.db).get(task_id)
        if task is None:
            raise NotFoundError("no such task")
        return task

    async def cancel(self, member: Member, task_id: str) -> Task:
        task = await self.get(member, task_id)
        if task.state == "queued" and await self._move(
            member, task, "cancelled", only_from=("queued",), now=iso(self.now),
            error="cancelled before it started",
        ):  # fmt: skip
            await self._relay(member, await self.get(member, task_id))
        elif task.state == "running":
            # The turn ends as stopped; the task's own chore records it and relays.
            await member.conversations.stop(task.conversation_id)
        return await self.get(member, task_id)

    async def _move(
        self,
        member: Member,
        task: Task,
        state: TaskState,
        *,
        only_from: tuple[TaskState, ...],
        **end: Unpack[TaskEnd],
    ) -> bool:
        """The one place a task's state is written: move it once, then tell the owner."""
        moved = await TaskStore(member.db).move(task.id, state, only_from=only_from, **end)
        if moved:
            self._changed(member, task, state)
        return moved

    @staticmethod
    def _changed(member: Member, task: Task, state: TaskState) -> None:
        # Only the owner's connections: a task is in their database, nobody else's.
        member.server.events.publish(
            member.id,
            TasksChanged(
                task_id=task.id, state=state, origin_conversation=task.origin_conversation
            ),
        )

    async def _run(self, member: Member, task: Task, *, resume: bool = False) -> None:
        """Run the task's turn (or, after a restart, finish it: `resume`), record how it
        ended and relay that to the origin conversation."""
        runs = ScheduleStore(member.db)
        if not resume and not await self._move(member, task, "running", only_from=("queued",)):
            return  # cancelled while queued
        run = await runs.start_task_run(task, self.now)
        user_id = member.id
        state, result, error, usage = "failed", None, None, None
        # Nobody watches, so the model calls are paced; a request waits in the Inbox
        # (labelled with the task) until the member decides or it expires.
        asking = RunAsking(
            member,
            self.scheduler.clock,
            kind="task",
            title=task.title,
            conversation_id=task.conversation_id,
            table="tasks",
            row_id=task.id,
            window_s=self.scheduler.config.task_approval_window_s,
            on_waiting=lambda: self._changed(member, task, "running"),
        )
        member.unattended.add(task.conversation_id, self.scheduler.pacer(member), asking)
        try:
            if resume and task.waiting_call is not None:
                # A restart cut its wait: the same request, its deadline, any decision.
                await asking.restore(task.waiting_call, task.waiting_until)
            if asking.ended is not None:
                raise _Ended(asking.ended)
            if resume:
                # The chat recovery may already be finishing the turn: this queues
                # behind it and settles whatever is left.
                done = await member.conversations.resume(task.conversation_id)
            else:
                done = await member.conversations.send(
                    task.conversation_id, [TextPart(text=task.prompt)], [], typed=task.title
                )
            outcome = await done
            usage = outcome.usage
            if asking.ended is not None:  # rejected, or expired unanswered
                state, error = "failed", asking.ended
            elif outcome.status == "done":
                text = outcome.text or await self._last_answer(member, task)
                state, result = "completed", text or "(no answer)"
            elif outcome.status == "stopped":
                state, error = "cancelled", outcome.error or "stopped"
            else:
                state, error = "failed", outcome.error or outcome.status
        except DatabaseClosedError:
            raise  # locked under it: the next unlock finishes it
        except _Ended as why:
            state, error = "failed", str(why)
        except Exception as exc:
            state, error = "failed", f"{type(exc).__name__}: {exc}"[:2000]
        finally:
            asking.close()
            member.unattended.discard(task.conversation_id)
        now = self.now
        await self._move(
            member, task, state, only_from=("running",), now=iso(now), result=result,  # type: ignore[arg-type]
            error=error,
        )  # fmt: skip
        await runs.finish(
            run.id,
            now,
            {"completed": "succeeded", "cancelled": "cancelled"}.get(state, "failed"),  # type: ignore[arg-type]
            error=error,
            cost_usd=None if usage is None else usage.cost_usd,
            input_tokens=0 if usage is None else usage.input_tokens,
            output_tokens=0 if usage is None else usage.output_tokens,
        )
        ended = await self.get(member, task.id)
        await self._relay(member, ended)
        await notify(
            self.scheduler.server,
            user_id,
            f"Task {state}: {task.title}",
            (result or error or "")[:300],
            link=f"/?c={task.origin_conversation}",
            urgency="high" if asking.ended is not None else "normal",
        )

    async def _last_answer(self, member: Member, task: Task) -> str:
        items = await member.conversations.store.items(task.conversation_id)
        return next((i.text for i in reversed(items) if i.role == "assistant" and i.text), "")

    async def _relay(self, member: Member, task: Task) -> None:
        """Post the task's end into the conversation that started it (a new turn)."""
        try:
            last = "" if task.state == "completed" else await self._last_answer(member, task)
            text = completion_message(task, last)
            self.relay_turns[task.id] = await member.conversations.send(
                task.origin_conversation, [TextPart(text=text)], []
            )
        except NotFoundError:
            log.info("task result not relayed: conversation deleted", task=task.id)
        await TaskStore(member.db).relayed(task.id)

    def _relaunch(self, member: Member, task: Task, *, resume: bool) -> None:
        async def work() -> None:
            await self._run(member, task, resume=resume)

        self.scheduler.launch_chore(member, f"task-{task.id}", work)

    async def recover(self, member: Member) -> None:
        """At the member's first sight after a start: a task a crash cut is finished
        (queued: started; running: its turn resumed, as the chat recovery resumes any
        turn, so no call runs twice), and every ended task not yet relayed is relayed."""
        store = TaskStore(member.db)
        cut, unrelayed = await store.left_over()
        for task in cut:
            self._relaunch(member, task, resume=task.state == "running")
        for task in unrelayed:
            await self._relay(member, task)
