"""Roles and capabilities (capability `admin.roles`; listing also for `admin.users`)."""

from __future__ import annotations

from litestar import get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from skald.api.deps import requires
from skald.api.errors import ApiError
from skald.api.openapi import errors
from skald.api.schemas import RoleIn, RolePatch
from skald.core.accounts import AccountService
from skald.core.users import ADMIN_USERS
from skald.errors import NotFoundError
from skald.permissions import ADMIN_ROLES, Capability, declared
from skald.plugins.facade import Server  # Litestar reads the annotations
from skald.store.registry import Registry
from skald.store.rows import Role, RoleAttributes

ADMIN = [requires(ADMIN_ROLES)]
# Without these the admin role could lock every administrator out of the instance.
ADMIN_KEEPS = (ADMIN_USERS, ADMIN_ROLES)


def _registry(server: Server) -> Registry:
    return server.state(AccountService).registry


@get("/api/roles", guards=[requires(ADMIN_ROLES, ADMIN_USERS)])
async def list_roles(server: NamedDependency[Server]) -> list[Role]:
    return await _registry(server).list_roles()


@get("/api/capabilities", guards=ADMIN)
async def list_capabilities() -> list[Capability]:
    """The catalogue as the code declares it; `reserved_for` marks the ones no feature
    checks yet (a role may hold them; they grant nothing until that feature lands)."""
    return declared()


# Agents that only make sense in a conversation a feature opens for them (a project's):
# never a role's default chat agent, whatever a client sends.
NOT_A_DEFAULT = frozenset({"project-coordinator"})


def _check_default_agent(attrs: RoleAttributes) -> None:
    if attrs.default_chat_agent in NOT_A_DEFAULT:
        raise ApiError(
            400,
            "invalid_input",
            f"{attrs.default_chat_agent} runs project conversations only; "
            "it cannot be a role's default chat agent",
        )


@post("/api/roles", guards=ADMIN, status_code=201, responses=errors(400, 409))
async def create_role(data: JSONBody[RoleIn], server: NamedDependency[Server]) -> Role:
    _check_default_agent(data.attributes)
    role = Role(
        name=data.name,
        display_name=data.display_name,
        builtin=False,
        capabilities=sorted(set(data.capabilities)),
        attributes=data.attributes,
    )
    await _registry(server).save_role(role, create=True)
    return role


@patch("/api/roles/{name:str}", guards=ADMIN, responses=errors(404, 409))
async def patch_role(
    name: FromPath[str], data: JSONBody[RolePatch], server: NamedDependency[Server]
) -> Role:
    role = await _registry(server).get_role(name)
    if role is None:
        raise NotFoundError(f"no role named {name!r}")
    caps = role.capabilities if data.capabilities is None else sorted(set(data.capabilities))
    attrs = role.attributes if data.attributes is None else data.attributes
    _check_default_agent(attrs)
    if name == "admin" and not {c.name for c in ADMIN_KEEPS} <= set(caps):
        keeps = " and ".join(c.name for c in ADMIN_KEEPS)
        raise ApiError(409, "admin_lockout", f"the admin role must keep {keeps}")
    if attrs.encrypted != role.attributes.encrypted and await _registry(
        server
    ).count_users_with_role(name):
        raise ApiError(
            409,
            "encryption_mismatch",
            "this role has members: whether it is encrypted can no longer change",
        )
    updated = Role(
        name=name,
        display_name=data.display_name or role.display_name,
        builtin=role.builtin,
        capabilities=caps,
        attributes=attrs,
    )
    await _registry(server).save_role(updated, create=False)
    await server.state(AccountService).role_changed(name)
    return updated


ROUTES = [list_roles, list_capabilities, create_role, patch_role]
