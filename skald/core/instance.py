"""The household's instance settings: its name, time zone and language, and how far the
first-run setup (the onboarding wizard) got. Kept in the registry's `config` table
(key `instance`), edited by an administrator (Settings page, the wizard).

Rule: read from memory (`Instance.current`), written through `Instance.update`, which
checks every value first and replaces the copy in memory only after the write, so the
next turn's prompt (DATETIME in the household's time zone) sees the new value.
Trap: `timezone` None means "as the config file says" (`assistant.timezone`, UTC by
default), so an instance that never ran the wizard behaves as before.
"""

from __future__ import annotations

from typing import Final, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

import msgspec

from skald.errors import InvalidInputError
from skald.store.registry import Registry

__all__ = ["LANGUAGES", "SETUP_STEPS", "Instance", "InstanceSettings", "valid_timezone"]

LANGUAGES: Final = ("en", "it", "fr")
# The wizard's steps, in order; `setup_step` is the one to show next ("done": finished).
SETUP_STEPS: Final = ("household", "model", "members", "done")
SetupStep = Literal["household", "model", "members", "done"]
_KEY: Final = "instance"


class InstanceSettings(msgspec.Struct, frozen=True, kw_only=True):
    household_name: str = ""
    timezone: str | None = None  # IANA name; None: the config file's assistant.timezone
    # What members without a language of their own use (`effective_locale`).
    language: Literal["en", "it", "fr"] | None = None
    setup_step: SetupStep = "household"


def valid_timezone(name: str) -> bool:
    if name not in available_timezones() and name != "UTC":
        return False
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


class Instance:
    def __init__(self, registry: Registry, default_timezone: str) -> None:
        self.registry = registry
        self.default_timezone = default_timezone
        self.current = InstanceSettings()

    async def load(self) -> InstanceSettings:
        raw = await self.registry.get_config(_KEY)
        if raw is not None:
            self.current = msgspec.convert(raw, InstanceSettings)
        return self.current

    def timezone(self) -> ZoneInfo:
        """The household's time zone: the one an administrator chose, else the config's."""
        return ZoneInfo(self.current.timezone or self.default_timezone)

    async def update(
        self,
        *,
        household_name: str | None = None,
        timezone: str | None = None,
        language: str | None = None,
        setup_step: str | None = None,
    ) -> InstanceSettings:
        fields: dict[str, object] = {}
        if household_name is not None:
            name = " ".join(household_name.split())
            if len(name) > 80:
                raise InvalidInputError("the household name is at most 80 characters")
            fields["household_name"] = name
        if timezone is not None:
            if not valid_timezone(timezone):
                raise InvalidInputError(f'unknown time zone "{timezone}" (e.g. "Europe/Rome")')
            fields["timezone"] = timezone
        if language is not None:
            if language not in LANGUAGES:
                raise InvalidInputError(f"language must be one of {', '.join(LANGUAGES)}")
            fields["language"] = language
        if setup_step is not None:
            if setup_step not in SETUP_STEPS:
                raise InvalidInputError(f"setup_step must be one of {', '.join(SETUP_STEPS)}")
            fields["setup_step"] = setup_step
        new = msgspec.structs.replace(self.current, **fields)
        await self.registry.set_config(_KEY, msgspec.to_builtins(new))
        self.current = new
        return new
