"""What a member's write changed, told to every feature after it happened.

Rule: the file tools and the Files API call `Server.files_changed(user_id, change)` once
a write through the member's router succeeded (`skald_files_changed`); features watch a
place by its mount name (the projects' git history). Trap: the listeners run after the
write, so they can never refuse it; a listener's failure is logged, never the write's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class FileChange:
    """`mount`: the place's mount name (`~`, `projects/ada/holiday`); `paths`: below its
    root, `/`-joined; `action`: the tool's name or the API's verb (`write_file`, `upload`)."""

    mount: str
    paths: tuple[str, ...]
    action: str

    @property
    def summary(self) -> str:
        return " ".join([self.action, ", ".join(self.paths)]).strip()


ChangeListener = Callable[[FileChange], Awaitable[None]]
