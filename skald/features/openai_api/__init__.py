"""The OpenAI-compatible endpoint under `/v1` (docs/dev/api.md)."""
