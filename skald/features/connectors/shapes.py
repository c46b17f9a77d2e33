"""What the connector routes' signatures name: their request and answer structs that live
outside `routes.py`, kept here, apart from the code that acts on them.

Rule: Litestar builds each route's signature model from its annotations when the app is
built, so every type a handler names must be importable then; the modules behind them
(the feed, the household's own items, the trial, the sign-in providers) are imported at
first use instead (docs/dev/connectors.md, "What loads at first use"). Each struct is
also importable from the module it belongs to.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from skald.features.connectors.store import Scope

NAME = r"^[a-z0-9][a-z0-9-]{0,39}$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
HEADER_NAME = r"^[A-Za-z0-9-]{1,64}$"

Text = Annotated[str, msgspec.Meta(max_length=4000)]


class Localized(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An item's name and description in one language (`i18n.<locale>`); an empty field
    falls back to the English one."""

    display_name: str = ""
    description: str = ""


class OwnIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the page's "Add a server" form sends."""

    name: Annotated[str, msgspec.Meta(pattern=NAME)]
    kind: Literal["npm", "pip", "command", "url"]
    package: Annotated[str, msgspec.Meta(max_length=200)] = ""  # npm / pip
    module: Annotated[str, msgspec.Meta(max_length=100)] = ""  # pip: `python3 -m <module>`
    args: Text = ""  # npm / pip: extra arguments (a shell-quoted line)
    command: Text = ""  # command: the whole command line
    url: Text = ""  # url: the remote server's endpoint
    env: dict[Annotated[str, msgspec.Meta(pattern=ENV_NAME)], Text] = msgspec.field(
        default_factory=dict
    )
    headers: dict[Annotated[str, msgspec.Meta(pattern=HEADER_NAME)], Text] = msgspec.field(
        default_factory=dict
    )
    scope: Scope = "personal"
    display_name: Annotated[str, msgspec.Meta(max_length=100)] = ""
    description: Annotated[str, msgspec.Meta(max_length=1000)] = ""
    icon: Annotated[str, msgspec.Meta(max_length=8)] = ""


class TrialTool(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str


class TrialOut(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool
    tools: list[TrialTool] = msgspec.field(default_factory=list)
    error: str | None = None
    stderr: list[str] = msgspec.field(default_factory=list)


_URL = Annotated[str, msgspec.Meta(min_length=1, max_length=2000)]
_PARAM = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]


class ProviderIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The form: `client_secret` absent (None) keeps the stored one, "" removes it."""

    display_name: Annotated[str, msgspec.Meta(max_length=100)] = ""
    authorize_url: _URL
    token_url: _URL
    client_id: Annotated[str, msgspec.Meta(min_length=1, max_length=500)]
    client_secret: Annotated[str, msgspec.Meta(max_length=2000)] | None = None
    extra_params: dict[_PARAM, Annotated[str, msgspec.Meta(max_length=500)]] = msgspec.field(
        default_factory=dict
    )


class ProviderOut(msgspec.Struct, frozen=True, kw_only=True):
    slug: str
    display_name: str
    authorize_url: str
    token_url: str
    client_id: str
    has_secret: bool  # never the secret itself
    extra_params: dict[str, str]
    updated_at: str
    used_by: list[str] = msgspec.field(default_factory=list)  # installed connectors naming it
