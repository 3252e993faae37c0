-- Removes the analysts' views and 0002's functions (what a DBA runs to take them away without
-- a downgrade). memories_known_at and memories_true_at (sql/bitemporal_v3.sql) do not use
-- them and keep working.
DROP FUNCTION IF EXISTS memories_as_of(text, timestamptz);
DROP FUNCTION IF EXISTS memory_chain(uuid);
DROP VIEW IF EXISTS memory_versions;
DROP VIEW IF EXISTS current_memories;
