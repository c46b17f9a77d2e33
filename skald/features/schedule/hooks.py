"""Schedules: jobs the assistant runs by itself, their runs, the scheduler service, the
`schedule` tool, the Tasks page and the `[schedule]` config section."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.core.services import ServiceSpec
from skald.features.schedule.config import ScheduleConfig
from skald.features.schedule.jobs import SCHEDULE_USE
from skald.plugins import hookimpl, lazy
from skald.plugins.specs import ChatCommand, FeatureWeb

if TYPE_CHECKING:
    import msgspec

    from skald.agent.tools import Tool
    from skald.plugins.facade import Member, Server


skald_migrations = lazy.migrations(
    registry=("skald.features.schedule.store:SCHEDULE_COUNTS",),
    owner=("skald.features.schedule.store:JOBS_FEATURE",),
)


@hookimpl
def skald_event_types() -> list[type[msgspec.Struct]]:
    from skald.features.schedule.events import TasksChanged

    return [TasksChanged]


skald_config_sections = lazy.config_section(
    "schedule", "skald.features.schedule.config:ScheduleConfig"
)


skald_capabilities = lazy.capabilities("skald.features.schedule.jobs:SCHEDULE_USE")


@hookimpl
def skald_server_state(server: Server) -> list[object]:
    from skald.features.schedule.scheduler import Scheduler

    return [Scheduler(server, server.section("schedule", ScheduleConfig))]


@hookimpl
def skald_services(server: Server) -> list[ServiceSpec]:
    from skald.features.schedule.scheduler import Scheduler

    return [ServiceSpec("scheduler", server.state(Scheduler).run_forever, order=60)]


@hookimpl
def skald_tools(member: Member) -> list[Tool] | None:
    from skald.features.schedule.scheduler import Scheduler
    from skald.features.schedule.tool import BackgroundTaskTool, ScheduleTool

    scheduler = member.server.state(Scheduler, None)
    if scheduler is None or not member.can(SCHEDULE_USE):
        return None
    return [ScheduleTool(member, scheduler), BackgroundTaskTool(member, scheduler)]


async def _remind(member: Member, conversation_id: str, argument: str) -> str:
    from skald.features.schedule.remind import remind_command
    from skald.features.schedule.scheduler import Scheduler

    scheduler = member.server.state(Scheduler)
    return await remind_command(scheduler, member, conversation_id, argument)


@hookimpl
def skald_chat_commands() -> list[ChatCommand]:
    return [
        ChatCommand(
            name="remind",
            usage="/remind in 10 minutes check the oven",
            description="set a reminder, no model needed (in N minutes, at 18:30, tomorrow 9:00)",
            capability=SCHEDULE_USE,
            run=_remind,
        )
    ]


skald_routes = lazy.routes("skald.features.schedule.routes")


WEB = FeatureWeb(__file__, "schedule")
WEB.page("/tasks", "TasksPage", capability="schedule.use", order=35, icon="clock")
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files
