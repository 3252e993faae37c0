"""LLM access: an OpenAI-compatible chat-completions client."""
