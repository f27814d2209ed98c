-- Events feed (GET /api/external/events): merchants read their own outbox in order.
--
-- The cursor is the outbox id. Ids are handed out when a row is inserted, but transactions commit in
-- any order, so a reader could see id 11 before id 10 commits and then skip 10 for ever. Each row
-- records the transaction that wrote it; the feed only returns rows whose transaction is older than
-- every transaction still running (pg_snapshot_xmin), so everything below the cursor is final.
-- Two statements so that existing rows are not rewritten (they keep NULL: long committed).
ALTER TABLE outbox_events ADD COLUMN xact_id xid8;
ALTER TABLE outbox_events ALTER COLUMN xact_id SET DEFAULT pg_current_xact_id();
CREATE INDEX outbox_events_merchant_feed_idx ON outbox_events (merchant_id, id);
