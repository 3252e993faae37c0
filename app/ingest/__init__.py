"""Ingestion: the paper's 4-step message pipeline, its guards, audit trail and workers.

intake (step 1: save) → context (step 2: speaker and time) → candidates + extractors (step 3:
context-aware extraction, LLM or deterministic) → apply (step 4: embed and write in one
transaction). The worker runs the steps for queued messages; the service serves the API.
"""
