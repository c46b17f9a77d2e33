"""Schedules: jobs the assistant runs by itself, their runs, the scheduler service, the
`schedule` tool, the Tasks page and the `[schedule]` config section."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skald.core.services import ServiceSpec
from skald.features.schedule.config import ScheduleConfig
from skald.features.schedule.jobs import SCHEDULE_USE
from skald.features.schedule.store import JOBS_FEATURE, SCHEDULE_COUNTS
from skald.permissions import can
from skald.plugins import hookimpl
from skald.plugins.specs import ChatCommand, Page

if TYPE_CHECKING:
    import msgspec

    from skald.agent.tools import Tool
    from skald.core.runtime import Runtime
    from skald.core.user_runtime import UserRuntime
    from skald.permissions import Capability
    from skald.store.migrations import Feature


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    return [SCHEDULE_COUNTS] if schema == "registry" else [JOBS_FEATURE]


@hookimpl
def skald_config_sections() -> dict[str, type[msgspec.Struct]]:
    return {"schedule": ScheduleConfig}


@hookimpl
def skald_capabilities() -> list[Capability]:
    return [SCHEDULE_USE]


@hookimpl
def skald_services(runtime: Runtime) -> list[ServiceSpec]:
    from skald.features.schedule.scheduler import Scheduler

    config = runtime.plugins.config.section("schedule", ScheduleConfig)
    scheduler = Scheduler(runtime, config)
    return [ServiceSpec("scheduler", scheduler.run_forever, order=60)]


@hookimpl
def skald_tools(member: UserRuntime) -> list[Tool] | None:
    from skald.features.schedule.scheduler import find_scheduler
    from skald.features.schedule.tool import BackgroundTaskTool, ScheduleTool

    scheduler = find_scheduler(member.plugins)
    if scheduler is None or not can(member.role, SCHEDULE_USE):
        return None
    return [ScheduleTool(member, scheduler), BackgroundTaskTool(member, scheduler)]


@hookimpl
def skald_chat_commands() -> list[ChatCommand]:
    from skald.features.schedule.remind import remind_command

    return [
        ChatCommand(
            name="remind",
            usage="/remind in 10 minutes check the oven",
            description="set a reminder, no model needed (in N minutes, at 18:30, tomorrow 9:00)",
            capability=SCHEDULE_USE,
            run=remind_command,
        )
    ]


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.schedule import routes as schedule

    return list(schedule.ROUTES)


@hookimpl
def skald_pages() -> list[Page]:
    return [Page(path="/tasks", title="nav.tasks", capability="schedule.use", order=35)]
