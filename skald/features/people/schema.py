"""The people feature's registry migrations: the directory profile and supervision tables.

Migration 1 also moves what the old free-form profile (`users.profile`, a JSON object of
any keys) already said into the directory: a key naming a date of birth, a sex or notes
whose value passes `check_profile` moves to `people_profiles` and leaves the dict; every
other key (and a value that does not pass, such as "born in spring") stays where it was,
still shown in the prompt as before.

Trap: the step must run after the accounts feature (the `users` table and its profile
column) and may use nothing else; it reads the date once, so a database migrated at
midnight decides "in the future" against one day.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Final

import apsw

from skald.errors import InvalidInputError
from skald.store.database import fetch_all
from skald.store.migrations import Feature, Migration
from skald.store.people import Directory, check_profile, write_directory

_TABLES = """
CREATE TABLE people_profiles(
    user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    date_of_birth TEXT CHECK (date_of_birth IS NULL OR date(date_of_birth) = date_of_birth),
    sex TEXT NOT NULL DEFAULT '',
    notes TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE people_supervision(
    supervisor_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    supervised_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    PRIMARY KEY(supervisor_id, supervised_id),
    CHECK (supervisor_id <> supervised_id)
) WITHOUT ROWID;
CREATE INDEX people_supervision_supervised ON people_supervision(supervised_id);
"""

# Old free-form keys (compared lower-cased, spaces and dashes as "_") and the field each
# names.
OLD_KEYS: Final = {
    "date_of_birth": "date_of_birth",
    "birthdate": "date_of_birth",
    "birth_date": "date_of_birth",
    "birthday": "date_of_birth",
    "dob": "date_of_birth",
    "born": "date_of_birth",
    "sex": "sex",
    "gender": "sex",
    "notes": "notes",
    "note": "notes",
}


def _field(key: str) -> str | None:
    return OLD_KEYS.get(key.strip().lower().replace(" ", "_").replace("-", "_"))


def _passes(field: str, text: str, today: date) -> bool:
    args = {"date_of_birth": None, "sex": "", "notes": ""} | {field: text}
    try:
        check_profile(args["date_of_birth"], args["sex"] or "", args["notes"] or "", today)
    except InvalidInputError:
        return False
    return True


def split_old_profile(profile: dict[str, str], today: date) -> tuple[Directory, dict[str, str]]:
    """The directory fields the old dict holds (valid values only) and the dict left."""
    found: dict[str, str] = {}
    left: dict[str, str] = {}
    for key, value in profile.items():
        field = _field(key)
        text = str(value).strip()
        if field is None or field in found or not text:
            left[key] = value
            continue
        if not _passes(field, text, today):
            left[key] = value
            continue
        found[field] = text
    directory = check_profile(
        found.get("date_of_birth"), found.get("sex", ""), found.get("notes", ""), today
    )
    return directory, left


def _v1_tables_and_old_profiles(c: apsw.Connection) -> None:
    c.execute(_TABLES)
    today = date.today()
    for user_id, raw in fetch_all(c, "SELECT id, profile FROM users"):
        profile = json.loads(str(raw))
        if not isinstance(profile, dict):
            continue
        directory, left = split_old_profile(profile, today)
        if directory == Directory():
            continue
        write_directory(c, str(user_id), directory)
        c.execute("UPDATE users SET profile = ? WHERE id = ?", (json.dumps(left), user_id))


PEOPLE = Feature(
    "people",
    (
        Migration(
            1,
            "directory profiles and supervision links, from the free-form profile",
            _v1_tables_and_old_profiles,
        ),
    ),
    after=("accounts",),
)
