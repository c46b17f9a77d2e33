"""The product's prompt blocks: what fills the placeholders of Skald's agents.

The agent library (`skald.agent.prompts`) only loads agents and substitutes
`<!-- NAME -->` markers with whatever values it is handed; which names exist and what
they say about a member, the household or its helpers is product knowledge, kept here.
Each feature fills its own placeholders (`skald_prompt_blocks`) with these builders and
declares the names it fills (`skald_placeholders`); the names no feature fills yet are
reserved below, so the shipped agents may already use them.

Trap: every text here reaches the system prompt, whose unchanged prefix the provider
caches. A block must depend only on what it shows (the date to the hour, never the
minute) and must keep one field per line, so a member's profile cannot forge a heading.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Final, Literal
from zoneinfo import ZoneInfo

from skald.agent.prompts import HARNESS_TAG, AgentDef
from skald.store.people import Directory, age_on

# Placeholders the shipped agents already use whose features are not built yet: they
# render empty until then. Each comment names what will fill it (C-numbers: the design's
# capability catalogue); the feature that does moves the name from here to its own
# `skald_placeholders`.
# (None left: shared folders, projects and skills fill theirs since issue 26.)
RESERVED_PLACEHOLDERS: Final[Mapping[str, str]] = {}

VIEW_HEADING: Final = "Viewing at the time of this message:"

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def _utc_offset(offset: timedelta) -> str:
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    hours, mins = divmod(abs(minutes), 60)
    return f"UTC{sign}{hours:02d}:{mins:02d}"


def datetime_block(now: datetime, tz: ZoneInfo) -> str:
    """DATETIME: the local date and hour (minutes dropped) and the timezone's name.

    Dropping the minutes keeps the prompt identical for a whole hour, so the provider's
    prompt cache keeps working; the text says so, so the model does not trust it to the
    minute. Names are English and fixed, never the host's locale.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("datetime_block needs a timezone-aware datetime")
    local = now.astimezone(tz).replace(minute=0, second=0, microsecond=0)
    offset = local.utcoffset() or timedelta(0)
    zone = tz.key or str(tz)
    return (
        "## Date and time\n"
        f"It is {_WEEKDAYS[local.weekday()]} {local.day} {_MONTHS[local.month - 1]} "
        f"{local.year}, between {local.hour:02d}:00 and {local.hour:02d}:59, "
        f"in the {zone} timezone ({_utc_offset(offset)}). "
        "Times the household mentions are in this timezone unless they say otherwise."
    )


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def profile_block(
    display_name: str,
    profile: Mapping[str, str],
    locale: str | None = None,
    household: str = "",
    *,
    directory: Directory | None = None,
    today: date | None = None,
    supervisors: Sequence[str] = (),
) -> str:
    """USER_PROFILE: the member's name, household, directory profile (date of birth with
    the age on `today`, sex, notes), language, the remaining free-form profile fields and
    who supervises them. Unset directory values say so (`unknown`, `not specified`) so the
    model never guesses; the notes line is left out when there are none."""
    lines = ["## Who you are talking with", f"- Name: {_one_line(display_name, 80)}"]
    if household.strip():
        lines.append(f"- Household: {_one_line(household, 80)}")
    if directory is not None:
        lines += _directory_lines(directory, today)
    lines.append(f"- Preferred language: {_one_line(locale, 16) if locale else 'not specified'}")
    for key, value in profile.items():
        if value.strip():
            lines.append(f"- {_one_line(key, 40)}: {_one_line(value, 300)}")
    if directory is not None and directory.notes.strip():
        lines.append(
            f"- Notes from the household's administrator: {_one_line(directory.notes, 2000)}"
        )
    if supervisors:
        names = ", ".join(_one_line(n, 80) for n in supervisors)
        lines.append(
            f"- Supervised by: {names}. These grown-ups can get short reports about "
            "what this member talks about here, not every message."
        )
    return "\n".join(lines)


def _directory_lines(directory: Directory, today: date | None) -> list[str]:
    born = directory.date_of_birth
    if born is None:
        birth = "unknown"
    else:
        age = age_on(born, today or date.today())
        birth = f"{born.isoformat()} (age {age})"
    sex = _one_line(directory.sex, 40) if directory.sex.strip() else "not specified"
    return [f"- Date of birth: {birth}", f"- Sex: {sex}"]


_INDEX_TITLES: Final = {
    "user-memory": "## Private notes: user-memory/index.md",
    "shared-memory": "## Household notes: shared-memory/index.md",
}


# Each index costs prompt tokens on every request of every turn (about chars / 4): a
# long one is cut at a line and the model told to read the rest.
MEMORY_INDEX_MAX_CHARS: Final = 3000


def memory_index_block(
    store: Literal["user-memory", "shared-memory"],
    index_text: str | None,
    max_chars: int = MEMORY_INDEX_MAX_CHARS,
) -> str:
    """USER_MEMORY_INDEX / SHARED_MEMORY_INDEX: a store's index note, or "no notes yet"."""
    body = (index_text or "").strip()
    if not body:
        body = "(No notes yet.)"
    elif len(body) > max_chars:
        cut = body[:max_chars].rsplit("\n", 1)[0]
        body = f"{cut}\n(The index goes on; read {store}/index.md for the rest.)"
    return f"{_INDEX_TITLES[store]}\n{body}"


def task_agents_block(agents: Iterable[AgentDef]) -> str:
    """TASK_AGENTS: the task agents, for sessions that offer the `execute_task` tool."""
    helpers = sorted((a for a in agents if a.type == "task"), key=lambda a: a.id)
    if not helpers:
        return ""
    lines = [
        "## Helpers",
        "`execute_task` hands a self-contained piece of work to one of these agents. "
        "A helper sees only the brief you write, never this conversation, so put in it "
        "everything it needs: the goal, the facts, where to look and what to send back.",
    ]
    lines += [f"- `{a.id}` ({a.name}): {_one_line(a.description, 300)}" for a in helpers]
    return "\n".join(lines)


def _tag_safe(text: str, limit: int) -> str:
    # Nothing inside the block may close it early or start a fake one.
    return _one_line(text.replace("<", "‹").replace(">", "›"), limit)


def view_context_block(view: Mapping[str, str] | Sequence[tuple[str, str]]) -> str:
    """What the member is looking at in the app, as Skald attaches it to a message
    (empty if nothing), items in their order, repeats kept. A value of several lines (a
    passage with its line numbers) follows its label on lines indented by two spaces. The
    fragment `agents/common/view-context.md` names the heading."""
    pairs = list(view.items()) if isinstance(view, Mapping) else list(view)
    items = [(k, v) for k, v in pairs if k.strip() and v.strip()]
    if not items:
        return ""
    lines = [f"<{HARNESS_TAG}>", VIEW_HEADING]
    for k, v in items:
        if "\n" not in v:
            lines.append(f"- {_tag_safe(k, 120)}: {_tag_safe(v, 4096)}")
            continue
        lines.append(f"- {_tag_safe(k, 120)}:")
        lines += [f"  {_line_safe(line)}" for line in v.split("\n")]
    lines.append(f"</{HARNESS_TAG}>")
    return "\n".join(lines)


def _line_safe(line: str) -> str:
    # One line of a passage: tabs and spacing kept, nothing that closes or opens a block.
    kept = "".join(ch if ch == "\t" or ch >= " " else " " for ch in line)
    return kept.replace("<", "‹").replace(">", "›")[:4096]
