"""The one place the scheduler tells a member something happened while they were away
("job ran", "task done", "job paused"), through the notification service
(`rt.notifications`: the member's bell, batched, their channels, quiet hours).

Trap: a notice never decides a run's outcome: the run is recorded before it is sent,
and a member locked meanwhile (`DatabaseClosedError`) simply gets none (logged).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.errors import DatabaseClosedError, InvalidInputError
from skald.log import get_logger

if TYPE_CHECKING:
    from skald.core.runtime import Runtime

log = get_logger("skald.features.schedule")

__all__ = ["notify"]

# The notification service's own limits (skald/features/notifications/service.py refuses longer).
_TITLE, _BODY = 200, 2000


async def notify(
    rt: Runtime,
    user_id: str,
    title: str,
    body: str,
    *,
    link: str | None = None,
    source: str = "schedule",
    urgency: str = "normal",
) -> None:
    try:
        await rt.notifications.notify(
            user_id,
            title=title[:_TITLE],
            body=body[:_BODY],
            link=link,
            source=source,
            urgency=urgency,
        )
    except (DatabaseClosedError, InvalidInputError) as exc:
        log.warning("notice not sent", user_id=user_id, title=title[:80], error=str(exc))
