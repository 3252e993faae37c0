"""The versioned memory store: repository (queries), service (rules), domain types."""
