"""Accounts: sign-in, users, roles, profiles; who the assistant is talking with."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from skald.core.prompt_blocks import datetime_block, profile_block
from skald.core.services import ServiceSpec
from skald.plugins import hookimpl
from skald.plugins.specs import Page
from skald.store.migrations import Feature
from skald.store.migrations.owner import SETTINGS
from skald.store.migrations.registry import ACCOUNTS

if TYPE_CHECKING:
    from skald.core.runtime import Runtime
    from skald.core.user_runtime import UserRuntime
    from skald.permissions import Capability


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    return [ACCOUNTS] if schema == "registry" else [SETTINGS]


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.accounts import auth, roles, storage, users

    return [*auth.ROUTES, *users.ROUTES, *roles.ROUTES, *storage.ROUTES]


@hookimpl
def skald_pages() -> list[Page]:
    return [
        Page(path="/profile", title="nav.profile", simple_ok=True, order=50),
        Page(path="/admin/users", title="nav.users", capability="admin.users", order=110),
        Page(path="/admin/roles", title="nav.roles", capability="admin.roles", order=120),
    ]


@hookimpl
def skald_placeholders() -> dict[str, str]:
    return {
        "USER_PROFILE": "who the agent is talking with (profile_block)",
        "DATETIME": "the local date and the hour, with the timezone (datetime_block)",
    }


@hookimpl
def skald_prompt_blocks(member: UserRuntime) -> dict[str, str]:
    user = member.user
    tz = member.timezone()
    household = member.instance.current.household_name if member.instance else ""
    return {
        "USER_PROFILE": profile_block(
            user.display_name, user.profile, user.locale, household=household
        ),
        "DATETIME": datetime_block(datetime.now(tz), tz),
    }


@hookimpl
def skald_capabilities() -> list[Capability]:
    # Importing the module that enforces a capability declares it.
    from skald.core.users import ADMIN_USERS
    from skald.features.accounts.roles import ADMIN_ROLES

    return [ADMIN_USERS, ADMIN_ROLES]


@hookimpl
def skald_services(runtime: Runtime) -> list[ServiceSpec]:
    # Expired sign-ins are deleted hourly (the check on each request is the real gate).
    return [ServiceSpec("session-purge", runtime.purge_sessions_forever)]
