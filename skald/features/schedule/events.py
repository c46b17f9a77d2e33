"""The background tasks' event on a member's stream (registered by the schedule
feature through `skald_event_types`)."""

from __future__ import annotations

import msgspec

from skald.features.schedule.store import TaskState

__all__ = ["TasksChanged"]


class TasksChanged(msgspec.Struct, tag="tasks_changed", kw_only=True):
    """One of the member's background tasks changed state: clients read the list again
    (`origin_conversation` lets a chat view ignore other conversations' tasks)."""

    task_id: str
    state: TaskState
    origin_conversation: str
