"""`/v1/models` and `/v1/chat/completions` for OpenAI clients, and their table."""

from __future__ import annotations

from typing import Any

from skald.plugins import hookimpl
