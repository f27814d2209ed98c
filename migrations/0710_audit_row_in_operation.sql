-- The operator audit row is written in the operation's own transaction (issue 24, item 18), before
-- the answer is known; its status is filled in as the answer leaves. NULL: the operation committed
-- and no status could be recorded after it (the process died before answering, or that update
-- failed) — the row still says who did what, where and when.
ALTER TABLE admin_audit_log ALTER COLUMN status DROP NOT NULL;
