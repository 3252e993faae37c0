"""The web console at /console: users and memories, version chains with diffs, explained search,
the outbox backlog and ingestion jobs; and actions (edit, delete, erase behind a typed
confirmation, dry-run a message). Server-rendered (Jinja2), behind the API's keys; every change
is a POST carrying the session's CSRF token (csrf.py).

Memories, chains, search, jobs and every change go through the public API in process
(app.in_process); only what the API does not list (users, a user's recent jobs, undelivered
outbox events, a stored message to replay) is read here, in queries.py.
"""
