-- Cognis Memory: sentence vectors (installed by migration 0021_sentence_vectors). The column is
-- added by the migration itself: this file holds the comment analysts read. Rerunnable.

COMMENT ON COLUMN memories.sentence_embeddings_768d IS 'One 768D embedding per sentence ("Speaker: sentence", at most 12) of a memory of several sentences. Empty: one sentence (the content''s own embedding serves). NULL: not embedded yet. Search scores a memory by its best sentence too (lever sentence_vector).';
