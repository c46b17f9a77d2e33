"""The tool card's person-facing sentences (web/js/components/tool-text.js) are chosen
by the start of the text the server wrote for the model. Rule: every prefix the card
knows starts one of the server's texts today, and every "Not run" / restart text the
server writes has its own sentence. Trap: a reworded server text silently drops the
card back to the general "did not work" sentence, so both directions are checked here
against the server's real constants and source.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from skald.agent import loop, recovery

ROOT = Path(__file__).resolve().parents[1]
TOOL_TEXT = ROOT / "web" / "js" / "components" / "tool-text.js"
CALLS = ROOT / "skald" / "agent" / "calls.py"


def card_prefixes() -> dict[str, str]:
    block = TOOL_TEXT.read_text().split("export const SAID = [", 1)[1].split("];", 1)[0]
    return dict(re.findall(r"\['([^']+)', '([a-z_.]+)'\]", block))


def server_texts() -> list[str]:
    consts = [
        loop.CUT_CALL,
        recovery.EXEC_INTERRUPTED,
        recovery.CALL_INTERRUPTED,
        recovery.APPROVAL_SUPERSEDED,
        recovery.NOT_STARTED,
    ]
    inline = re.findall(r'"(Not run: [^"]+)"', CALLS.read_text())
    assert len(inline) >= 2, inline  # the two "the user stopped the turn" texts
    return consts + inline


def test_every_not_run_text_of_the_server_has_a_plain_sentence_on_the_tool_card() -> None:
    prefixes = card_prefixes()
    assert len(prefixes) == 6, prefixes
    for text in server_texts():
        assert any(text.startswith(p) for p in prefixes), f"no card sentence for: {text}"
    for prefix in prefixes:
        assert any(t.startswith(prefix) for t in server_texts()), f"stale prefix: {prefix}"


def test_the_tool_card_sentences_exist_in_every_language() -> None:
    keys = set(card_prefixes().values()) | {"tool.said_failed", "tool.title_connector"}
    for lang in ("en", "it", "fr"):
        table = json.loads((ROOT / "web" / "i18n" / f"{lang}.json").read_text())
        assert keys <= table.keys(), (lang, keys - table.keys())
