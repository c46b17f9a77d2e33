"""The account service: the rules of creating, changing, (de)activating and deleting an
account, for every caller.

Rule: the web API (`features/accounts/users.py`) and the CLI (`skald user ...`) both go through
`AccountService`; their handlers only parse, authorise and serialise. While a server
serves the data directory, the CLI asks *that server's* service over the ops channel
(`/api/ops/users/*`), because only the server holds what a deactivation must close: the
member's WebSockets, their live runtime, their unlocked data key and their sandbox. With
no server, the CLI builds a service without `live` (nothing is open anywhere).

Rule: revocation is synchronous and complete before the call returns, in this order:
the account is marked inactive (no new login succeeds), its session rows are deleted
(every cookie is dead at once, even after a later reactivation), then the live parts
are closed (sockets, runtime, data key, sandbox). Every check (own account, last
administrator, role rules) runs before the first write, so a refused call changes
nothing.

Trap: "activate" is one operation whatever the route: `PATCH {active: true}` and
`POST .../activate` both land in `activate`, which also unlocks an unencrypted member
as a boot would (their background work runs without a password). Two code paths for
one state change drifted apart once; keep one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from skald.core import kdf_pool
from skald.core.events import RevokeCode
from skald.core.users import CreatedUser, UserManager
from skald.errors import ConflictError, InvalidInputError, NotFoundError
from skald.log import get_logger
from skald.store.registry import Registry
from skald.store.rows import User
from skald.store.sessions import SessionStore

log = get_logger("skald.accounts")


class OwnAccountError(ConflictError):
    """An administrator tried to lock themself out (deactivate, delete, re-role)."""

    code = "own_account"


class EncryptionMismatchError(ConflictError):
    """A role change that would move an account between encrypted and not."""

    code = "encryption_mismatch"


class LiveAccounts(Protocol):
    """What a running server holds for a member (implemented by `Runtime`)."""

    async def account_revoked(self, user: User, code: RevokeCode) -> None:
        """Close the member's sockets, runtime and data key; stop (deactivated) or
        remove (deleted) their sandbox. Their session rows are already gone."""

    async def account_activated(self, user: User) -> None:
        """The member may work again (unlock an unencrypted one, as at boot)."""

    async def account_changed(self, user: User, *, role_changed: bool) -> None:
        """Profile or role changed: narrow what the role no longer allows, tell their tabs."""

    async def role_changed(self, role: str) -> None:
        """A role's rules were saved: narrow what it no longer allows for its members."""


@dataclass(eq=False)
class AccountService:
    users: UserManager
    registry: Registry
    sessions: SessionStore
    live: LiveAccounts | None = None

    async def role_changed(self, role: str) -> None:
        """After a role's attributes were saved (the Roles page): the server narrows what
        it no longer allows in its members' open conversations."""
        if self.live is not None:
            await self.live.role_changed(role)

    async def get(self, user_id: str) -> User:
        user = await self.registry.get_user(user_id)
        if user is None:
            raise NotFoundError("no such user")
        return user

    async def find(self, username: str) -> User:
        return await self.users.get(username)

    @staticmethod
    def _not_self(actor: User | None, user: User, action: str) -> None:
        # The last door out must not be closed from the inside.
        if actor is not None and actor.id == user.id:
            raise OwnAccountError(f"you cannot {action} your own account")

    # -- creation -----------------------------------------------------------------------

    async def create(
        self,
        username: str,
        password: str,
        role: str,
        display_name: str | None = None,
        *,
        actor: User | None = None,
    ) -> CreatedUser:
        # An administrator (or the operator's CLI) is a trusted caller of the key-derivation
        # pool: a flood of strangers' sign-ins must not make adding a member answer 503.
        with kdf_pool.trusted():
            created = await self.users.create(username, password, role, display_name)
        if self.live is not None:
            await self.live.account_activated(created.user)
        log.info("user created", username=created.user.username, role=role, by=_by(actor))
        return created

    async def admin_exists(self) -> bool:
        """Whether an active account can manage accounts: first-run setup is over."""
        return await self.users.admin_exists()

    async def create_first_admin(
        self, username: str, password: str, display_name: str | None, locale: str | None
    ) -> CreatedUser:
        """The household's first administrator, from the setup page: created, not
        unlocked (signing them in next unlocks and attaches them).

        Trap: it checks neither that no administrator exists nor the setup token: the
        caller does both first, under the sign-in throttle."""
        created = await self.users.create(username, password, "admin", display_name)
        if locale:
            await self.registry.update_user(created.user.id, locale=locale)
        return created

    # -- changes ------------------------------------------------------------------------

    async def update(
        self,
        user_id: str,
        *,
        actor: User | None = None,
        display_name: str | None = None,
        role: str | None = None,
        locale: str | None = None,
        profile: dict[str, str] | None = None,
        active: bool | None = None,
    ) -> User:
        """Change an account's fields; `active` goes through `deactivate`/`activate`."""
        user = await self.get(user_id)
        role_changed = role is not None and role != user.role
        if role_changed:
            assert role is not None
            self._not_self(actor, user, "change the role of")
            await self._check_role_change(user, role)
        if active is False and user.active:
            self._not_self(actor, user, "deactivate")
            await self.users.refuse_last_admin(user, "deactivate them")
        await self.registry.update_user(
            user.id, display_name=display_name, role=role, locale=locale, profile=profile
        )
        if active is False and user.active:
            await self._deactivate(await self.get(user.id))
        elif active is True and not user.active:
            await self._activate(user)
        updated = await self.get(user.id)
        if self.live is not None:
            await self.live.account_changed(updated, role_changed=role_changed)
        return updated

    async def change_password(self, username: str, current: str, new: str) -> None:
        """A member's own change: `current` proves it is them (`AuthenticationError`
        when wrong); their data key is wrapped again, the data file untouched.

        Trap: no session ends here; the caller signs the member's other sessions out."""
        await self.users.change_password(username, current, new)

    async def _check_role_change(self, user: User, role: str) -> None:
        target = await self.registry.get_role(role)
        if target is None:
            raise InvalidInputError(f"no role named {role!r}")
        if target.attributes.encrypted != user.encrypted:
            state = "encrypted" if user.encrypted else "not encrypted"
            other = "not " if user.encrypted else ""
            raise EncryptionMismatchError(
                f"{user.username}'s data is {state}; the role {role!r} is {other}encrypted: "
                "moving between the two is not supported"
            )

    # -- (de)activation and deletion ----------------------------------------------------

    async def deactivate(self, user_id: str, *, actor: User | None = None) -> User:
        """Lock the account out now; its data is kept. Idempotent."""
        user = await self.get(user_id)
        self._not_self(actor, user, "deactivate")
        await self.users.refuse_last_admin(user, "deactivate them")
        updated = await self._deactivate(user)
        log.info("user deactivated", username=user.username, by=_by(actor))
        return updated

    async def _deactivate(self, user: User) -> User:
        # Marks the account inactive and deletes its sessions in one transaction.
        await self.registry.set_active(user.id, False)
        if self.live is not None:
            await self.live.account_revoked(user, "deactivated")
        await self.users.lock(user.id)
        return await self.get(user.id)

    async def activate(self, user_id: str, *, actor: User | None = None) -> User:
        """Let a deactivated account sign in again. Idempotent."""
        user = await self.get(user_id)
        updated = await self._activate(user)
        log.info("user activated", username=user.username, by=_by(actor))
        return updated

    async def _activate(self, user: User) -> User:
        await self.registry.set_active(user.id, True)
        updated = await self.get(user.id)
        if self.live is not None:
            await self.live.account_activated(updated)
        return updated

    async def delete(self, user_id: str, *, actor: User | None = None) -> list[str]:
        """Remove the account, its owner database, its home and its sandbox. Not undoable.

        Returns what of the home could not be removed (`<user id>/<path>: reason`; files
        made by root in the sandbox), so the caller can say so instead of "done"."""
        user = await self.get(user_id)
        self._not_self(actor, user, "delete")
        await self.users.refuse_last_admin(user, "delete them")
        await self.sessions.delete_for_user(user.id)
        if self.live is not None:
            await self.live.account_revoked(user, "deleted")
        left = await self.users.delete(user.username)
        log.info("user deleted", username=user.username, by=_by(actor), left_behind=len(left))
        return left


def _by(actor: User | None) -> str:
    return "operator (CLI)" if actor is None else actor.username
