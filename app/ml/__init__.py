"""Models: the Matryoshka embedder and (later) the cross-encoder."""
