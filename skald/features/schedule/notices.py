"""The one place the scheduler tells a member something happened while they were away
("job ran", "task done", "job paused"), through the notification service
(`server.notifications`: the member's bell, batched, their channels, quiet hours).

Trap: a notice never decides a run's outcome: the run is recorded before it is sent,
and a member locked meanwhile (`DatabaseClosedError`) simply gets none (logged).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.errors import DatabaseClosedError, InvalidInputError
from skald.features.notifications.tool import MAX_BODY, MAX_TITLE
from skald.log import get_logger

if TYPE_CHECKING:
    from skald.plugins.facade import Server

log = get_logger("skald.features.schedule")

__all__ = ["notify"]


async def notify(
    server: Server,
    user_id: str,
    title: str,
    body: str,
    *,
    link: str | None = None,
    source: str = "schedule",
    urgency: str = "normal",
) -> None:
    try:
        await server.notifications.notify(
            user_id,
            title=title[:MAX_TITLE],
            body=body[:MAX_BODY],  # the service's own limits: it refuses longer
            link=link,
            source=source,
            urgency=urgency,
        )
    except (DatabaseClosedError, InvalidInputError) as exc:
        log.warning("notice not sent", user_id=user_id, title=title[:80], error=str(exc))
