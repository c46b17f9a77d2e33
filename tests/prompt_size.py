"""What one model request costs before the conversation starts: the system prompt and the
tool schemas, per role and agent, in tokens (characters / 4, the estimate compaction uses;
the real count depends on the model's tokenizer and chat template, see
bench/bench_real_model.py). Used by tests/test_prompt_budget.py and the bench."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec

from skald.agent.compaction import estimate_tokens
from skald.config import load_config
from skald.core.runtime import Runtime
from skald.llm.types import ToolSpec
from skald.paths import DataLayout
from skald.permissions import can
from skald.sandbox.tool import SANDBOX_EXEC, ExecuteCmdTool, InstallPackagesTool

PASSWORD = "a household password"
ROLES = ("admin", "member", "children")


class PromptSize(msgspec.Struct, frozen=True, kw_only=True):
    role: str
    agent: str
    system_tokens: int
    tool_tokens: int
    tools: tuple[str, ...]
    prompt: str = ""  # the composed system prompt
    specs: tuple[ToolSpec, ...] = ()

    @property
    def total(self) -> int:
        return self.system_tokens + self.tool_tokens


async def _no_member() -> Any:
    raise AssertionError("only the tool's spec is measured")


async def measure(data: Path, *, sandbox: bool = True, profile: str = "full") -> list[PromptSize]:
    """Boot a Runtime in `data`, make one member per seeded role with empty notes, and
    compose every agent's first request.

    Sandboxes stay off (no container is made); with `sandbox`, the two sandbox tools a
    member with `sandbox.exec` is offered are added from their own classes, built on the
    configured sandbox settings, so their schemas count as in production. `profile`: as
    a turn to a model with that profile composes it (skald/core/model_profile.py; the
    bench also runs this against older trees, which have no profiles: "full" touches
    nothing new)."""
    env = {"SKALD_SECURITY_KDF_PROFILE": "test", "SKALD_SANDBOX_ENABLED": "false"}
    layout = DataLayout(data)
    rt = await Runtime.boot(layout, load_config(layout.root, env), announce=io.StringIO())
    out: list[PromptSize] = []
    try:
        for role in ROLES:
            name = f"{role}1"
            created = await rt.core.users.create(name, PASSWORD, role)
            await rt.core.users.unlock(name, PASSWORD)
            member = await rt.user_runtime(created.user)
            values = await member.plugins.prompt_blocks(member)
            manager: Any = SimpleNamespace(config=rt.config.sandbox)
            exec_tools = (
                [ExecuteCmdTool(manager, _no_member), InstallPackagesTool(manager, _no_member)]
                if sandbox and can(member.role, SANDBOX_EXEC)
                else []
            )
            for agent in sorted(member.agents.values(), key=lambda a: a.id):
                tools = member._tools(agent) + [
                    t for t in exec_tools if agent.tools is None or t.name in agent.tools
                ]
                if profile == "full":
                    prompt = await member.prompts.compose(agent, member.agents_root, values)
                    specs = [t.spec for t in tools]
                else:
                    prompt, specs = await _in_profile(member, agent, values, tools, profile)
                out.append(
                    PromptSize(
                        role=role,
                        agent=agent.id,
                        system_tokens=estimate_tokens([], system=prompt),
                        tool_tokens=estimate_tokens([], tools=specs),
                        tools=tuple(s.name for s in specs),
                        prompt=prompt,
                        specs=tuple(specs),
                    )
                )
    finally:
        await rt.shutdown()
    return out


async def _in_profile(
    member: Any, agent: Any, values: dict[str, str], tools: list[Any], profile: Any
) -> tuple[str, list[ToolSpec]]:
    from skald.core.model_profile import VARIANTS, offered, prompt_values

    prompt = await member.prompts.compose(
        agent, member.agents_root, prompt_values(profile, values), VARIANTS[profile]
    )
    held, names = offered(profile, tools)
    return prompt, [t.spec for t in held if names is None or t.name in names]


def table(sizes: list[PromptSize]) -> str:
    lines = [f"{'role':9} {'agent':20} {'system':>6} {'tools':>6} {'total':>6}  tools offered"]
    for s in sizes:
        lines.append(
            f"{s.role:9} {s.agent:20} {s.system_tokens:6} {s.tool_tokens:6} {s.total:6}  "
            f"{len(s.tools)}"
        )
    return "\n".join(lines)
