"""Schedules: jobs the assistant runs by itself at set times, their runs, the scheduler
service, the `schedule` tool and the Tasks page's API (docs/dev/scheduler.md)."""
