-- Cognis Memory: undoes sql/batch_jobs_v1.sql (migration 0022_batch_jobs's downgrade).
DROP TABLE IF EXISTS batch_jobs;
