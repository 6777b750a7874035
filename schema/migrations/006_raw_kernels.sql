-- 006_raw_kernels.sql: raw kernel executions sent by agents during an on-demand capture
-- (POST /api/v1/jobs/{job}/capture, Command CAPTURE, Batch.raw_kernels; docs/protocol.md).
-- Written by the storage writer in the transaction of their batch (binary COPY, exactly once
-- with agent_progress). Bounded per capture (max_events), so not partitioned by day: rows
-- go with their job (ON DELETE CASCADE); retention does not cover them (docs/storage.md).
-- ts = the kernel's start on the agent's clock.
CREATE TABLE raw_kernels (
	job_id  integer NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
	rank    integer NOT NULL,
	iter    integer NOT NULL,
	name_id integer NOT NULL,
	ts      timestamptz NOT NULL,
	kind    smallint NOT NULL,
	dur_us  bigint NOT NULL,
	stream  integer NOT NULL,
	PRIMARY KEY (job_id, rank, iter, stream, ts, name_id)
);
