"""One unlocked member's live state: their chat hub and their approval gate.

Built when the member's data is unlocked (login, or boot for unencrypted members) and
closed when it is locked; a turn cut short by a lock or a crash is resumed at the next
unlock. Each turn is assembled fresh (prompt, tools, model source), so a role change,
a new model or an edited agent applies from the next turn on.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo

from skald.agent import ApprovalRequest, ChildAgent, LoopConfig, Tool, ToolContext
from skald.agent.loop import DEFAULT_MAX_TOKENS
from skald.agent.prompts import AgentDef, PromptCache, default_chat_agent
from skald.agent.subagent import root_of
from skald.core.approvals import DefaultGate, RuleSource
from skald.core.ask import AskUserTool
from skald.core.events import InboxChanged
from skald.core.hub import ChatHub, TurnSetup
from skald.core.llm_service import ADMIN_MODELS_CAP
from skald.core.model_profile import VARIANTS, offered, prompt_values, turn_profile
from skald.core.model_select import Outcome, compact_threshold
from skald.core.services import ServiceRunner, ServiceSpec
from skald.core.unattended import PacedClient, Unattended
from skald.core.users import UnlockedUser
from skald.errors import InvalidInputError, NotFoundError
from skald.features.notifications.quiet import default_zone
from skald.files.router import PathRouter
from skald.llm.client import ModelClient
from skald.log import get_logger
from skald.permissions import can
from skald.plugins.facade import Member
from skald.plugins.manager import Plugins
from skald.plugins.specs import AfterTurn, BeforeTurn
from skald.quota import BudgetSource
from skald.sandbox.tool import SANDBOX_EXEC
from skald.store.conversations import Conversation
from skald.store.inbox import InboxStore
from skald.store.member_now import MemberNow
from skald.store.note_paths import parse_note_path
from skald.store.plugins import snapshot_in
from skald.store.rows import Role, User
from skald.tools.memory import MEMORY_SHARED

if TYPE_CHECKING:
    from skald.plugins.facade import Server


def effective_group(chosen: str | None, role: Role) -> str:
    """The chosen group when the role allows it, else the role's default group."""
    attrs = role.attributes
    if chosen is not None and (
        chosen in attrs.allowed_security_groups or chosen == attrs.default_security_group
    ):
        return chosen
    return attrs.default_security_group


BYPASS_SECONDS = 15 * 60
INJECTED_NOTE_CHARS = 8000  # per note an agent's inject_memory names

log = get_logger("skald.user_runtime")


class UserRuntime:
    def __init__(
        self,
        handle: UnlockedUser,
        role: Role,
        *,
        server: Server,
        plugins: Plugins,
        agents_root: Path,
        router: PathRouter,
        rules: RuleSource | None = None,
        budget: BudgetSource | None = None,
    ) -> None:
        # What the server offers every member (models, agents, events, the household's
        # settings...), through the same facade the features see.
        self.server = server
        self.instance = server.instance
        # Tools, prompt blocks and approval facts come from the features' hooks.
        self.plugins = plugins
        self.handle = handle
        self.budget = budget  # storage quota and free disk, checked by every write
        self.user = handle.user
        self.role = role
        self.llm = server.llm
        self.agents = server.agents
        self.agents_root = agents_root
        # AGENT.md and its includes, read again only when one of the files changed.
        self.prompts = PromptCache()
        self.shared = server.shared_memory
        self.config = server.config.assistant
        self.events = server.events
        self.inbox = InboxStore(handle.db)
        self.gate = DefaultGate(
            self._on_request,
            rules=rules,
            group_of=self.security_group_of,
            bypassed=self.inbox.bypassed,
            extra_facts=self.plugins.approval_facts,
        )
        # Conversations whose current turn nobody watches (a scheduled job's run, a
        # background task): there a call that needs a person is refused at once, and
        # model requests are paced (core/unattended.py).
        self.unattended = Unattended()
        self.unattended_gate = DefaultGate(
            unattended=True,
            rules=rules,
            group_of=self.security_group_of,
            bypassed=self.inbox.bypassed,
            extra_facts=self.plugins.approval_facts,
        )
        # This member's background work: recovery at unlock, Inbox chores... Stopped (and
        # so cancelled) when their data is locked; `Runtime.service_health` reports it.
        self.services = ServiceRunner(f"member {self.user.username}")
        self._chore_ids = itertools.count(1)
        self.ask = AskUserTool(self.inbox, self.inbox_changed)
        # The member's mounts (home, manual, notes, plugins'), as the runtime collected them.
        self.router = router
        # The sandbox manager as it was when they unlocked (None before it is built).
        self.sandbox = server.sandbox
        self._member: Callable[[str], Awaitable[tuple[User, Role]]] | None = server.fetch
        # Set by `_before_turn` once it read the role and switches for the turn's setup.
        self._fresh = False
        default = default_chat_agent(role.attributes.default_chat_agent, self.agents)
        self.hub = ChatHub(
            self.user.id,
            handle.db,
            self.events,
            self.turn_setup,
            default.id,
            retire=self._retire,
            shows_detail=lambda: can(self.role, ADMIN_MODELS_CAP),
            before_turn=self._before_turn,
            after_turn=self._after_turn,
        )
        self.services.add(ServiceSpec("resume", self._resume, order=10, restart=False))
        # What the features see of this member (their hooks get it, never this object).
        self.facade = Member(self, server)
        # The Inbox's question tool: the ask feature offers it, the Inbox answers it.
        self.facade._state.put(self.ask)

    async def _resume(self) -> None:
        """After a restart or an unlock: finish what a crash cut short."""
        await self.hub.resume_interrupted()

    @property
    def shared_readable(self) -> bool:
        # Roles without `memory.shared` (children by default) do not see household notes.
        return can(self.role, MEMORY_SHARED)

    @property
    def may_execute(self) -> bool:
        """`execute_cmd` is offered (tool and prompt block) only with `sandbox.exec`."""
        return self.sandbox is not None and self.can_fetch_member and can(self.role, SANDBOX_EXEC)

    def agent_for(self, conversation: Conversation) -> AgentDef:
        agent = self.agents.get(conversation.agent_id)
        if agent is None or agent.type != "chat":
            return default_chat_agent(self.role.attributes.default_chat_agent, self.agents)
        return agent

    @property
    def can_fetch_member(self) -> bool:
        return self._member is not None

    async def fetch_member(self) -> tuple[User, Role]:
        """The member's row and role as they are now (read fresh on every call)."""
        if self._member is None:
            return self.user, self.role
        return await self._member(self.user.id)

    def timezone(self) -> ZoneInfo:
        """The member's time zone: their own (`timezone` in the profile) when it is a real
        zone, else the household's (the administrator's choice, else the config's). The
        one rule for the prompt's DATETIME, jobs and quiet hours."""
        household = self.instance.timezone() if self.instance else ZoneInfo(self.config.timezone)
        return ZoneInfo(default_zone(self.user.profile.get("timezone"), household.key))

    async def _before_turn(self, conversation_id: str, text: str) -> BeforeTurn:
        """The plugins' say before this member's turn, with their switches and grants
        and the member's role as they are now (a plugin switched off is gone at once);
        the turn's setup, next, uses what this read (one trip, not two)."""
        await self._read_fresh()
        verdict = await self.plugins.before_turn(self.facade, conversation_id, text)
        self._fresh = verdict.block is None  # a blocked turn has no setup to use it
        return verdict

    async def _read_fresh(self) -> Role:
        """The member's role and the plugins' switches as they are now, in one trip."""
        if self._member is None:
            self.plugins.switches.apply(await self.server.db.call(snapshot_in))
            return self.role
        user, role, snapshot = await self.server.state(MemberNow).read(self.user.id)
        if user is None:
            raise NotFoundError("no such user")
        if role is None:
            raise NotFoundError(f"the role {user.role!r} no longer exists")
        self.role = role
        self.plugins.switches.apply(snapshot)
        return role

    async def _after_turn(self, conversation_id: str, reply: str) -> AfterTurn:
        return await self.plugins.after_turn(self.facade, conversation_id, reply)

    async def _prompt_values(self, conversation_id: str | None = None) -> dict[str, str]:
        return await self.plugins.prompt_blocks(self, conversation_id)

    async def _injected(self, agent: AgentDef) -> str:
        """The notes the agent's `inject_memory` names, each under its path, read now (an
        edited note applies from the next turn). A missing note is said to be missing;
        household notes only for a role that may read them (`memory.shared`)."""
        if not agent.inject_memory:
            return ""
        blocks = []
        for path in agent.inject_memory:
            blocks.append(f"### {path}\n{await self._note_text(path)}")
        return "\n## Notes given to you\n\n" + "\n\n".join(blocks) + "\n"

    async def _note_text(self, agent_path: str) -> str:
        try:
            note = parse_note_path(agent_path)
        except InvalidInputError:
            return "(not a note path)"
        if note.is_shared and not self.shared_readable:
            return "(not available to this member)"
        store = self.shared if note.is_shared else self.handle.store
        try:
            text = await store.note_get(note.path)
        except NotFoundError:
            return "(no such note yet)"
        if len(text) > INJECTED_NOTE_CHARS:
            text = text[:INJECTED_NOTE_CHARS] + f"\n(cut at {INJECTED_NOTE_CHARS} characters)"
        return text.strip() or "(empty)"

    def all_tools(self) -> list[Tool]:
        """Every tool the features give this member, before any agent's allow-list."""
        return self.plugins.tools(self)

    def _tools(self, agent: AgentDef) -> list[Tool]:
        tools = self.all_tools()
        if agent.type == "task":
            tools = [t for t in tools if not t.chat_only]
        if agent.tools is not None:
            tools = [t for t in tools if t.spec.name in agent.tools]
        return tools

    def tool_named(self, name: str) -> Tool | None:
        """One of the member's tools by name (for a dry run of the approval rules)."""
        default = default_chat_agent(self.role.attributes.default_chat_agent, self.agents)
        return next((t for t in self._tools(default) if t.name == name), None)

    async def child(self, agent_id: str | None, ctx: ToolContext) -> ChildAgent | None:
        """A sub-agent for `execute_task`: a task agent with the member's own tools."""
        agent = self.agents.get(agent_id or "worker")
        if agent is None or agent.type != "task":
            return None
        root = root_of(ctx.conversation_id)[0]
        values = await self._prompt_values(root)
        prompt = await self.prompts.compose(agent, self.agents_root, values)
        prompt += await self._injected(agent)
        source = await self.llm.source(
            self.user.id,
            strength=agent.model_strength or "average",
            origin=root,
            on_recorded=self._recorded,
        )
        attrs = self.role.attributes
        config = LoopConfig(
            model="auto",
            system_prompt=prompt,
            max_rounds=attrs.turn_max_rounds or self.config.max_rounds,
            max_turn_tokens=attrs.turn_max_tokens,
        )
        gate = self.gate_for(root)
        return ChildAgent(
            model=self.paced(root, source), config=config, tools=self._tools(agent), gate=gate
        )

    def paced(self, conversation_id: str, source: ModelClient) -> ModelClient:
        """The model source a turn or helper in this conversation gets (both pass here):
        paced by the member's pacer while the conversation is unattended."""
        pacer = self.unattended.pacer(conversation_id)
        return source if pacer is None else PacedClient(source, pacer)

    def gate_for(self, conversation_id: str) -> DefaultGate:
        """The unattended gate while nobody watches the conversation and nobody may be
        asked (system agents), else the member's: a job's run or a background task asks
        through it, so its requests wait in the Inbox (`Unattended.add(asking=...)`)."""
        return self.unattended_gate if self.unattended.refuses(conversation_id) else self.gate

    # -- the Inbox ----------------------------------------------------------------------

    async def _on_request(self, request: ApprovalRequest) -> None:
        """The gate asks a person: keep the request durably and tell every client.

        A helper's request goes under the conversation it works for (its own id names no
        stored conversation), tied to the call there that started it."""
        conversation_id, parent_call = root_of(request.conversation_id)
        # Background work's request: the run says it waits, and labels the item.
        asking = self.unattended.asking(conversation_id)
        origin = None if asking is None else await asking.requested(request)
        added = await self.inbox.add(
            call_id=request.call_id,
            conversation_id=conversation_id,
            parent_call=parent_call,
            kind="approval",
            tool=request.tool,
            arguments=request.arguments,
            reason=request.reason,
            preview=await self._preview(request),
            origin=None if origin is None else (origin.kind, origin.title, origin.expires_at),
        )
        if added:
            await self.inbox_changed()

    async def _preview(self, request: ApprovalRequest) -> str | None:
        """The tool's own preview of the call (best effort: a failure shows none)."""
        offered = request.via or request.tool  # `connector_call` previews its own calls
        tool = next((t for t in self.all_tools() if t.name == offered), None)
        if tool is None:
            return None
        try:
            return await tool.preview(request.arguments)
        except Exception:
            log.exception("a tool's preview failed", tool=request.tool)
            return None

    async def inbox_changed(self) -> None:
        self.events.publish(self.user.id, InboxChanged(count=await self.inbox.count()))

    def _retire(self, call_id: str) -> None:
        """A call settled without a decision here: forget its request, close its item."""
        self.gate.retire(call_id)

        async def close() -> None:
            if await self.inbox.close(call_id, "settled"):
                await self.inbox_changed()

        self.services.add(
            ServiceSpec(f"settle-{call_id}-{next(self._chore_ids)}", close, restart=False)
        )

    async def decide(
        self,
        call_id: str,
        approved: bool,
        bypass: Literal["15m", "conversation"] | None = None,
        reason: str = "",
    ) -> None:
        """A person's decision on a pending call (NotFoundError when there is none).

        Also the one path of an expiry (a background request unanswered in time: a
        rejection with its `reason`): the waiting run learns it through its `Asking`."""
        item = await self.inbox.get(call_id)
        if item is not None and item.kind != "approval":
            raise NotFoundError("no pending approval with that id")
        if not self.gate.resolve(call_id, approved, reason):
            # Right after a restart the call is open in the history before recovery has
            # asked again: keep the answer for when it does.
            conversation_id = await self.hub.store.open_call(call_id)
            if conversation_id is None:
                raise NotFoundError("no pending approval with that id")
            self.gate.decide_ahead(conversation_id, call_id, approved, reason)
        if item is not None and approved and bypass == "15m":
            self.gate.grant(item.conversation_id, item.tool, BYPASS_SECONDS)
        elif item is not None and approved and bypass == "conversation":
            await self.inbox.add_bypass(item.conversation_id, item.tool)
        if await self.inbox.close(call_id, "approved" if approved else "rejected"):
            await self.inbox_changed()
        asking = None if item is None else self.unattended.asking(item.conversation_id)
        if asking is not None and item is not None:
            await asking.decided(call_id, item.tool, approved, reason)

    async def current_role(self) -> Role:
        """The member's role as it is now (a role edit applies to the very next call)."""
        if self._member is None:
            return self.role
        _, self.role = await self._member(self.user.id)
        return self.role

    async def security_group_of(self, conversation_id: str) -> str:
        """The security group whose rules decide this conversation's calls.

        Checked on every call against the role as it is now: a group the role no longer
        allows (or none chosen) falls back to the role's default group.
        """
        role = await self.current_role()
        try:
            chosen = (await self.hub.store.get(conversation_id)).security_group
        except NotFoundError:
            chosen = None
        return effective_group(chosen, role)

    async def _recorded(self, request_id: int, outcome: Outcome) -> None:
        # A request of this member's recorded: the features may keep more of it (the
        # opt-in request log writes it into this member's own database).
        await self.plugins.request_recorded(self, request_id, outcome)

    async def turn_setup(
        self, conversation: Conversation, needs: tuple[str, ...] = ()
    ) -> TurnSetup:
        """`needs`: the capabilities the message's parts call for ("vision", "video")."""
        # The role as it is now: a capability removed since the last turn is gone from
        # this one's tools and prompt; so is a plugin switched off or taken away.
        role = self.role if self._fresh else await self._read_fresh()
        self._fresh = False
        if self.budget is not None:
            # A turn writes history rows: none starts on a full quota or a nearly full disk.
            await (await self.budget(role)).recheck()
        # Before any model is chosen or called: a feature may refuse the turn (caps).
        await self.plugins.turn_starting(self, conversation.id)
        agent = self.agent_for(conversation)
        model = await self.llm.source(
            self.user.id,
            strength=agent.model_strength or "average",
            model_id=conversation.model_id,
            needs=needs,
            origin=conversation.id,
            on_recorded=self._recorded,
        )
        # The model that answers unless it fails decides what the turn offers.
        profile = turn_profile(model.candidates[0][0])
        values = prompt_values(profile, await self._prompt_values(conversation.id))
        prompt = await self.prompts.compose(agent, self.agents_root, values, VARIANTS[profile])
        prompt += await self._injected(agent)
        tools, offered_names = offered(profile, self._tools(agent))
        attrs = self.role.attributes
        config = LoopConfig(
            model="auto",
            system_prompt=prompt,
            offered_tools=offered_names,
            max_rounds=attrs.turn_max_rounds or self.config.max_rounds,
            max_turn_tokens=attrs.turn_max_tokens,
            # The candidates' real context windows, where the catalogue knows them.
            compact_at_tokens=compact_threshold(
                [m for m, _ in model.candidates],
                DEFAULT_MAX_TOKENS,
                self.config.compact_at_tokens or None,
            ),
        )
        gate = self.gate_for(conversation.id)
        return TurnSetup(
            model=self.paced(conversation.id, model), tools=tools, gate=gate, config=config
        )

    async def close(self) -> None:
        await self.services.stop()
        await self.hub.close()
