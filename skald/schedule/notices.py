"""The one place the scheduler tells a member something happened while they were away
("job ran", "task done", "job paused"). Until the notification centre lands it only
logs the notice (the run itself is in the job's conversation and on the Tasks page).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.log import get_logger

if TYPE_CHECKING:
    from skald.core.runtime import Runtime

log = get_logger("skald.schedule")

__all__ = ["notify"]


async def notify(rt: Runtime, user_id: str, title: str, body: str) -> None:
    log.info("notice", user_id=user_id, title=title)
