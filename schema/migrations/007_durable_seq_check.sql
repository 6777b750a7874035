-- 007_durable_seq_check.sql: a durable sequence is a batch number, 1 and up (0: none).
-- culpritd once stored a Batch seq of 2^64 - 1 as durable_seq = -1, read it back as
-- 2^64 - 1 after a restart and from then on took every batch of that (job, agent) for a
-- resend and dropped it. It now refuses such a seq (docs/protocol.md, "Sequences"); the
-- database refuses it too. A negative row is such a poisoned agent: forgetting it lets the
-- agent's batches be stored again.
DELETE FROM agent_progress WHERE durable_seq < 0;
ALTER TABLE agent_progress ADD CONSTRAINT agent_progress_durable_seq_nonnegative CHECK (durable_seq >= 0);
