"""Cognis Memory: long-term memory for conversational AI agents."""

__version__ = "0.1.0"
