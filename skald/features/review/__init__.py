"""The conversation review: each night, for each supervised member, one report for the
people who supervise them (docs/dev/system-agents.md)."""
