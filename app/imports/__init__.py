"""Bulk import of a user's history: JSON Lines (ours or mem0's export) into memories."""
