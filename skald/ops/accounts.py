"""The operator's account changes (`skald user deactivate|activate|delete`), done in one
place for both ways they run: by the running server (its ops routes,
`skald/features/ops/routes.py`) or, with no server, by the CLI itself.

Rule: the operator is the actor (no "own account" refusal), and the account is named
by its username. Trap: only a running server can close what the account holds open
(sockets, runtime, data key, sandbox), so the CLI asks it first and runs this itself
only when no server holds the data directory.
"""

from __future__ import annotations

from typing import Literal

from skald.core.accounts import AccountService
from skald.store.rows import User

AccountAction = Literal["deactivate", "activate", "delete"]
ACCOUNT_ACTIONS: tuple[AccountAction, ...] = ("deactivate", "activate", "delete")


async def account_action(
    accounts: AccountService, username: str, action: AccountAction
) -> tuple[User, User | None, list[str]]:
    """Find the account by name and change it: the account as it was found, as it is
    now (None: deleted), and what of its home could not be removed (a deletion's)."""
    user = await accounts.find(username)
    if action == "deactivate":
        return user, await accounts.deactivate(user.id), []
    if action == "activate":
        return user, await accounts.activate(user.id), []
    return user, None, await accounts.delete(user.id)
