-- Issue 25: a record at stage 2 (acknowledged by the rail) whose order the rail no longer knows —
-- its acknowledgement given by a primary that a failover replaced, or read there before the
-- standby had it — is sent again by the recovery (src/pix/recovery.ts). `rail_checked_at` is when
-- the recovery last sent it again (null: never): each record is sent again at most once per bound.
-- No index reads it, so the recovery's update stays heap-only.
ALTER TABLE transactions ADD COLUMN rail_checked_at timestamptz;
