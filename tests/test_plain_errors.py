"""Every failure a member can meet has a plain sentence, in every language the web UI
speaks, and the UI's English is the server's (issue 16 fault 6)."""

from __future__ import annotations

import json
import typing
from pathlib import Path

from skald.core.plain_errors import PLAIN
from skald.errors import DiskFullError, QuotaExceededError
from skald.llm.errors import ErrorKind

I18N = Path(__file__).resolve().parent.parent / "web" / "i18n"
LOOP_CODES = ("cut_off", "turn_budget", "repeated_failure", "internal")


def test_every_failure_code_has_a_plain_sentence() -> None:
    codes = {*typing.get_args(ErrorKind), *LOOP_CODES}
    codes |= {QuotaExceededError.code, DiskFullError.code}
    assert codes <= set(PLAIN), codes - set(PLAIN)


def test_every_plain_sentence_is_translated_and_the_english_is_the_servers() -> None:
    for lang in ("en", "it", "fr"):
        strings = json.loads((I18N / f"{lang}.json").read_text())
        missing = [c for c in PLAIN if f"chat.error.{c}" not in strings]
        assert missing == [], (lang, missing)
        if lang == "en":
            assert {c: strings[f"chat.error.{c}"] for c in PLAIN} == PLAIN
