"""`[system_agents]` in config.toml: how often the runner may look, at the most and least."""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = ["SystemAgentsConfig"]


class SystemAgentsConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # The runner wakes every (shortest enabled interval), kept within these bounds (s).
    min_tick_s: Annotated[float, msgspec.Meta(ge=1)] = 60.0
    max_tick_s: Annotated[float, msgspec.Meta(ge=1)] = 900.0
