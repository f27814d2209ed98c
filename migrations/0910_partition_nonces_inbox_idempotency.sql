-- The other append-only tables partitioned by day (issue 25, item 5), after the outbox (0800):
-- signature-v2 nonces, the rail inbox, and the stored answers of Idempotency-Keys. Retention drops
-- whole days (src/retention/partitions.ts) instead of deleting rows. Every unique key must contain
-- the partition key, so each table is partitioned by a time that the message itself carries and
-- that is the same on every presentation of it — then uniqueness within the partition is
-- uniqueness, with no global index:
--
--   request_nonces         by signed_day: midnight UTC of the request's signed X-Request-Timestamp.
--                          PRIMARY KEY (client_id, nonce, signed_day). A replay is the same signed
--                          bytes, so the same timestamp and the same day: it meets the first claim
--                          in the same partition, across midnight too. A day's partition goes once
--                          no request signed on that day can pass the 300-second timestamp check.
--   rail_inbox             by notified_day: midnight UTC of the notification's own time (its `at`,
--                          the same on every redelivery). PRIMARY KEY (notification_id, notified_day).
--   idempotency_responses  the answers (the bytes replayed), moved out of idempotency_keys and
--                          partitioned by the expiry of their key (expires_at, copied from the key
--                          row): PRIMARY KEY (key_id, expires_at). The key rows stay unpartitioned
--                          and small (scope, hash, status, lease, status code), with their unique
--                          scope and the lease logic unchanged; retention deletes expired ones and
--                          drops the days of answers whose every key has expired.
--
-- Rows from before this migration: the signed timestamp of a nonce and the time of a notification
-- were never stored, so each such row is recorded under every day its true key could have: a nonce
-- under the days of its claim time ± 300 s (the timestamp tolerance), a notification under the
-- days of its processing time and the day before (the rail redelivers within minutes). An extra
-- row refuses nothing that the old table would have let through.
-- Each table keeps a DEFAULT partition (rows of a day nobody created a partition for); retention
-- purges the default partition row by row.

-- request_nonces --------------------------------------------------------------------------------
ALTER TABLE request_nonces RENAME TO request_nonces_unpartitioned;
ALTER INDEX request_nonces_pkey RENAME TO request_nonces_unpartitioned_pkey;
DROP INDEX request_nonces_expires_at;

CREATE TABLE request_nonces (
  client_id    text NOT NULL,
  nonce        text NOT NULL CHECK (length(nonce) BETWEEN 16 AND 128),
  fingerprint  text NOT NULL CHECK (fingerprint <> ''),
  expires_at   timestamptz NOT NULL,
  -- Midnight UTC of the signed X-Request-Timestamp's day: the partition key.
  signed_day   timestamptz NOT NULL CHECK (signed_day = date_trunc('day', signed_day AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'),
  CONSTRAINT request_nonces_pkey PRIMARY KEY (client_id, nonce, signed_day)
) PARTITION BY RANGE (signed_day);
CREATE TABLE request_nonces_default PARTITION OF request_nonces DEFAULT;

-- expires_at was the claim time plus 600 s; the signed timestamp was within 300 s of the claim.
INSERT INTO request_nonces (client_id, nonce, fingerprint, expires_at, signed_day)
  SELECT DISTINCT n.client_id, n.nonce, n.fingerprint, n.expires_at,
         date_trunc('day', (n.expires_at - interval '600 seconds' + s.shift) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
    FROM request_nonces_unpartitioned n CROSS JOIN (VALUES (interval '-300 seconds'), (interval '300 seconds')) AS s(shift);
DROP TABLE request_nonces_unpartitioned;

-- rail_inbox ------------------------------------------------------------------------------------
ALTER TABLE rail_inbox RENAME TO rail_inbox_unpartitioned;
ALTER INDEX rail_inbox_pkey RENAME TO rail_inbox_unpartitioned_pkey;
DROP INDEX rail_inbox_processed_idx;

CREATE TABLE rail_inbox (
  notification_id  text NOT NULL,
  kind             text NOT NULL,
  processed_at     timestamptz NOT NULL DEFAULT now(),
  -- Midnight UTC of the notification's own time: the partition key.
  notified_day     timestamptz NOT NULL CHECK (notified_day = date_trunc('day', notified_day AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'),
  CONSTRAINT rail_inbox_pkey PRIMARY KEY (notification_id, notified_day)
) PARTITION BY RANGE (notified_day);
CREATE TABLE rail_inbox_default PARTITION OF rail_inbox DEFAULT;
-- The default partition is purged by processing time.
CREATE INDEX rail_inbox_default_processed_idx ON rail_inbox_default (processed_at);

INSERT INTO rail_inbox (notification_id, kind, processed_at, notified_day)
  SELECT DISTINCT r.notification_id, r.kind, r.processed_at,
         date_trunc('day', (r.processed_at + s.shift) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
    FROM rail_inbox_unpartitioned r CROSS JOIN (VALUES (interval '0'), (interval '-1 day')) AS s(shift);
DROP TABLE rail_inbox_unpartitioned;

-- idempotency_responses -------------------------------------------------------------------------
CREATE TABLE idempotency_responses (
  key_id      bigint NOT NULL,
  -- The expires_at of its key (idempotency_keys): the partition key.
  expires_at  timestamptz NOT NULL,
  body        text NOT NULL,
  CONSTRAINT idempotency_responses_pkey PRIMARY KEY (key_id, expires_at)
) PARTITION BY RANGE (expires_at);
CREATE TABLE idempotency_responses_default PARTITION OF idempotency_responses DEFAULT;
CREATE INDEX idempotency_responses_default_expires_idx ON idempotency_responses_default (expires_at);

INSERT INTO idempotency_responses (key_id, expires_at, body)
  SELECT id, expires_at, response_body FROM idempotency_keys WHERE response_body IS NOT NULL;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_completed;
ALTER TABLE idempotency_keys DROP COLUMN response_body;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_completed CHECK (status = 'in_progress' OR response_status IS NOT NULL);
