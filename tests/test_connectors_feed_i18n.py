"""A feed item may carry its name and description in other languages (`i18n`), and say
it is for developers (`audience`); the default feed translates every item into Italian
and French and keeps the MCP reference test server out of a household's list.

Rule: `i18n` maps a language code to `{display_name, description}` and nothing else; a
typo in it refuses the item like any other typo in `connector.json`. Trap: the default
feed's digests pin each `connector.json`: a translation added without updating
`connectors.json` refuses the item, which the listing below would show.
"""

from __future__ import annotations

import json

import msgspec
import pytest

from skald.features.connectors.feed import Feed, Manifest
from skald.features.connectors.service import DEFAULT_FEED

BASE = {"name": "clock", "transport": "stdio", "command": ["clock"]}


async def test_every_default_feed_item_speaks_italian_and_french_and_the_test_server_is_for_developers() -> (
    None
):
    listed = await Feed(str(DEFAULT_FEED)).manifests()
    assert listed and all(refused is None for _, _, refused in listed), listed
    for item, manifest, _ in listed:
        assert manifest is not None
        for lang in ("it", "fr"):
            local = manifest.i18n[lang]
            assert local.display_name and local.description, (item.folder, lang)
        expected = "developers" if item.folder == "everything" else "everyone"
        assert manifest.audience == expected, item.folder


def test_a_translation_holds_only_a_name_and_a_description_under_a_language_code() -> None:
    ok = msgspec.json.decode(
        json.dumps({**BASE, "i18n": {"it": {"display_name": "Orologio"}}}), type=Manifest
    )
    assert ok.i18n["it"].display_name == "Orologio" and ok.i18n["it"].description == ""
    for bad in (
        {"it": {"display_name": "Orologio", "command": ["rm"]}},  # a field other than text
        {"Italian": {"display_name": "Orologio"}},  # not a language code
    ):
        with pytest.raises(msgspec.ValidationError):
            msgspec.json.decode(json.dumps({**BASE, "i18n": bad}), type=Manifest)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(json.dumps({**BASE, "audience": "admins"}), type=Manifest)
