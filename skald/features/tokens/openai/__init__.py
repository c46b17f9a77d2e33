"""The OpenAI-compatible endpoint under `/v1`, opened by API tokens with the `openai`
scope (docs/dev/api.md)."""
