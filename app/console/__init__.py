"""The web console at /console: users and memories, version chains with diffs, explained search,
the outbox backlog and ingestion jobs. Server-rendered (Jinja2), behind the API's keys.

Memories, chains, search and jobs are read through the public API in process (app.api.in_process);
only what the API does not list (users, a user's recent jobs, undelivered outbox events) is read
here, in queries.py.
"""
