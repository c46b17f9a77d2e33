"""`[schedule]` in config.toml: the scheduler's pace and the limits per member."""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = ["ScheduleConfig"]


class ScheduleConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # How often the scheduler looks for due jobs, in seconds (>= 1).
    tick_s: Annotated[float, msgspec.Meta(ge=1)] = 15.0
    # Runs of each job kept in its history; older ones are deleted (>= 1).
    keep_runs: Annotated[int, msgspec.Meta(ge=1)] = 50
    # Active (not paused) jobs one member may have (>= 0).
    max_active_jobs: Annotated[int, msgspec.Meta(ge=0)] = 50
    # Shortest time between two runs of a repeating job, in seconds (>= 1); an admin may
    # allow a member less (the Tasks limits of the accounts API).
    min_interval_s: Annotated[int, msgspec.Meta(ge=1)] = 300
    # Background tasks one member may have queued or running at once (>= 1).
    max_tasks: Annotated[int, msgspec.Meta(ge=1)] = 3
    # Model requests one member's scheduled runs and background tasks may make in any
    # minute, all together (>= 1); beyond, the run fails with a clear error.
    background_calls_per_min: Annotated[int, msgspec.Meta(ge=1)] = 30
    # A job failing this many times in a row pauses itself (0 = never).
    max_failures: Annotated[int, msgspec.Meta(ge=0)] = 3
    # A run that starts this many seconds after its time is marked late (>= 1).
    late_after_s: Annotated[int, msgspec.Meta(ge=1)] = 120
    # A new job's "skip if missed by" window, in seconds, unless it says otherwise.
    default_skip_after_s: Annotated[int, msgspec.Meta(ge=0)] = 12 * 3600
    # How long a background task's approval request waits in the Inbox before it
    # expires and the task fails, in seconds (>= 60). A job's is its own (per job).
    task_approval_window_s: Annotated[int, msgspec.Meta(ge=60)] = 24 * 3600
