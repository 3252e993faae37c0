"""Retrieval: the stages of the hybrid search and the pipeline that composes them."""
