"""Row types of the registry, shared by the store and the core."""

from __future__ import annotations

from typing import Annotated, Literal, TypedDict

import msgspec


class RoleAttributes(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a role decides beyond its capabilities."""

    ui_mode: Literal["full", "simple"] = "full"
    encrypted: bool = True
    auto_grant: bool = False
    sandbox_network: Literal["bridge", "none"] = "bridge"
    default_security_group: str = "default"
    allowed_security_groups: list[str] = msgspec.field(default_factory=lambda: ["default"])
    default_chat_agent: str = "assistant"
    # Storage quota of each member, in MiB (0: no limit); None: `storage.member_quota_mb`.
    storage_quota_mb: Annotated[int, msgspec.Meta(ge=0)] | None = None
    # A turn's budget (runaway turns end with a clear message): model calls per turn
    # (None: `assistant.max_rounds`), and input + output tokens per turn (None: no limit).
    turn_max_rounds: Annotated[int, msgspec.Meta(ge=1, le=200)] | None = None
    turn_max_tokens: Annotated[int, msgspec.Meta(ge=1000)] | None = None


class Role(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    display_name: str
    builtin: bool
    capabilities: list[str]
    attributes: RoleAttributes


class User(msgspec.Struct, frozen=True, kw_only=True):
    """A registry user row, without any secret."""

    id: str
    username: str
    display_name: str
    role: str
    encrypted: bool
    active: bool
    locale: str
    created_at: str
    updated_at: str
    profile: dict[str, str] = msgspec.field(default_factory=dict)


class UserChanges(TypedDict, total=False):
    """The non-secret fields of an account a change gives (`update_user`); one left out,
    or None, stays as it is."""

    display_name: str | None
    role: str | None
    locale: str | None
    profile: dict[str, str] | None


class UserSecrets(msgspec.Struct, frozen=True, kw_only=True):
    """What proves a password: a hash (unencrypted accounts) or key wraps (encrypted)."""

    password_hash: str | None
    wraps: dict[str, str]  # kind -> JSON of the wrapped key


def effective_locale(own: str, household: str | None) -> str:
    """The language a member's app and words are in: their own choice, else (stored as
    "") the household's as it is now, else English. The one rule (issue 31): a member
    without a language follows the household's live, it is never copied."""
    return own or household or "en"
