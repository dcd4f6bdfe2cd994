"""Model provider adapters on the official SDKs: Anthropic Messages and OpenAI-style Chat Completions."""
