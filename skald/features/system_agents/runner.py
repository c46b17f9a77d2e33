"""The system-agent runner: one loop for every agent, one agent for one member at a time.

Rule: the wake-up decides nothing. The loop sleeps the shortest enabled interval
(per-member overrides included: the shortest wins as the wake floor), clamped to
`[min_tick_s, max_tick_s]`; at each wake, for each enabled agent and each member in
username order, `is it due` is read from the member's own last attempt. Serving one
(agent, member) is always the same three steps: mark the attempt; ask `has_work`
(false: nothing more is written); open a `running` run row, run, close it `completed`
or `failed`. A `household` agent is served once, as the first active unlocked admin.

A locked member is skipped with an INFO line and nothing else (their database, the only
place to record it, is closed); their last attempt is old when they unlock, so the next
tick serves them. A run left `running` by a dead process is swept to `failed` the first
time this process serves that member, and its agent is due again at once.

Trap: agents run in order, members in order, one at a time: the sweep and "first admin"
are only safe because nothing here runs twice at once. `run_now` (the admin's button)
goes through the same lock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime

from skald.errors import DatabaseClosedError
from skald.features.system_agents.config import SystemAgentsConfig
from skald.features.system_agents.household import Person, people, readers
from skald.features.system_agents.reports import Reports
from skald.features.system_agents.store import RunLog, Settings, iso, parse
from skald.log import get_logger
from skald.plugins.facade import Member, Server
from skald.plugins.specs import NewReport, SystemAgent

__all__ = ["AgentRunContext", "SystemAgents"]

log = get_logger("skald.features.system_agents")


class AgentRunContext:
    """`AgentRun` for one agent and one member: the run id once the row is open, and
    the one way an agent stores a report (immutable; an `alert` notifies its audience)."""

    def __init__(self, runner: SystemAgents, agent: SystemAgent, member: Member) -> None:
        self.runner = runner
        self.agent = agent
        self.member = member
        self.run_id = ""

    async def report(self, report: NewReport) -> str:
        return await self.runner.store_report(self, report)


class SystemAgents:
    def __init__(
        self,
        server: Server,
        config: SystemAgentsConfig,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.server = server
        self.config = config
        self.clock = clock
        self.settings = Settings(server.db)
        self.reports = Reports(server.db)
        self._swept: set[str] = set()
        self._lock = asyncio.Lock()
        self._agents: list[SystemAgent] | None = None

    @property
    def agents(self) -> list[SystemAgent]:
        if self._agents is None:
            self._agents = self.server.system_agents()
        return self._agents

    def agent(self, agent_id: str) -> SystemAgent | None:
        return next((a for a in self.agents if a.id == agent_id), None)

    async def tick_s(self) -> float:
        intervals = []
        for agent in self.agents:
            setting = await self.settings.get(agent.id, agent.interval_s)
            if setting.enabled:
                intervals += [setting.interval_s, *setting.overrides.values()]
        shortest = min(intervals, default=self.config.max_tick_s)
        return max(self.config.min_tick_s, min(self.config.max_tick_s, shortest))

    async def run_forever(self) -> None:
        await self.server.app_built.wait()
        while True:
            await self.pass_once()
            await asyncio.sleep(await self.tick_s())

    async def pass_once(self, *, only: str | None = None, force: bool = False) -> int:
        """Serve every due (agent, member); `only` one agent, `force` ignoring due-ness.
        Returns how many runs were opened."""
        async with self._lock:
            opened = 0
            everyone = await people(self.server.db)
            for agent in self.agents:
                if only is not None and agent.id != only:
                    continue
                setting = await self.settings.get(agent.id, agent.interval_s)
                if not setting.enabled and not force:
                    continue
                for person in self._who(agent, everyone):
                    member = self.server.member(person.id)
                    if member is None:
                        log.info(
                            "system agent skipped: member locked", agent=agent.id, user_id=person.id
                        )
                        continue
                    interval = setting.overrides.get(person.id, setting.interval_s)
                    try:
                        opened += await self._serve(agent, member, interval, force)
                    except DatabaseClosedError:
                        # They locked during the pass: the row it left `running` is swept
                        # (and the pass due again) when they next unlock.
                        self._swept.discard(person.id)
                        log.info(
                            "system agent stopped: member locked", agent=agent.id, user_id=person.id
                        )
            return opened

    def _who(self, agent: SystemAgent, everyone: list[Person]) -> list[Person]:
        if agent.scope != "household":
            return everyone
        admins = [p for p in everyone if p.admin and self.server.member(p.id) is not None]
        return admins[:1]

    async def _serve(self, agent: SystemAgent, member: Member, interval: int, force: bool) -> int:
        runs = RunLog(member.db)
        if member.id not in self._swept:
            if swept := await runs.sweep(iso(self.clock())):
                log.warning(
                    "system agent runs interrupted by a stop marked failed",
                    user_id=member.id,
                    agents=swept,
                )
            self._swept.add(member.id)
        now = self.clock()
        last = await runs.last_attempt(agent.id)
        if not force and last is not None and (now - parse(last)).total_seconds() < interval:
            return 0
        await runs.mark_attempt(agent.id, iso(now))
        ctx = AgentRunContext(self, agent, member)
        if not await agent.has_work(ctx):
            return 0
        ctx.run_id = await runs.open(agent.id, iso(now))
        started = time.monotonic()
        status, stats, error = "failed", {}, None
        try:
            stats = await agent.run(ctx)
            status = "completed"
        except Exception as exc:
            error = str(exc)[:500] or type(exc).__name__
            log.warning("system agent run failed", agent=agent.id, user_id=member.id, error=error)
        ms = int((time.monotonic() - started) * 1000)
        await runs.close(ctx.run_id, status, iso(self.clock()), ms, stats, error)
        await self.settings.record(agent.id, member.id, status, iso(self.clock()))
        return 1

    async def store_report(self, ctx: AgentRunContext, report: NewReport) -> str:
        subject_name = None
        if report.subject_id is not None:
            user, _ = await self.server.fetch(report.subject_id)
            subject_name = user.display_name
        report_id = await self.reports.add(
            report,
            owner_id=ctx.member.id,
            subject_name=subject_name,
            producer=ctx.agent.id,
            run_id=ctx.run_id,
        )
        if report.severity == "alert":
            await self._alert(ctx, report, report_id)
        return report_id

    async def _alert(self, ctx: AgentRunContext, report: NewReport, report_id: str) -> None:
        async def everyone() -> list:  # type: ignore[type-arg]
            return await readers(self.server.db)

        for user_id in await self.reports.audience_of(report, ctx.member.id, everyone):
            try:
                # Normal urgency: quiet hours hold it until morning; an urgent one would not.
                await self.server.notifications.notify(
                    user_id,
                    title=report.title[:120],
                    body=report.summary[:500],
                    link=f"/reports?r={report_id}",
                    source="reports",
                )
            except DatabaseClosedError:
                # Their notifications live in their locked database: the report waits on
                # their Reports page, counted in the badge, when they sign in.
                log.info("report alert not delivered: member locked", user_id=user_id)
