-- 012_action_attempts.sql: what culpritd did about an incident's actions (docs/operations.md,
-- "Actions"): a row per attempt of the action hook (attempt 1, 2, ...), and a row (attempt 0)
-- for each decision taken without running it: awaiting an operator's approval, approved.
-- who: "culpritd" for what it did by itself, the operator's name for an approval and the
-- attempts that follow it. result: ok, failed, timeout, error (the hook could not be
-- started), dry_run (the hook was told not to act, and said what it would have done),
-- awaiting_approval, approved. input: the JSON the hook read on its standard input; output:
-- the first 4 KiB of what it wrote.
CREATE TABLE action_attempts (
    id           bigserial   PRIMARY KEY,
    incident_key text        NOT NULL,
    job          text        NOT NULL,
    action_n     integer     NOT NULL,
    kind         text        NOT NULL,
    target       text        NOT NULL,
    op           text        NOT NULL CHECK (op IN ('apply', 'resume')),
    mode         text        NOT NULL CHECK (mode IN ('dry_run', 'approve', 'auto')),
    who          text        NOT NULL,
    attempt      integer     NOT NULL,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL,
    exit_code    integer,
    result       text        NOT NULL,
    output       text        NOT NULL DEFAULT '',
    input        jsonb
);
CREATE INDEX action_attempts_incident ON action_attempts (incident_key, action_n, id);
