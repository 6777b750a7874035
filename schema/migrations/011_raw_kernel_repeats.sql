-- 011_raw_kernel_repeats.sql: two executions of one kernel that start in the same microsecond
-- on one stream of one rank (small CPU operators do: aten::add_ once per parameter) are two
-- rows. nth numbers the executions with the same (rank, iter, stream, ts, name) in their
-- batch, 0 for the first; a resent batch numbers them the same, so its rows still conflict
-- with the stored ones. Under the old key the second was a unique violation: its group was
-- redone through the staging tables and the repeat dropped, though culpritd had counted it
-- accepted.
ALTER TABLE raw_kernels ADD COLUMN nth integer NOT NULL DEFAULT 0;
ALTER TABLE raw_kernels DROP CONSTRAINT raw_kernels_pkey;
ALTER TABLE raw_kernels ADD PRIMARY KEY (job_id, rank, iter, stream, ts, name_id, nth);
