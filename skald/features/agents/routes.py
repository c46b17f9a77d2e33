"""The agents a member can talk to (capability `chat`): their own chat agent (the one
their role names) and the helpers it may hand work to. Names and descriptions come from
the agents' `meta.json`; the web app shows its own translated words for the built-in
ones (`agent.<id>.*` in web/i18n) and these for any other."""

from __future__ import annotations

from typing import Literal

import msgspec
from litestar import get
from litestar.di import NamedDependency

from skald.agent.prompts import AgentDef, default_chat_agent
from skald.api.deps import AuthRequest, requires
from skald.permissions import CHAT as CHAT_CAP
from skald.plugins.facade import Server  # Litestar reads the annotations


class AgentInfo(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    description: str
    role: Literal["chat", "helper"]  # the one you talk to, or a helper it calls on
    # meta.json's icon and friendly descriptions by language (issue 31), when it has them.
    icon: str | None = None
    about: dict[str, str] = {}
    added: bool = False  # the operator's (data/agents/), not shipped with Skald


def _info(agent: AgentDef, role: Literal["chat", "helper"]) -> AgentInfo:
    return AgentInfo(
        id=agent.id,
        name=agent.name,
        description=agent.description,
        role=role,
        icon=agent.icon,
        about=dict(agent.about or {}),
        added=agent.home is not None,
    )


@get("/api/agents", guards=[requires(CHAT_CAP)])
async def list_agents(request: AuthRequest, server: NamedDependency[Server]) -> list[AgentInfo]:
    principal = request.user
    mine = default_chat_agent(principal.role.attributes.default_chat_agent, server.agents)
    out = [_info(mine, "chat")]
    # Helpers are task agents the chat agent starts (`execute_task`); an agent with a
    # tool allow-list that leaves that tool out (the children's) has none.
    if mine.tools is None or "execute_task" in mine.tools:
        out += [
            _info(a, "helper")
            for a in sorted(server.agents.values(), key=lambda a: a.id)
            if a.type == "task"
        ]
    return out


ROUTES = [list_agents]
