"""`/remind`: a one-off reminder from the chat with no model involved, in en, it or fr.

    /remind in 2 minutes check the oven      /remind tra 2 minuti controlla il forno
    /remind at 18:30 call grandma            /remind alle 18:30 chiama la nonna
    /remind tomorrow 9:00 take the bins out  /remind demain à 9h00 sortir les poubelles

Rule: the server parses (`parse_remind`, keywords of all three languages whatever the
member's language), `Jobs.create` makes a job of kind `reminder` with the same checks as
the Tasks page (a time in the past, the active-jobs limit), and its run notifies the
member with the text as written: a household whose model never makes a valid tool call
can still set "check the oven in 2 minutes".

Trap: "at 18:30" when it is already past 18:30 means tomorrow (the confirmation names
the day, so the member sees it); anything the parser does not read is refused with an
example, never guessed at.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from skald.errors import InvalidInputError
from skald.features.schedule.jobs import MAX_TITLE, JobSpec
from skald.features.schedule.store import parse_iso
from skald.features.schedule.words import lang_of, phrase, when_text
from skald.features.schedule.zone import member_zone
from skald.store.rows import effective_locale

if TYPE_CHECKING:
    from skald.features.schedule.scheduler import Scheduler
    from skald.plugins.facade import Member

__all__ = ["MAX_AHEAD", "parse_remind", "remind_command"]

_TITLE_WORDS = 60

MAX_AHEAD = timedelta(days=366)

_UNITS = {
    "minute": 60, "minutes": 60, "min": 60, "mins": 60, "m": 60, "minuto": 60, "minuti": 60,
    "hour": 3600, "hours": 3600, "h": 3600, "hr": 3600, "hrs": 3600, "ora": 3600, "ore": 3600,
    "heure": 3600, "heures": 3600,
    "day": 86400, "days": 86400, "d": 86400, "giorno": 86400, "giorni": 86400, "jour": 86400,
    "jours": 86400,
}  # fmt: skip
_IN = re.compile(r"^(?:in|tra|fra|dans)\s+(\d{1,6})\s*([a-zà-ü]+)\s+(.+)$", re.I | re.S)
_TIME = r"(\d{1,2})(?:[:h.](\d{2}))?"
_AT = re.compile(rf"^(?:(?:at|alle|a|à)\s+{_TIME}|(\d{{1,2}})[:h.](\d{{2}}))\s+(.+)$", re.I | re.S)
_DAY = re.compile(
    rf"^(today|oggi|aujourd'hui|tomorrow|domani|demain)\s+(?:(?:at|alle|a|à)\s+)?{_TIME}\s+(.+)$",
    re.I | re.S,
)
_TOMORROW = {"tomorrow", "domani", "demain"}


def _clock(hour: str, minute: str | None) -> tuple[int, int] | None:
    h, m = int(hour), int(minute or 0)
    return (h, m) if h < 24 and m < 60 else None


def parse_remind(arg: str, now: datetime, lang: str) -> tuple[datetime, str]:
    """(when, text) of `/remind <arg>`; `now` is the member's local time, aware.
    InvalidInputError, with an example in the member's language, for anything else."""
    arg = arg.strip()
    bad = InvalidInputError(phrase(lang, "bad"))
    if m := _IN.match(arg):
        seconds = _UNITS.get(m.group(2).lower())
        if seconds is None or int(m.group(1)) == 0:
            raise bad
        delta = timedelta(seconds=int(m.group(1)) * seconds)
        if delta > MAX_AHEAD:
            raise bad
        # Counted on the real clock (UTC), not the wall clock: "in 2 hours" across a
        # daylight-saving change is still two hours.
        return (now.astimezone(UTC) + delta).astimezone(now.tzinfo), m.group(3).strip()
    if m := _DAY.match(arg):
        clock = _clock(m.group(2), m.group(3))
        if clock is None:
            raise bad
        day = now.date() + timedelta(days=1 if m.group(1).lower() in _TOMORROW else 0)
        at = now.replace(year=day.year, month=day.month, day=day.day, hour=clock[0],
                         minute=clock[1], second=0, microsecond=0)  # fmt: skip
        return at, m.group(4).strip()
    if m := _AT.match(arg):
        clock = _clock(m.group(1) or m.group(3), m.group(2) or m.group(4))
        if clock is None:
            raise bad
        at = now.replace(hour=clock[0], minute=clock[1], second=0, microsecond=0)
        if at <= now:
            at += timedelta(days=1)  # already past today: the next one
        return at, m.group(5).strip()
    raise bad


async def remind_command(
    scheduler: Scheduler, member: Member, conversation_id: str, arg: str
) -> str:
    """`/remind <when> <text>` in a conversation: a one-off reminder job with that
    conversation's model (a reminder needs none, but an edit on the Tasks page may make
    it a prompt); returns the confirmation line the chat shows."""
    jobs = await scheduler.jobs(member)
    # The row as it is now: `member.user` is the one read at unlock (a language chosen
    # since would not count).
    user, _ = await member.server.fetch(member.id)
    instance = member.server.instance
    lang = lang_of(effective_locale(user.locale, instance.current.language if instance else None))
    zone = member_zone(member)
    now = jobs.now.astimezone(zone)
    at, text = parse_remind(arg, now, lang)
    conversation = await member.conversations.store.get(conversation_id)
    title = text if len(text) <= _TITLE_WORDS else text[: _TITLE_WORDS - 1].rstrip() + "…"
    job = await jobs.create(
        JobSpec(
            title=title[:MAX_TITLE],
            prompt=text,
            at=at.replace(tzinfo=None).isoformat(timespec="seconds"),
            zone=zone.key,
            kind="reminder",
            model_id=conversation.model_id,
        )
    )
    assert job.run_at is not None
    when = when_text(parse_iso(job.run_at).astimezone(zone), now, lang)
    return phrase(lang, "set", w=when, x=text)
