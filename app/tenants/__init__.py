"""Tenants: who a request acts for, their API keys, and the row-level security that binds them."""
