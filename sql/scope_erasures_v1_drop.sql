-- Cognis Memory: undoes sql/scope_erasures_v1.sql (migration 0019_scope_erasures's downgrade).
DROP TABLE IF EXISTS scope_erasures;
