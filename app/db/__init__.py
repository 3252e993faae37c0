"""Postgres: metadata, ORM models and engine."""
