"""LLM providers: wire clients, the model catalogue, selection and fallback."""
