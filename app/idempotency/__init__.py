"""Idempotency keys: a write sent with an `Idempotency-Key` is done at most once.

The key is scoped by tenant and user (the same key from another user is another key) and bound
to its request (method, path, query and JSON body): a retry of the same request is answered
with the first response, stored with the write in one transaction; the same key on another
request is refused (422). Responses are kept for COGNIS_IDEMPOTENCY_TTL_S (a day), then
deleted by the retention job (app/db/retention.py).
`rules` holds the key's rules and errors, `store` the table.
"""
