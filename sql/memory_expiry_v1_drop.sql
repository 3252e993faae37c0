-- Cognis Memory: undoes sql/memory_expiry_v1.sql (migration 0017_memory_expiry's downgrade;
-- the column and its comment go with the migration's DROP COLUMN).
DROP TABLE IF EXISTS memory_expiries;
