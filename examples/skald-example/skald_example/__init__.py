"""An example Skald plugin, installed from its wheel (examples/skald-example).

It shows each part a plugin usually has: a setting (its config struct: the Plugins page
makes the form), a setting each member keeps for themselves, a tool, a route (served under /api/plugin/example/), a page with its
translations, and a before-turn hook. It uses Skald through the facade only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec
from litestar import get
from litestar.di import NamedDependency

from skald.agent.tools import FS_READ, Tool, ToolContext, ToolResult, Touches
from skald.llm.types import ToolSpec
from skald.plugins import hookimpl
from skald.plugins.facade import Member, Server  # Litestar reads the route's annotation
from skald.plugins.specs import BeforeTurn, Page, WebFiles

PRIVATE = "#private"


class ExampleConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    motto: Annotated[str, msgspec.Meta(max_length=200, description="Household motto")] = (
        "Many hands make light work"
    )


class ExampleMine(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What each member sets for themselves (kept in their own database)."""

    nickname: Annotated[str, msgspec.Meta(max_length=40, description="What to call me")] = ""


def _motto(server: Server) -> str:
    return server.section("example", ExampleConfig).motto


@hookimpl
def skald_config_sections() -> dict[str, type[msgspec.Struct]]:
    return {"example": ExampleConfig}


class MottoTool(Tool):
    """Answers the household's motto (reads nothing of the member's)."""

    spec = ToolSpec(
        name="example_motto",
        description="Tell the household's motto.",
        parameters={"type": "object", "properties": {}, "additionalProperties": False},
    )
    kind = "read"

    def __init__(self, motto: str) -> None:
        self.motto = motto

    def touches(self, args: Mapping[str, Any]) -> Touches:
        return Touches(categories=frozenset({FS_READ}))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(content=f"The motto is: {self.motto}")


@hookimpl
def skald_tools(member: Member) -> list[Tool]:
    return [MottoTool(_motto(member.server))]


class MottoOut(msgspec.Struct, frozen=True):
    motto: str


@get("/motto")
async def motto(server: NamedDependency[Server]) -> MottoOut:
    """The household's motto (at /api/plugin/example/motto)."""
    return MottoOut(motto=_motto(server))


@hookimpl
def skald_routes() -> list[Any]:
    return [motto]


@hookimpl
def skald_web_files() -> list[WebFiles]:
    # web/ is served under /plugins/example/, i18n/<locale>.json joins the app's texts.
    return [WebFiles("example", Path(__file__).parent)]


@hookimpl
def skald_pages() -> list[Page]:
    return [Page(path="/example", title="example.title", module="plugins/example/page.js")]


@hookimpl
def skald_member_settings() -> dict[str, type[msgspec.Struct]]:
    return {"example_me": ExampleMine}


@hookimpl
async def skald_before_turn(member: Member, text: str) -> BeforeTurn:
    if PRIVATE in text:
        return BeforeTurn(
            block="The example plugin keeps messages marked #private out of the chat."
        )
    system = f"The household's motto is: {_motto(member.server)}"
    nickname = (await member.settings("example_me", ExampleMine)).nickname
    if nickname:
        system += f"\nCall the member {nickname}."
    return BeforeTurn(system=system)
