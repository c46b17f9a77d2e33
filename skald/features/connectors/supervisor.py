"""The supervisor: one MCP session per running connector instance, restarted when it dies.

Rule: a stdio household connector runs once, in a container of its own
(`household_box.py`; on the host as the service's user, in its own process group, only
with `[connectors] household_on_host`), with an environment of exactly the variables its
manifest declares (and `PATH`, `LANG` on the host). A personal connector runs once per
member, inside that member's container (`docker exec -i`, dropped to the sandbox user
under a marker group of its own: `skald/sandbox/procgroup.py`), from a copy of its files in the
member's home (written by descriptor, never through a link she planted there:
`home_files`), its dependencies installed there by content hash; it starts when the
member's data is unlocked (a member service) and stops when they lock, are deactivated,
deactivate the connector or lose its grant (`stop_member`, awaited: synchronous).

Rule: an instance is a service of the one background mechanism (`skald/core/services.py`,
issue 21): `connector:<name>` on the member's runner (personal) or the server's
(household), order 61 so it stops before the `connectors` service that started it. One
start is one `ConnectorInstance.run`; a dead instance raises `Restart` and the runner starts it
again after its back-off (1 s doubling, capped at 60 s), and its health shows it
degraded meanwhile; after `max_restarts` failed starts in a row it raises `GiveUp`
(marked failed; the last error and stderr lines go to the catalogue row, which
administrators see). A start that reached "running" resets the count and the back-off
(`ServiceRunner.ready`). Stopping one instance is `ServiceRunner.remove`. A connector whose tool list is over
the client's limits (`skald.mcp.Limits`: 512 tools, 4 MiB) is refused at once, without
restarts (`ListTooLarge`; also when it grows there later): the card and the catalogue row
say why, the model's prompt line says "refused", and nothing of the list is kept.
`Supervisor.retained()` sums what the running instances keep, per member.

Trap: secrets reach a personal connector through the environment of the `docker exec`
client (`-e NAME` without a value makes docker copy it from there), never on a command
line, where `ps` would show it. Known secret values (in every spelling, and heads cut
off by a truncation: `redact.py`) are scrubbed from stderr lines, errors, events and
log lines before they are stored, shown or logged.

Rule: a `qr` connector's `login_status` and `logout` tools are dropped from the tool
list the model is offered (`_refresh_tools`, the one place `tools`/`specs` are built);
only `device_call` reaches them, for the member's own instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import httpx
import msgspec

from skald.core.services import GiveUp, Restart, ServiceRunner, ServiceSpec
from skald.errors import ConflictError, DatabaseClosedError, InvalidInputError, NotFoundError
from skald.features.connectors import events
from skald.features.connectors.redact import redact
from skald.features.connectors.store import Connector, SecretStore
from skald.log import get_logger

if TYPE_CHECKING:
    # Imported where they are used, at an instance's first start (or a check, a trial):
    # the `Supervisor` itself runs in every server, connectors or not (docs/dev/connectors.md,
    # "What loads at first use").
    from skald.features.connectors import oauth
    from skald.features.connectors.feed import Manifest, OAuthSpec
    from skald.features.connectors.household_box import HouseholdBoxes
    from skald.features.connectors.service import Connectors
    from skald.llm.types import ToolSpec
    from skald.mcp import Handlers, ListTooLarge, LogRecord, McpSession, Related, Transport
    from skald.mcp.transport import ProcessLike
    from skald.mcp.wire import CallToolResult, ElicitRequestParams, ElicitResult, Tool
    from skald.plugins.facade import Member
    from skald.sandbox.manager import SandboxManager
    from skald.sandbox.procgroup import MarkedGroup

log = get_logger("skald.features.connectors")

INSTANCE_ORDER = 61  # the member's `connectors` service is 60: instances stop first
EVENTS_KEPT = 100
STDERR_KEPT = 20
CONTAINER_HOME = "/home/skald"
PREPARE_TIMEOUT_S = 900.0
# A `qr` connector's sign-in tools: called from the Connectors page, hidden from the model.
DEVICE_TOOLS = frozenset({"login_status", "logout"})
DEVICE_WAIT_S = 30.0

State = Literal["starting", "running", "restarting", "failed", "stopped"]


@dataclass
class Event:
    at: float
    kind: str  # log, state, error
    text: str


@dataclass
class Launch:
    """How to reach one instance: a command (stdio) or a URL (http)."""

    argv: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    secrets: list[str] = field(default_factory=list)  # values to scrub from stderr
    # In a container: its processes, killed when this launch's process ends (sandbox/procgroup.py).
    group: MarkedGroup | None = None
    # In a container, on a Docker API stream instead of `argv`'s `docker exec` client
    # (None: the daemon is not on a unix socket); given the stdout line limit.
    start: Callable[[int], Awaitable[ProcessLike]] | None = None
    # http with MCP's own OAuth: sends the member's token, refreshes it (oauth.mcp_flow).
    auth: httpx.Auth | None = None


def http_launch(manifest: Manifest, install_dir: str, secrets: dict[str, str]) -> Launch:
    """An http connector's address and headers with its folder and secrets filled in."""
    from skald.features.connectors.feed import expand

    places = {"DIR": install_dir, "DEPS": "", "HOME": ""}
    assert manifest.url is not None
    return Launch(
        url=expand(manifest.url, places, secrets),
        headers={k: expand(v, places, secrets) for k, v in manifest.headers.items()},
    )


@dataclass
class CallSite:
    """The tool call an instance is serving (where an elicitation goes)."""

    member: Member
    conversation_id: str
    call_id: str


class ConnectorInstance:
    def __init__(self, sup: Supervisor, owner: str, connector: Connector) -> None:
        from skald.features.connectors.resources import Catalog

        self.sup = sup
        self.owner = owner  # a user id; "" for a household instance
        self.connector = connector
        self.name = connector.name
        self.state: State = "starting"
        self.session: McpSession | None = None
        self.tools: list[Tool] = []
        self.listed_bytes = 0  # JSON bytes of `tools` as the server sent them
        self.specs: list[ToolSpec] = []
        self.refused: list[str] = []
        self.events: deque[Event] = deque(maxlen=EVENTS_KEPT)
        self.ready = asyncio.Event()
        self.failures = 0  # failed starts in a row (reset once it runs)
        self.started = False  # a service of `runner()` until `stop`
        self.service_runner: ServiceRunner | None = None
        self.calls: list[CallSite] = []
        self.secrets: list[str] = []
        self.tools_version = 0
        # Its resources, templates and prompts (`resources.py`), anew for each session.
        self.catalog = Catalog()
        self.boxes: HouseholdBoxes | None = None  # while it runs in a box of its own
        # Why the connector was refused (its tool list over the limits): a short text
        # for the model's prompt line; None while it is not.
        self.refusal: ListTooLarge | None = None
        # The last failure (scrubbed): what a call answers at once while it is not running.
        self.last_error: str | None = None
        self.rate = events.RateGate()
        # Set at every change that `next_session` waits for (running, failed, stopped).
        self._changed = asyncio.Event()

    @property
    def retained_bytes(self) -> int:
        """What this instance keeps of its server's lists, as JSON bytes (the tool list
        and its schemas): the figure `/api/health` sums per member for administrators."""
        return (self.listed_bytes if self.tools else 0) + self.catalog.listed_bytes

    def note(self, kind: str, text: str) -> None:
        self.events.append(Event(at=time.time(), kind=kind, text=self.scrub(text)[:2000]))

    def scrub(self, text: str) -> str:
        return redact(text, self.secrets)

    def _moved(self, state: State) -> None:
        self.state = state
        self._changed.set()

    async def next_session(self, old: McpSession, seconds: float) -> McpSession | None:
        """The session after `old` once it runs; None when the instance failed, stopped
        or did not get there within `seconds` (then `unavailable()` says why)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                while True:
                    session = self.session
                    if session is not None and session is not old and self.state == "running":
                        return session
                    if self.state in ("failed", "stopped"):
                        return None
                    self._changed.clear()
                    await self._changed.wait()
        return None

    def unavailable(self) -> str:
        """Why a call cannot go through now: answered at once, never after a wait (a
        model waiting 30 s on a failed connector learnt nothing more than now)."""
        why = f": {self.last_error}" if self.last_error else ""
        if self.state == "failed":
            return (
                f"connector '{self.name}' failed{why}; it can be retried from the Connectors page"
            )
        if self.state in ("starting", "restarting"):
            return f"connector '{self.name}' is {self.state}{why}; try again in a moment"
        return f"connector '{self.name}' is not running ({self.state})"

    @property
    def service_name(self) -> str:
        return f"connector:{self.name}"

    def runner(self) -> ServiceRunner:
        """Where this instance runs: the member's runner (personal; stopped with their
        data) or the server's (household)."""
        if self.service_runner is None:
            self.service_runner = (
                self.sup.members[self.owner].services
                if self.owner
                else self.sup.connectors.server.services
            )
        return self.service_runner

    async def run(self) -> None:
        """One start of the instance, as a service of `runner()`: the runner restarts it
        with its back-off (1 s doubling to 60 s) when this raises `Restart`; after
        `max_restarts` failed starts in a row it raises `GiveUp` (state `failed`)."""
        from skald.features.connectors.resources import Catalog
        from skald.mcp import ListTooLarge, connect

        self.state = "starting" if self.failures == 0 else "restarting"
        error: str | None = None
        stderr: list[str] = []
        session: McpSession | None = None
        transport: Transport | None = None
        launch: Launch | None = None
        try:
            launch = await self.sup.launch_for(self)
            self.secrets = launch.secrets
            transport = self._transport(launch)
            session = await connect(transport, name=self.name, handlers=self._handlers())
            self.session = session
            await self._refresh_tools()
            self.catalog = Catalog()
            await self.catalog.refresh(session, self.note)
            self._moved("running")
            self.note("state", "running")
            self.ready.set()
            self.failures = 0
            self.runner().ready(self.service_name)
            failure = await session.wait_closed()
            if self.refusal is not None:
                raise self.refusal  # the list grew past the limits (`_tools_changed`)
            error = str(failure) if failure else "the session ended"
            stderr = session.stderr_tail(STDERR_KEPT)
        except asyncio.CancelledError:
            raise
        except ListTooLarge as exc:
            # Not a crash: the same files list the same again; no restarts.
            await self._refuse(exc)
            raise GiveUp(self.last_error or "refused") from None
        except Exception as exc:
            error = str(exc) or type(exc).__name__
            if transport is not None:
                stderr = transport.stderr_tail(STDERR_KEPT)
        finally:
            self.ready.clear()
            self.session = None
            if session is not None:
                # Awaited even when this task is being cancelled (`stop`): the process
                # is killed and reaped before `stop` returns (revocation is synchronous).
                with contextlib.suppress(Exception):
                    await session.close()
            if launch is not None and launch.group is not None:
                # The docker client is gone; what it started in the container is not.
                await launch.group.kill()
        await self._failed_once(error, stderr)

    async def _failed_once(self, error: str | None, stderr: list[str]) -> None:
        """Record a failed start or a session that ended; restart or give up."""
        self.failures += 1
        scrubbed = self.scrub(error or "")
        self.last_error = scrubbed[:500]
        lines = "\n".join(self.scrub(s) for s in stderr)
        self.note("error", scrubbed)
        log.warning(
            "connector instance stopped",
            connector=self.name,
            owner=self.owner or "household",
            error=scrubbed[:300],
            failures=self.failures,
        )
        await self.sup.connectors.store.note_failure(self.name, scrubbed, lines or None)
        if self.failures > self.sup.connectors.config.max_restarts:
            self._moved("failed")
            self.note("state", f"failed after {self.failures} attempts")
            raise GiveUp(self.last_error)
        self.state = "restarting"
        raise Restart(self.last_error)

    async def _refuse(self, exc: ListTooLarge) -> None:
        from skald.features.connectors.resources import Catalog

        self.ready.clear()
        self.refusal = exc
        self.tools, self.specs, self.listed_bytes = [], [], 0
        self.catalog = Catalog()
        text = self.scrub(str(exc))
        self.last_error = text[:500]
        self.note("error", text)
        self._moved("failed")
        log.warning("connector refused", connector=self.name, owner=self.owner or "household")
        await self.sup.connectors.store.note_failure(self.name, text, None)

    def _transport(self, launch: Launch) -> Transport:
        from skald.mcp import HttpTransport, StdioTransport

        if launch.url is not None:
            return HttpTransport(launch.url, launch.headers, auth=launch.auth)
        assert launch.argv is not None
        return StdioTransport(launch.argv, launch.env, cwd=launch.cwd, start=launch.start)

    def _handlers(self) -> Handlers:
        from skald.mcp import Handlers

        return Handlers(
            elicit=self._elicit,
            on_tools_changed=self._tools_changed,
            on_resources_changed=self._catalog_changed,
            on_prompts_changed=self._catalog_changed,
            on_resource_updated=self._resource_updated,
            on_log=self._on_log,
            on_event=self._on_event,
        )

    async def _catalog_changed(self) -> None:
        if self.session is not None:
            await self.catalog.refresh(self.session, self.note)

    async def _resource_updated(self, uri: str) -> None:
        if self.catalog.updated(uri, time.monotonic()):
            await self._on_event("notifications/resources/updated", {"uri": uri})

    async def _on_event(self, method: str, params: dict[str, Any]) -> None:
        """The server's own news: an event in the database of each member it works for
        (`events.py`), within the instance's rate; never kept in memory."""
        if not self.rate.admit():
            if self.rate.dropped in (1, 100, 10_000):
                self.note("error", f"events dropped: more than {self.rate.per_minute} a minute")
            return
        received = events.now_stamp()
        event = events.event_from(self.name, method, params, received)
        for member in self.sup.event_recipients(self):
            try:
                await events.EventStore(member.db).add(event, received=received)
            except DatabaseClosedError:
                continue  # they locked meanwhile: their database cannot take it

    async def _refresh_tools(self) -> None:
        from skald.mcp import tool_specs

        assert self.session is not None
        listed = await self.session.list_tools()
        if self.connector.auth == "qr":
            # The sign-in tools are the member's, through the Connectors page; the model
            # must neither log the member out nor read their QR code.
            listed = [t for t in listed if t.name not in DEVICE_TOOLS]
        self.tools = listed
        self.listed_bytes = self.session.listed.get("tools/list", (0, 0))[1]
        self.specs, refused = tool_specs(self.name, self.tools)
        self.refused = [str(r) for r in refused]
        for problem in self.refused:
            self.note("error", problem)
        self.tools_version += 1

    async def _tools_changed(self) -> None:
        # The prompt's connector block and the tool set are built from `specs` each turn.
        from skald.mcp import ListTooLarge, McpError

        try:
            await self._refresh_tools()
        except ListTooLarge as exc:
            # Grown past the limits: end the session; `run` refuses the connector.
            self.refusal = exc
            self.tools, self.specs, self.listed_bytes = [], [], 0
            if self.session is not None:
                await self.session.close()
            return
        except McpError:
            return
        self.note("state", f"tool list changed: {len(self.specs)} tools")

    def _on_log(self, record: LogRecord) -> None:
        self.note("log", f"{record.level}: {record.text}")

    async def _elicit(self, params: ElicitRequestParams, related: Related) -> ElicitResult:
        """The server asks the member something: an Inbox question, answered by them."""
        from skald.mcp.wire import ElicitResult

        site = self.asker(related)
        if site is None:
            self.note("log", "an elicitation was declined: no single call it belongs to")
            return ElicitResult(action="decline")
        return await elicit_through_inbox(site, self.name, params)

    def asker(self, related: Related) -> CallSite | None:
        """The call an elicitation belongs to, or None: then it is declined, nobody asked.

        The transport's word when it has one (HTTP: the call whose stream carried it;
        none, e.g. the GET stream: decline). Otherwise (stdio) only a single call in
        flight, or several of one member (the latest: the same person answers), is
        unambiguous. Trap: the latest call of any member put alice's question in bob's
        Inbox and let bob's answer decide her call."""
        if related.known:
            return related.context if isinstance(related.context, CallSite) else None
        members = {site.member.id for site in self.calls}
        return self.calls[-1] if len(members) == 1 else None

    def in_box(self, boxes: HouseholdBoxes) -> HouseholdBoxes:
        """Run in a box of its own: `stop` removes the box too."""
        self.boxes = boxes
        return boxes

    async def stop(self) -> None:
        if self.started:
            self.started = False
            await self.runner().remove(self.service_name)
        if self.boxes is not None:
            await self.boxes.remove(self.name)
        self._moved("stopped")


DECLINE = "Decline"


def _fields(params: ElicitRequestParams) -> dict[str, Any]:
    schema = params.requested_schema if isinstance(params.requested_schema, dict) else {}
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


def _coerce(prop: dict[str, Any], text: str) -> Any:
    kind = prop.get("type")
    if kind == "boolean":
        return text.strip().lower() in ("yes", "true", "1", "y", "sì", "si", "oui")
    if kind == "integer":
        return int(text.strip())
    if kind == "number":
        return float(text.strip())
    return text


async def elicit_through_inbox(
    site: CallSite, server: str, params: ElicitRequestParams
) -> ElicitResult:
    """Put the request in the member's Inbox as a question and wait for the answer.

    One field: the answer is its value (choices offered for booleans and enums). Several
    fields: the answer is a JSON object, or `name: value` lines. "Decline" declines."""
    from skald.core.ask import AskUserTool
    from skald.mcp.wire import ElicitResult

    fields = _fields(params)
    choices: list[str] | None = None
    if len(fields) == 1:
        prop = next(iter(fields.values()))
        if isinstance(prop, dict) and prop.get("type") == "boolean":
            choices = ["yes", "no", DECLINE]
        elif isinstance(prop, dict) and isinstance(prop.get("enum"), list):
            choices = [*(str(v) for v in prop["enum"][:9]), DECLINE]
    question = params.message
    if params.mode == "url" and isinstance(params.url, str):
        question += f'\n\nOpen: {params.url}\n(Answer "done" when finished, or {DECLINE}.)'
        choices = ["done", DECLINE]
    elif len(fields) > 1:
        question += "\n\nAnswer with one line per field: " + ", ".join(
            f"{name}: …" for name in fields
        )
    # The Inbox's question tool keeps the member's Inbox and resolves their answers.
    ask = site.member.state(AskUserTool)
    item_id = f"{site.call_id}.elicit.{os.urandom(3).hex()}"
    await ask.inbox.add(
        call_id=item_id,
        conversation_id=site.conversation_id,
        parent_call=site.call_id,
        kind="question",
        tool=f"mcp__{server}",
        arguments={"connector": server, "mode": params.mode},
        reason=question,
        choices=choices,
    )
    await ask.changed()
    answer = await ask.wait_answer(item_id)
    text = answer.strip()
    if text == DECLINE:
        return ElicitResult(action="decline")
    if params.mode == "url":
        return ElicitResult(action="accept")
    try:
        if len(fields) == 1:
            key, prop = next(iter(fields.items()))
            return ElicitResult(action="accept", content={key: _coerce(prop, text)})
        content: dict[str, Any] = {}
        try:
            parsed = json.loads(text)
            content = parsed if isinstance(parsed, dict) else {}
        except ValueError:
            for line in text.splitlines():
                key, sep, value = line.partition(":")
                if sep and key.strip() in fields:
                    content[key.strip()] = _coerce(fields[key.strip()], value.strip())
        return ElicitResult(action="accept", content=content)
    except (ValueError, TypeError):
        return ElicitResult(action="decline")


class Supervisor:
    def __init__(self, connectors: Connectors) -> None:
        self.connectors = connectors
        self.instances: dict[tuple[str, str], ConnectorInstance] = {}
        self.members: dict[str, Member] = {}
        # Per unlocked member: the connectors they switched on and may use (read by the
        # tools hook, which cannot await; rewritten by every `member_changed`).
        self.wanted: dict[str, set[str]] = {}
        self._lock = asyncio.Lock()
        self.host_env: Callable[[], dict[str, str]] = lambda: {
            k: v for k, v in os.environ.items() if k in ("PATH", "LANG")
        }

    # -- lifecycle ---------------------------------------------------------------------

    async def run_forever(self) -> None:
        """The server service: household instances someone switched on start with the
        server (not at that member's first sign-in); at shutdown every instance stops
        (process groups killed and reaped)."""
        try:
            await self.start_household()
            await asyncio.Event().wait()
        finally:
            await self.stop_everything()

    async def stop_everything(self) -> None:
        for inst in list(self.instances.values()):
            await inst.stop()
        self.instances.clear()

    async def start_household(self) -> None:
        """Start every household connector that a member who may use it has switched on.

        Trap: waiting for such a member's sign-in left the household's connector down
        (and its card "stopped") for everyone until then."""
        server = self.connectors.server
        for row in await self.connectors.store.all():
            if row.scope != "household" or row.status != "installed":
                continue
            for user_id in await self.connectors.store.active_users(row.name):
                try:
                    user, role = await server.fetch(user_id)
                except NotFoundError:
                    continue
                if row.name in {c.name for c in await self.connectors.usable(user, role)}:
                    async with self._lock:
                        if ("", row.name) not in self.instances:
                            self._start("", row)
                    break

    async def member_loop(self, member: Member) -> None:
        """A member service: their instances live while their data is unlocked."""
        user_id = member.id
        self.members[user_id] = member
        try:
            await self.member_changed(user_id)
            await asyncio.Event().wait()
        finally:
            if self.members.get(user_id) is member:
                del self.members[user_id]
                self.wanted.pop(user_id, None)
            for key in [k for k in self.instances if k[0] == user_id]:
                await self.instances.pop(key).stop()

    def event_recipients(self, inst: ConnectorInstance) -> list[Member]:
        """Whose database an event of `inst` goes to: a personal instance's owner; for a
        household one, every unlocked member who switched it on and may use it."""
        if inst.owner:
            member = self.members.get(inst.owner)
            return [member] if member is not None else []
        return [
            member
            for user_id, member in sorted(self.members.items())
            if inst.name in self.wanted.get(user_id, ())
        ]

    async def member_changed(self, user_id: str) -> None:
        """Start what the member has switched on and may use; stop what they may not."""
        member = self.members.get(user_id)
        if member is None:
            return
        user, role = await member.fetch()
        wanted = {c.name: c for c in await self.connectors.active(user, role)}
        self.wanted[user_id] = set(wanted)
        async with self._lock:
            for key in [k for k in self.instances if k[0] == user_id and k[1] not in wanted]:
                await self.instances.pop(key).stop()
            for name, row in wanted.items():
                owner = "" if row.scope == "household" else user_id
                if (owner, name) not in self.instances:
                    self._start(owner, row)

    def _start(self, owner: str, row: Connector) -> ConnectorInstance:
        """The instance as a service of its runner (ordering, back-off, health; issue 21):
        order 61, after the member's `connectors` service (60), so a lock or shutdown
        stops the instances first."""
        inst = ConnectorInstance(self, owner, row)
        self.instances[(owner, row.name)] = inst
        inst.started = True
        inst.runner().add(ServiceSpec(inst.service_name, inst.run, order=INSTANCE_ORDER))
        return inst

    async def stop_member(self, user_id: str, name: str) -> None:
        """Stop the member's instance now (revocation, deactivation): their tools go with it."""
        self.wanted.get(user_id, set()).discard(name)
        inst = self.instances.pop((user_id, name), None)
        if inst is not None:
            await inst.stop()

    async def retry(self, user_id: str, row: Connector) -> bool:
        """Start a failed instance again now (the card's Retry, switching it on again):
        its restart count starts afresh. False when it is not failed (nothing to do).

        Trap: a household instance outlives one member's switch-off (others use it), so
        off/on alone left it failed after its server was back."""
        inst = self.instance_for(user_id, row)
        if inst is None or inst.state != "failed":
            return False
        async with self._lock:
            key = (inst.owner, row.name)
            if self.instances.get(key) is not inst:
                return False  # stopped or replaced meanwhile
            del self.instances[key]
            await inst.stop()
            self._start(inst.owner, row)
        return True

    async def restart_member(self, user_id: str, name: str) -> None:
        await self.stop_member(user_id, name)
        await self.member_changed(user_id)

    async def restart_all(self, name: str) -> None:
        """After an update: every instance of it starts again on the new files."""
        row = await self.connectors.store.require(name)
        for key in [k for k in self.instances if k[1] == name]:
            await self.instances.pop(key).stop()
            if key[0] == "" or key[0] in self.members:
                self._start(key[0], row)

    async def stop_all(self, name: str) -> None:
        for key in [k for k in self.instances if k[1] == name]:
            await self.instances.pop(key).stop()

    # -- what members see ------------------------------------------------------------

    def retained(self) -> dict[str, tuple[int, int]]:
        """Per owner (a user id; "" for the household): (instances, JSON bytes of the
        tool lists they keep). For administrators, in `/api/health`."""
        out: dict[str, tuple[int, int]] = {}
        for (owner, _name), inst in self.instances.items():
            count, size = out.get(owner, (0, 0))
            out[owner] = (count + 1, size + inst.retained_bytes)
        return out

    def instance_for(self, user_id: str, row: Connector) -> ConnectorInstance | None:
        owner = "" if row.scope == "household" else user_id
        return self.instances.get((owner, row.name))

    def state_of(self, user_id: str, row: Connector) -> tuple[str, list[ToolSpec]]:
        inst = self.instance_for(user_id, row)
        if inst is None:
            return "stopped", []
        return inst.state, list(inst.specs)

    async def verify(
        self, member: Member, row: Connector, values: dict[str, str]
    ) -> tuple[bool, str]:
        """Run the connector's `verify` command with the member's stored secrets and
        `values` (the ones about to be saved) where the connector runs (the member's
        container, its files and dependencies placed as for a start): (ok, message).

        The command prints one JSON object `{"ok": bool, "message": str}` on stdout (the
        last such line counts); anything else, a non-zero exit or a timeout is a failure
        whose message says so. Every text is scrubbed of the secrets it was given.
        `member` is the caller's facade: the Connectors page's routes hold no runtime."""
        from skald.features.connectors.feed import Manifest
        from skald.mcp import McpError
        from skald.sandbox.procgroup import communicate_within

        manifest = msgspec.convert(
            {k: v for k, v in row.manifest.items() if not k.startswith("_")}, Manifest
        )
        spec = manifest.verify
        if spec is None:
            return True, ""
        if row.install_dir is None:
            raise ConflictError(f"connector '{row.name}' is not installed")
        stored = await self.connectors.secrets(member.db).values(row.name)
        secrets = {**stored, **values}
        scrub = list(secrets.values())
        checking = msgspec.structs.replace(manifest, command=list(spec.command))
        try:
            launch = await self._in_container(
                member, row, checking, row.manifest.get("_deps_hash"), secrets
            )
        except (McpError, InvalidInputError) as exc:
            return False, redact(str(exc), scrub)[:500]
        assert launch.argv is not None and launch.group is not None
        try:
            proc = await asyncio.create_subprocess_exec(
                *launch.argv,
                env=launch.env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out = await communicate_within(proc, spec.timeout_secs)
        except TimeoutError:
            return False, f"the check did not answer within {spec.timeout_secs} s"
        finally:
            await asyncio.shield(launch.group.kill())
        ok, message = _verdict(out.decode(errors="replace"), proc.returncode)
        return ok, redact(message, scrub)[:500]

    async def device_call(self, user_id: str, row: Connector, tool: str) -> CallToolResult:
        """Call a QR/device sign-in tool (`login_status`, `logout`) on the member's own
        instance, for the Connectors page; never offered to the model."""
        from skald.mcp import McpError

        if row.auth != "qr" or tool not in DEVICE_TOOLS:
            raise InvalidInputError(f"{row.name} does not sign in with a code")
        inst = self.instance_for(user_id, row)
        if inst is None or inst.owner != user_id:
            raise ConflictError(f"switch {row.name} on first")
        if inst.state == "failed":
            raise ConflictError(inst.unavailable())  # at once: no start is coming
        try:
            await asyncio.wait_for(inst.ready.wait(), DEVICE_WAIT_S)
        except TimeoutError:
            raise ConflictError(f"{row.name} is not running ({inst.state})") from None
        session = inst.session
        if session is None:
            raise ConflictError(f"{row.name} is not running ({inst.state})")
        try:
            return await session.call_tool(tool, {}, timeout=DEVICE_WAIT_S)
        except McpError as exc:
            raise ConflictError(inst.scrub(str(exc))) from exc

    # -- launching -----------------------------------------------------------------------

    async def launch_for(self, inst: ConnectorInstance) -> Launch:
        from skald.features.connectors import oauth
        from skald.features.connectors.feed import Manifest
        from skald.mcp import McpError

        row = await self.connectors.store.require(inst.name)
        inst.connector = row
        manifest = msgspec.convert(
            {k: v for k, v in row.manifest.items() if not k.startswith("_")}, Manifest
        )
        secrets: dict[str, str] = {}
        auth: httpx.Auth | None = None
        member = self.members.get(inst.owner) if inst.owner else None
        if member is not None:
            store = self.connectors.secrets(member.db)
            secrets = await store.values(row.name)
            # From now on: a launch that fails below (a refresh, an install) is scrubbed too.
            inst.secrets = list(secrets.values())
            if manifest.auth.type == "oauth2" and manifest.auth.oauth is not None:
                oc = await oauth.resolve(manifest.auth.oauth, self.connectors.providers)
                if oc.client.client_secret:  # scrubbed even before it is delivered
                    inst.secrets.append(oc.client.client_secret)
                manifest, secrets = await _with_oauth(manifest, manifest.auth.oauth, oc, secrets)
                for key in (oauth.ACCESS, oauth.REFRESH, oauth.EXPIRES):
                    if key in secrets:
                        await store.put(row.name, key, secrets[key])
                inst.secrets = list(secrets.values())
                if oc.client.client_secret:
                    inst.secrets.append(oc.client.client_secret)
            elif manifest.auth.type == "oauth2" and manifest.transport == "http":
                # Tokens it refreshes join the values scrubbed from what the server says.
                auth = _mcp_oauth(store, row.name, secrets, inst.secrets)
        if row.install_dir is None:
            raise McpError(f"connector '{row.name}' is not installed")
        deps_hash = row.manifest.get("_deps_hash")
        if manifest.transport == "http":
            launch = http_launch(manifest, row.install_dir, secrets)
            launch.secrets = inst.secrets if auth is not None else list(secrets.values())
            launch.auth = auth
            return launch
        if not inst.owner and not self.connectors.config.household_on_host:
            return await self._in_box(inst, row, manifest, deps_hash)
        if not inst.owner:  # household, on the host by the operator's choice
            launch = self._on_host(row.install_dir, manifest, deps_hash, secrets)
            launch.secrets = list(secrets.values())
            return launch
        assert member is not None
        return await self._in_container(member, row, manifest, deps_hash, secrets)

    def _on_host(
        self, install_dir: str, manifest: Manifest, deps_hash: str | None, secrets: dict[str, str]
    ) -> Launch:
        """A household connector run on the host (the operator's choice): its command and
        environment with the places and secrets filled in."""
        from skald.features.connectors.feed import expand

        deps = str(self.connectors.root / "deps" / deps_hash) if deps_hash else ""
        places = {"DIR": install_dir, "DEPS": deps, "HOME": install_dir}
        env = self.host_env()
        env.update({k: expand(v, places, secrets) for k, v in manifest.env.items()})
        argv = [expand(a, places, secrets) for a in manifest.command]
        return Launch(argv=argv, env=env, cwd=install_dir)

    async def _in_box(
        self, inst: ConnectorInstance, row: Connector, manifest: Manifest, deps_hash: str | None
    ) -> Launch:
        """A stdio household connector, in a container of its own (household_box.py)."""
        from skald.features.connectors.feed import expand
        from skald.features.connectors.household_box import (
            BOX_DEPS,
            BOX_DIR,
            BOX_HOME,
            HouseholdBoxes,
        )
        from skald.mcp import McpError
        from skald.sandbox.procgroup import MarkedGroup

        sandbox = self.connectors.server.sandbox
        if sandbox is None:
            raise McpError(
                f"connector '{row.name}' runs in a container of its own, and sandboxes are "
                "off here (an administrator can set [connectors] household_on_host)"
            )
        assert row.install_dir is not None
        boxes = inst.in_box(HouseholdBoxes(sandbox))
        deps = str(self.connectors.root / "deps" / deps_hash) if deps_hash else None
        container = await boxes.ensure(row.name, row.install_dir, deps, manifest.network)
        places = {"DIR": BOX_DIR, "DEPS": BOX_DEPS if deps else "", "HOME": BOX_DIR}
        env_values = {k: expand(v, places, {}) for k, v in manifest.env.items()}
        group = MarkedGroup.new(sandbox, container)
        command = [expand(a, places, {}) for a in manifest.command]
        return _in_group(group, BOX_DIR, env_values, command, BOX_HOME)

    async def _in_container(
        self,
        member: Member,
        row: Connector,
        manifest: Manifest,
        deps_hash: str | None,
        secrets: dict[str, str],
    ) -> Launch:
        from skald.features.connectors import home_files
        from skald.features.connectors.feed import expand
        from skald.mcp import McpError
        from skald.sandbox.procgroup import MarkedGroup

        sandbox = member.sandbox
        if sandbox is None:
            raise McpError(
                f"connector '{row.name}' runs in your sandbox, and sandboxes are off here"
            )
        user, role = await member.fetch()
        container = await sandbox.ensure(user, role)
        assert row.install_dir is not None
        # Written by descriptor, never through a link the member put in her home.
        homes = sandbox.homes_dir
        rel = await asyncio.to_thread(
            home_files.place_files, homes, user.id, row.name, Path(row.install_dir)
        )
        in_home = f"{CONTAINER_HOME}/{rel}"
        deps = ""
        if manifest.dependencies and deps_hash:
            deps = f"{CONTAINER_HOME}/.skald/connectors/deps/{deps_hash}"
            if not await asyncio.to_thread(home_files.deps_ready, homes, user.id, deps_hash):
                ca = await asyncio.to_thread(self._place_ca, homes, user.id)
                await self._install_in_container(
                    sandbox, container, manifest.dependencies, in_home, deps, ca
                )
        places = {"DIR": in_home, "DEPS": deps, "HOME": CONTAINER_HOME}
        env_values = {k: expand(v, places, secrets) for k, v in manifest.env.items()}
        group = MarkedGroup.new(sandbox, container)
        command = [expand(a, places, secrets) for a in manifest.command]
        secret_values = list(secrets.values())
        return _in_group(group, in_home, env_values, command, CONTAINER_HOME, secret_values)

    def _place_ca(self, homes_dir: Path, user_id: str) -> str | None:
        """The operator's extra CA bundle, copied into the home for the install step."""
        from skald.features.connectors import home_files

        extra = self.connectors.config.extra_ca_file
        if not extra:
            return None
        return f"{CONTAINER_HOME}/{home_files.place_ca(homes_dir, user_id, Path(extra))}"

    async def _install_in_container(
        self,
        sandbox: SandboxManager,
        container: str,
        kind: str,
        src: str,
        deps: str,
        ca: str | None = None,
    ) -> None:
        """Dependencies by content hash, inside the member's container, as the member.

        Rule: the install runs under a marker group of its own (`run_marked`), killed
        when it ends, fails, times out or is cancelled (the member locks, Skald stops), and
        under `flock <deps>.lock` in the container: a second install of the same folder
        waits, then finds `.ready` and does nothing. Trap: killing the host's `docker exec`
        client left pip/npm running in the container, writing into the staging folder
        the next install had just emptied."""
        from skald.features.connectors.install import deps_command
        from skald.mcp import McpError
        from skald.sandbox import trust
        from skald.sandbox.procgroup import run_marked

        staging = f"{deps}.staging"
        if kind == "npm":
            steps = (
                f"rm -rf {staging} && mkdir -p {staging} && cp {src}/package.json "
                f"{src}/package-lock.json {staging}/ && cd {staging} && "
                + " ".join(deps_command("npm", staging))
            )
        else:
            steps = f"rm -rf {staging} && mkdir -p {staging} && cd {src} && " + " ".join(
                deps_command("pip", f"{staging}/python", python="python3")
            )
        steps += f" && rm -rf {deps} && mv {staging} {deps} && touch {deps}/.ready"
        locked = f"[ -e {deps}/.ready ] || {{ {steps}; }}"  # done while we waited: nothing
        parent = deps.rsplit("/", 1)[0]
        script = f"mkdir -p {parent} && exec flock {deps}.lock sh -c {shlex.quote(locked)}"
        env_values = {"npm_config_cafile": ca, "PIP_CERT": ca, "SSL_CERT_FILE": ca} if ca else {}
        code, out = await run_marked(
            sandbox,
            container,
            src,
            env_values,
            ["sh", "-c", script],
            CONTAINER_HOME,
            PREPARE_TIMEOUT_S,
        )
        if code != 0:
            tail = " | ".join(out.decode(errors="replace").strip().splitlines()[-4:])
            # A certificate that did not verify: say what to set (a TLS-inspecting network).
            raise McpError(trust.install_failure(tail, self.connectors.config.extra_ca_file))


def _in_group(
    group: MarkedGroup,
    workdir: str,
    env: dict[str, str],
    command: list[str],
    home: str,
    secrets: list[str] | None = None,
) -> Launch:
    """`command` in `group`'s container: on a Docker API stream, or (a daemon not on a
    unix socket) through the `docker exec` client, whose environment carries `env`."""
    from skald.sandbox.procgroup import docker_client_env

    return Launch(
        argv=group.exec_argv(workdir, list(env), command, home),
        env={**docker_client_env(), **env},
        group=group,
        start=group.starter(workdir, env, command, home),
        secrets=secrets or [],
    )


def _verdict(out: str, code: int | None) -> tuple[bool, str]:
    """A verify command's answer: its last JSON object line on stdout."""
    for line in reversed(out.strip().splitlines()):
        try:
            answer = json.loads(line)
        except ValueError:
            continue
        if isinstance(answer, dict) and isinstance(answer.get("ok"), bool):
            message = answer.get("message")
            text = message if isinstance(message, str) else ""
            if answer["ok"] and code != 0:
                return False, text or f"the check ended with exit code {code}"
            return answer["ok"], text or ("checked" if answer["ok"] else "the check failed")
    return False, f"the check gave no answer (exit code {code})"


def _mcp_oauth(
    store: SecretStore, name: str, secrets: dict[str, str], scrub: list[str]
) -> httpx.Auth:
    """MCP's own OAuth: the member's stored sign-in, refreshed by the client (before it
    expires and once on a 401); none yet fails the start with where to sign in."""
    from skald.features.connectors import oauth
    from skald.mcp import McpError

    if oauth.ACCESS not in secrets:
        raise McpError(f"sign in to {name} from the Connectors page")
    return oauth.mcp_flow(store, name, scrub=scrub)


async def _with_oauth(
    manifest: Manifest, spec: OAuthSpec, oc: oauth.OAuthClient, secrets: dict[str, str]
) -> tuple[Manifest, dict[str, str]]:
    """The credential delivered as the manifest says (`oauth.credential`: the access
    token, refreshed first when it expires within a minute, the refresh token, or a
    Google authorized-user JSON); without a sign-in, the launch fails asking for one."""
    from skald.features.connectors import oauth
    from skald.mcp import McpError

    if oauth.ACCESS in secrets and oauth.needs_refresh(secrets):
        secrets = {**secrets, **await oauth.refresh(oc, secrets)}
    token = "{SECRET:" + oauth.ACCESS + "}"
    if spec.format != "access_token" and oauth.ACCESS in secrets:
        try:
            secrets = {**secrets, oauth.CREDENTIAL: oauth.credential(spec, oc, secrets)}
        except oauth.OAuthError as exc:
            raise McpError(str(exc)) from None
        token = "{SECRET:" + oauth.CREDENTIAL + "}"
    if spec.deliver == "header":
        headers = {**manifest.headers, spec.target: f"Bearer {token}"}
        return msgspec.structs.replace(manifest, headers=headers), secrets
    env = {**manifest.env, spec.target: token}
    return msgspec.structs.replace(manifest, env=env), secrets
