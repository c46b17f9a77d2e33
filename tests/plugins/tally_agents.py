"""Two system agents for tests/test_system_agents.py, registered with
`[plugins] modules = ["plugins.tally_agents"]`: `tally` (one per member) has work while
the member's `kv` holds `tally.work` and clears it when it runs; `census` (household
work) always has work and counts the members."""

from __future__ import annotations

from skald.plugins import hookimpl
from skald.plugins.facade import Server
from skald.plugins.specs import AgentRun, NewReport, SystemAgent
from skald.store.database import fetch_one


class Tally:
    id = "tally"
    scope = "member"
    interval_s = 3600

    async def has_work(self, run: AgentRun) -> bool:
        row = await run.member.db.call(
            lambda c: fetch_one(c, "SELECT value FROM kv WHERE key = 'tally.work'")
        )
        return row is not None

    async def run(self, run: AgentRun) -> dict[str, int]:
        await run.member.db.call(lambda c: c.execute("DELETE FROM kv WHERE key = 'tally.work'"))
        await run.report(NewReport(title="Tally", summary="one", body="one tally"))
        return {"tallied": 1}


class Census:
    id = "census"
    scope = "household"
    interval_s = 86400

    def __init__(self, server: Server) -> None:
        self.server = server

    async def has_work(self, run: AgentRun) -> bool:
        return True

    async def run(self, run: AgentRun) -> dict[str, int]:
        return {"unlocked": len(self.server.unlocked())}


@hookimpl
def skald_system_agents(server: Server) -> list[SystemAgent]:
    return [Tally(), Census(server)]
