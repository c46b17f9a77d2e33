"""What a provider's model list says about each model: limits and capabilities.

Rule: only what the list reports is taken (OpenRouter: `context_length`,
`top_provider.max_completion_tokens`, `supported_parameters`,
`architecture.input_modalities`; vLLM: `max_model_len`; LM Studio:
`max_context_length`; llama.cpp: `meta.n_ctx_train`; others under the usual names);
anything missing stays None, and the administrator fills it in. Trap: llama.cpp's
`n_ctx_train` is what the model was trained for, not what the server was started with
(`--ctx-size`), so it is an upper bound; say so where it is shown.
"""

from __future__ import annotations

from typing import Any

import msgspec

_WINDOW_KEYS = ("context_window", "context_length", "max_model_len", "max_context_length")
_OUTPUT_KEYS = ("max_output_tokens", "max_completion_tokens", "max_tokens")


class ListedModel(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    capabilities: list[str] = msgspec.field(default_factory=list)  # tools, vision, reasoning


def _positive(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value > 0 else None


def _first(entry: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        found = _positive(entry.get(key))
        if found is not None:
            return found
    return None


def describe(entry: dict[str, Any]) -> ListedModel | None:
    """One entry of a `/models` list (OpenAI-compatible or Anthropic), or None."""
    model_id = entry.get("id")
    if not isinstance(model_id, str) or not model_id:
        return None
    window = _first(entry, _WINDOW_KEYS)
    output = _first(entry, _OUTPUT_KEYS)
    top = entry.get("top_provider")
    if isinstance(top, dict):
        window = window or _first(top, ("context_length",))
        output = output or _first(top, ("max_completion_tokens",))
    meta = entry.get("meta")
    if isinstance(meta, dict):
        window = window or _first(meta, ("n_ctx", "n_ctx_train"))
    caps: set[str] = set()
    params = entry.get("supported_parameters")
    if isinstance(params, list):
        if "tools" in params:
            caps.add("tools")
        if "reasoning" in params or "include_reasoning" in params:
            caps.add("reasoning")
    arch = entry.get("architecture")
    if isinstance(arch, dict) and "image" in (arch.get("input_modalities") or []):
        caps.add("vision")
    return ListedModel(
        id=model_id, context_window=window, max_output_tokens=output, capabilities=sorted(caps)
    )


def describe_list(body: Any) -> list[ListedModel]:
    """A whole `/models` answer: `{"data": [...]}` (most) or a bare list."""
    entries = body.get("data") if isinstance(body, dict) else body
    if not isinstance(entries, list):
        return []
    return [m for e in entries if isinstance(e, dict) and (m := describe(e)) is not None]
