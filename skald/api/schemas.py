"""Wire types of the HTTP API (msgspec structs; Litestar validates and documents them)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from skald.store.rows import Role, RoleAttributes, User

Locale = Literal["en", "it", "fr"]
Username = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
Password = Annotated[str, msgspec.Meta(min_length=1, max_length=1024)]
DisplayName = Annotated[str, msgspec.Meta(min_length=1, max_length=80)]
RoleName = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
ProfileField = Annotated[str, msgspec.Meta(max_length=2000)]
# The token is ASCII (`secrets.token_urlsafe`); anything else is refused here, as bad input.
SetupToken = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"^[!-~]+$")]


class ErrorDetail(msgspec.Struct, frozen=True):
    code: str
    message: str


class ErrorBody(msgspec.Struct, frozen=True):
    """Every error the API returns has this shape."""

    error: ErrorDetail


class Health(msgspec.Struct, frozen=True, kw_only=True):
    status: Literal["ok", "degraded"]
    version: str
    uptime_s: float
    # When this server process started (its own clock, epoch seconds): a page that sees
    # another value after a reconnect knows Skald restarted, however soon.
    started_at: float
    reasons: list[str]
    # The sandboxes' Docker: ok, starting, unreachable, image_missing or disabled.
    docker: str = "disabled"
    # Only for `?details=true` from a signed-in administrator (`admin.system`): the
    # features' figures (`skald_health_details`), e.g. connectors' retained memory.
    admin: dict[str, Any] | None = None


class Me(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    username: str
    display_name: str
    role: str
    capabilities: list[str]
    ui_mode: Literal["full", "simple"]
    locale: str  # the one in use: their own, else the household's (`effective_locale`)
    encrypted: bool
    csrf_token: str
    locale_own: bool = True  # False: no language of their own, the household's is used


class LoginIn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    username: Username
    password: Password


class MePatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    display_name: DisplayName | None = None
    locale: Locale | Literal[""] | None = None  # "": follow the household's language


class PasswordChangeIn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    current_password: Password
    new_password: Password


class SetupState(msgspec.Struct, frozen=True):
    needed: bool


class SetupIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    token: SetupToken
    username: Username
    password: Password
    display_name: DisplayName | None = None
    locale: Locale | None = None


class SetupOut(msgspec.Struct, frozen=True, kw_only=True):
    me: Me
    recovery_code: str | None


class UserCreateIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    username: Username
    password: Password
    role: RoleName
    display_name: DisplayName | None = None


class UserCreated(msgspec.Struct, frozen=True, kw_only=True):
    user: User
    recovery_code: str | None


class UserPatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    display_name: DisplayName | None = None
    role: RoleName | None = None
    active: bool | None = None
    locale: Locale | Literal[""] | None = None  # "": follow the household's language
    profile: (
        Annotated[
            dict[Annotated[str, msgspec.Meta(min_length=1, max_length=40)], ProfileField],
            msgspec.Meta(max_length=20),
        ]
        | None
    ) = None


class RoleIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: RoleName
    display_name: DisplayName
    capabilities: Annotated[
        list[Annotated[str, msgspec.Meta(max_length=64)]], msgspec.Meta(max_length=100)
    ]
    attributes: RoleAttributes = msgspec.field(default_factory=RoleAttributes)


class RolePatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    display_name: DisplayName | None = None
    capabilities: (
        Annotated[list[Annotated[str, msgspec.Meta(max_length=64)]], msgspec.Meta(max_length=100)]
        | None
    ) = None
    attributes: RoleAttributes | None = None


__all__ = [
    "ErrorBody",
    "ErrorDetail",
    "Health",
    "LoginIn",
    "Me",
    "MePatch",
    "PasswordChangeIn",
    "Role",
    "RoleIn",
    "RolePatch",
    "SetupIn",
    "SetupOut",
    "SetupState",
    "User",
    "UserCreateIn",
    "UserCreated",
    "UserPatch",
]
