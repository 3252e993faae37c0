-- Reverses bitemporal_v1.sql.
DROP FUNCTION IF EXISTS memories_true_at(text, timestamptz);
DROP FUNCTION IF EXISTS memories_known_at(text, timestamptz);
