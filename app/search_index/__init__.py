"""OpenSearch: the BM25 mirror of memory text, fed from the outbox."""
