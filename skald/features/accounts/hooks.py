"""Accounts: sign-in, users, roles, profiles; who the assistant is talking with."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from skald.core.prompt_blocks import datetime_block
from skald.core.services import ServiceSpec
from skald.plugins import hookimpl, lazy
from skald.plugins.specs import FeatureWeb

if TYPE_CHECKING:
    from skald.plugins.facade import Member, Server


skald_migrations = lazy.migrations(
    registry=("skald.store.migrations.registry:ACCOUNTS",),
    owner=("skald.store.migrations.owner:SETTINGS",),
)


skald_routes = lazy.routes(
    "skald.features.accounts.auth",
    "skald.features.accounts.users",
    "skald.features.accounts.roles",
    "skald.features.accounts.storage",
)


WEB = FeatureWeb(__file__, "accounts")
WEB.page("/profile", "ProfilePage", simple_ok=True, order=50, icon="user")
WEB.page("/admin/users", "AdminUsersPage", capability="admin.users", order=110, icon="users")
WEB.page(
    "/admin/roles",
    "AdminRolesPage",
    capability="admin.roles",
    order=120,
    icon="shield",
    sub="roleName",
)
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files


@hookimpl
def skald_placeholders() -> dict[str, str]:
    return {
        "DATETIME": "the local date and the hour, with the timezone (datetime_block)",
    }


@hookimpl
def skald_prompt_blocks(member: Member) -> dict[str, str]:
    # USER_PROFILE (who the member is) is the people feature's.
    tz = member.timezone()
    return {
        "DATETIME": datetime_block(datetime.now(tz), tz),
    }


skald_capabilities = lazy.capabilities(
    "skald.core.users:ADMIN_USERS", "skald.permissions:ADMIN_ROLES"
)


@hookimpl
def skald_services(server: Server) -> list[ServiceSpec]:
    # Expired sign-ins are deleted hourly (the check on each request is the real gate).
    from skald.core.sessions import SessionManager

    return [ServiceSpec("session-purge", server.state(SessionManager).purge_forever)]
