"""The agents a member can talk to (capability `chat`): their own chat agent (the one
their role names) and the helpers it may hand work to. Names and descriptions come from
the agents' `meta.json`; the web app shows its own translated words for the built-in
ones (`agent.<id>.*` in web/i18n) and these for any other."""

from __future__ import annotations

from typing import Literal

import msgspec
from litestar import get
from litestar.di import NamedDependency

from skald.agent.prompts import default_chat_agent
from skald.api.deps import AuthRequest, requires
from skald.core.runtime import Runtime
from skald.permissions import CHAT as CHAT_CAP


class AgentInfo(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    description: str
    role: Literal["chat", "helper"]  # the one you talk to, or a helper it calls on


@get("/api/agents", guards=[requires(CHAT_CAP)])
async def list_agents(request: AuthRequest, rt: NamedDependency[Runtime]) -> list[AgentInfo]:
    principal = request.user
    mine = default_chat_agent(principal.role.attributes.default_chat_agent, rt.agents)
    out = [AgentInfo(id=mine.id, name=mine.name, description=mine.description, role="chat")]
    # Helpers are task agents the chat agent starts (`execute_task`); an agent with a
    # tool allow-list that leaves that tool out (the children's) has none.
    if mine.tools is None or "execute_task" in mine.tools:
        out += [
            AgentInfo(id=a.id, name=a.name, description=a.description, role="helper")
            for a in sorted(rt.agents.values(), key=lambda a: a.id)
            if a.type == "task"
        ]
    return out


ROUTES = [list_agents]
