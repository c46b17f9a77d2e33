"""System agents: the one runner of work done on a member's behalf unasked, its run log,
the reports they write, the System agents and Reports pages (docs/dev/system-agents.md)."""
