"""A sample plugin: one of everything a feature can add, through the public hooks only.

Loaded by `tests/test_plugins.py` with `[plugins] modules = ["plugins.sample_plugin"]`.
It adds a capability, a config section, a registry migration (two steps), a route
guarded by its capability, a tool, a prompt block (and its placeholder), a read-only
mount (outside the home in the sandbox: /srv/sample), an approval fact, a background
service, a notification channel ("pigeon", as the Telegram bridge will add itself) and
a web page whose ES module it serves itself from a route guarded by its
capability (a plugin has no files under the web root), plus a page whose module fails,
to show the message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
from litestar import get
from litestar.di import NamedDependency

from skald.agent.tools import FS_READ, Tool, ToolContext, ToolResult, Touches
from skald.api.deps import requires
from skald.core.runtime import Runtime  # Litestar reads the annotation at runtime
from skald.core.services import ServiceSpec
from skald.files.mounts import MemberMount
from skald.llm.types import ToolCall, ToolSpec
from skald.permissions import Capability
from skald.plugins import hookimpl
from skald.plugins.specs import Page
from skald.store.migrations import Feature, Migration

if TYPE_CHECKING:
    from skald.core.user_runtime import UserRuntime
    from skald.features.notifications.channels import Delivery
    from skald.paths import DataLayout
    from skald.store.rows import User

WIDGETS = Capability(name="sample.widgets", description="Use the sample widgets")
MOUNT_PATH = "/srv/sample"
FACT = "@in_sample"


class SampleConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # How the sample tool greets.
    greeting: str = "Hello"
    # Most widgets the route lists (1..100).
    max_widgets: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10


SCHEMA = Feature(
    "sample",
    (
        Migration(
            1,
            "widgets",
            "CREATE TABLE sample_widgets(id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
        ),
        Migration(2, "widget colour", "ALTER TABLE sample_widgets ADD COLUMN colour TEXT"),
    ),
    after=("accounts",),
)


def shelf(layout: DataLayout, user_id: str) -> Any:
    return layout.root / "sample-shelves" / user_id


@hookimpl
def skald_capabilities() -> list[Capability]:
    return [WIDGETS]


@hookimpl
def skald_config_sections() -> dict[str, type[msgspec.Struct]]:
    return {"sample": SampleConfig}


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    return [SCHEMA] if schema == "registry" else []


class WidgetsOut(msgspec.Struct, frozen=True):
    greeting: str
    widgets: list[str]


@get("/api/sample/widgets", guards=[requires(WIDGETS)])
async def list_widgets(rt: NamedDependency[Runtime]) -> WidgetsOut:
    config = rt.config.section("sample", SampleConfig)
    rows = await rt.core.registry.db.call(
        lambda c: c.execute(
            "SELECT name FROM sample_widgets ORDER BY id LIMIT ?", (config.max_widgets,)
        ).fetchall()
    )
    return WidgetsOut(greeting=config.greeting, widgets=[str(r[0]) for r in rows])


# The page's module: `render(root, ctx)` (the contract in web/js/nav.js), plain DOM,
# text nodes only; it lists the widgets through the app's API client.
PAGE_JS = """
export async function render(root, ctx) {
  const p = document.createElement('p');
  p.dataset.testid = 'sample-page-text';
  const out = await ctx.request('GET', 'api/sample/widgets');
  p.textContent = `${out.greeting}, ${ctx.me.username}: ${out.widgets.length} widgets`;
  root.append(p);
}
"""
BROKEN_JS = "throw new Error('this sample page is broken on purpose');\n"
JS = "text/javascript"


@get("/api/sample/page.js", guards=[requires(WIDGETS)], media_type=JS)
async def page_module() -> str:
    return PAGE_JS


@get("/api/sample/broken.js", guards=[requires(WIDGETS)], media_type=JS)
async def broken_module() -> str:
    return BROKEN_JS


@hookimpl
def skald_routes() -> list[Any]:
    return [list_widgets, page_module, broken_module]


@hookimpl
def skald_pages() -> list[Page]:
    return [
        Page(
            path="/sample",
            title="sample.Widgets",  # no translation: the app shows "Widgets"
            capability=WIDGETS.name,
            module="api/sample/page.js",
        ),
        Page(
            path="/sample/broken",
            title="Broken sample",
            capability=WIDGETS.name,
            module="api/sample/broken.js",
        ),
    ]


class StampTool(Tool):
    """Greets with the configured greeting; reads nothing, describes itself all the same."""

    spec = ToolSpec(
        name="sample_stamp",
        description="Stamp a text with the household's greeting.",
        parameters={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        },
    )
    kind = "read"

    def __init__(self, greeting: str) -> None:
        self.greeting = greeting

    def touches(self, args: Mapping[str, Any]) -> Touches:
        return Touches(categories=frozenset({FS_READ}))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(content=f"{self.greeting}: {args['text']}")


@hookimpl
def skald_tools(member: UserRuntime) -> list[Tool]:
    return [StampTool(member.plugins.config.section("sample", SampleConfig).greeting)]


@hookimpl
def skald_placeholders() -> dict[str, str]:
    return {"SAMPLE_SHELF": "where the sample shelf is, in the files and in the sandbox"}


@hookimpl
def skald_prompt_blocks(member: UserRuntime) -> dict[str, str]:
    return {"SAMPLE_SHELF": f"The sample shelf is at sample/ ({MOUNT_PATH} in the sandbox)."}


@hookimpl
def skald_mounts(user: User, layout: DataLayout) -> list[MemberMount]:
    return [
        MemberMount(
            name="sample",
            prefix="sample",
            label="Sample shelf",
            host_path=shelf(layout, user.id),
            container_path=MOUNT_PATH,
            read_only=True,
        )
    ]


@hookimpl
def skald_approval_facts(call: ToolCall, tool: Tool) -> list[str]:
    # Any tool's call on the shelf, whoever's tool it is.
    paths = tool.touches(call.arguments).paths
    on_shelf = any(isinstance(p, str) and p.split("/")[0] == "sample" for p in paths)
    return [FACT] if on_shelf else []


# The service's life, for the test: "running" once started, "stopped" once cancelled.
SERVICE_LOG: list[str] = []


async def _tick_forever() -> None:
    SERVICE_LOG.append("running")
    try:
        await asyncio.Event().wait()
    finally:
        SERVICE_LOG.append("stopped")


@hookimpl
def skald_services(runtime: Runtime) -> list[ServiceSpec]:
    return [ServiceSpec("sample-ticker", _tick_forever)]


class PigeonChannel:
    """A notification channel: every batch it gets, kept for the test."""

    name = "pigeon"

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []

    async def available(self, user_id: str) -> bool:
        return True

    async def deliver(self, delivery: Delivery) -> bool:
        self.deliveries.append(delivery)
        return True


@hookimpl
def skald_notification_channels(runtime: Runtime) -> list[PigeonChannel]:
    return [PigeonChannel()]
