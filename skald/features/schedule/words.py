"""A schedule in plain words, in the member's language (en, it, fr; anything else: en):
"every weekday at 7:30, next Monday 1 December", "once, tomorrow at 18:30".

Rule: the server says when a job runs, in the job's zone, so the Tasks page's preview,
the `/remind` confirmation and the tool all agree; the page never computes a time.
Common cron shapes (a fixed minute and hour on every day, weekdays, one or more days
of the week) get a sentence; any other expression is named as it is ("on the schedule
`*/15 9-17 * * *`"), with its next runs spelled out.

Trap: the words are for people, never parsed back; a locale outside the three falls
back to English, not to an error.
"""

from __future__ import annotations

from datetime import datetime, timedelta

__all__ = ["describe", "lang_of", "phrase", "when_text"]

# One row a key, its words in `_LANGS`' order: a language is a column, so a key cannot
# be missing from one of them.
_LANGS = ("en", "it", "fr")
_TABLE: dict[str, tuple[object, object, object]] = {
    "days": (
        ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
        ("lunedì", "martedì", "mercoledì", "giovedì", "venerdì", "sabato", "domenica"),
        ("lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche"),
    ),
    "months": (
        ("January", "February", "March", "April", "May", "June", "July", "August",
         "September", "October", "November", "December"),
        ("gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio",
         "agosto", "settembre", "ottobre", "novembre", "dicembre"),
        ("janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août",
         "septembre", "octobre", "novembre", "décembre"),
    ),
    "today": ("today", "oggi", "aujourd'hui"),
    "tomorrow": ("tomorrow", "domani", "demain"),
    "at": ("at", "alle", "à"),
    "every_day": ("every day at {t}", "ogni giorno alle {t}", "tous les jours à {t}"),
    "weekdays": ("every weekday at {t}", "dal lunedì al venerdì alle {t}",
                 "du lundi au vendredi à {t}"),
    "weekly": ("every {d} at {t}", "ogni {d} alle {t}", "chaque {d} à {t}"),
    "and": (" and ", " e ", " et "),
    "once": ("once, {w}", "una volta, {w}", "une fois, {w}"),
    "cron": ("on the schedule `{c}`", "secondo l'espressione `{c}`",
             "selon l'expression `{c}`"),
    "next": ("{d}, next {w}", "{d}, la prossima volta {w}", "{d}, la prochaine fois {w}"),
    "set": ("Reminder set for {w}: {x}", "Promemoria per {w}: {x}", "Rappel prévu {w} : {x}"),
    "bad": (
        "I could not read that reminder. Try: /remind in 10 minutes check the oven, "
        "/remind at 18:30 call grandma, /remind tomorrow 9:00 take the bins out",
        "Non ho capito il promemoria. Prova: /remind tra 10 minuti controlla il forno, "
        "/remind alle 18:30 chiama la nonna, /remind domani 9:00 porta fuori la spazzatura",
        "Je n'ai pas compris ce rappel. Essayez : /remind dans 10 minutes vérifier le "
        "four, /remind à 18:30 appeler mamie, /remind demain 9:00 sortir les poubelles",
    ),
}  # fmt: skip
_WORDS: dict[str, dict[str, object]] = {
    lang: {key: words[i] for key, words in _TABLE.items()} for i, lang in enumerate(_LANGS)
}


def lang_of(locale: str | None) -> str:
    """'it-IT' -> 'it'; a language without words here -> 'en'."""
    lang = (locale or "en").split("-")[0].split("_")[0].lower()
    return lang if lang in _WORDS else "en"


def phrase(lang: str, key: str, **values: str) -> str:
    text = _WORDS[lang_of(lang)][key]
    assert isinstance(text, str)
    return text.format(**values)


def _names(lang: str, key: str) -> tuple[str, ...]:
    names = _WORDS[lang_of(lang)][key]
    assert isinstance(names, tuple)
    return names


def _clock(hour: int, minute: int) -> str:
    return f"{hour}:{minute:02d}"


def when_text(at: datetime, now: datetime, lang: str) -> str:
    """A local instant for people: "today at 18:30", "Monday 1 December at 7:30" (both
    in the same zone; a year is named only when it is not this one)."""
    t = _clock(at.hour, at.minute)
    word = phrase(lang, "at")
    if at.date() == now.date():
        return f"{phrase(lang, 'today')} {word} {t}"
    if at.date() == (now + timedelta(days=1)).date():
        return f"{phrase(lang, 'tomorrow')} {word} {t}"
    day = _names(lang, "days")[at.weekday()]
    month = _names(lang, "months")[at.month - 1]
    year = f" {at.year}" if at.year != now.year else ""
    return f"{day} {at.day} {month}{year} {word} {t}"


def _fixed_time(fields: list[str]) -> tuple[int, int] | None:
    if len(fields) != 5 or not (fields[0].isdigit() and fields[1].isdigit()):
        return None
    if fields[2] != "*" or fields[3] != "*":
        return None
    return int(fields[1]), int(fields[0])


def _cron_days(field: str) -> list[int] | None:
    """A day-of-week field of single days (0 or 7 Sunday) as weekday numbers (0 Monday)."""
    days: list[int] = []
    for part in field.split(","):
        if not part.isdigit() or int(part) > 7:
            return None
        days.append((int(part) - 1) % 7)
    return sorted(set(days))


def describe(cron: str | None, lang: str) -> str:
    """The rule of a repeating job in words ("every weekday at 7:30"); `cron` None: once."""
    if cron is None:
        return ""
    fields = cron.split()
    fixed = _fixed_time(fields)
    if fixed is None:
        return phrase(lang, "cron", c=cron)
    t = _clock(*fixed)
    dow = fields[4]
    if dow == "*":
        return phrase(lang, "every_day", t=t)
    if dow == "1-5":
        return phrase(lang, "weekdays", t=t)
    days = _cron_days(dow)
    if days is None:
        return phrase(lang, "cron", c=cron)
    names = _names(lang, "days")
    return phrase(lang, "weekly", d=phrase(lang, "and").join(names[d] for d in days), t=t)
