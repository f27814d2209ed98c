-- The outbox and its webhook deliveries and attempts, partitioned by day (issue 25, item 5).
--
-- These three tables hold nearly all of the bytes that retention removes (an event carries its
-- whole delivery body; an attempt the response body): deleting them row by row costs WAL, dead
-- tuples and vacuum for every row. Now each is partitioned by RANGE over the creation time of the
-- EVENT (UTC days), so one day's events, their deliveries and the attempts of those deliveries live
-- in three partitions with the same bounds (`<table>_pYYYYMMDD`), and retention drops the three
-- together once nothing in them is pending (src/retention/partitions.ts). Partitions are created
-- ahead by src/db/partitions.ts (at start and on every retention pass); a DEFAULT partition takes
-- whatever no daily partition covers (rows from before this migration, or a day nobody created), so
-- an insert never fails, and the old row-by-row purge still empties it.
--
-- What partitioning requires (every unique index must contain the partition key):
--   outbox_events       PRIMARY KEY (id, created_at), UNIQUE (event_id, created_at). id stays the
--                       feed's cursor (one identity sequence over all partitions: still unique and
--                       increasing); event_id is generated (gen_random_uuid), never given.
--   webhook_deliveries  carry event_created_at (the event's created_at, copied at fan-out):
--                       PRIMARY KEY (id, event_created_at), UNIQUE (webhook_id, outbox_id,
--                       event_created_at) — the same rule as before, since an outbox id has one
--                       created_at.
--   webhook_attempts    carry event_created_at too: UNIQUE (delivery_id, attempt, event_created_at).
-- Foreign keys: deliveries -> outbox_events and attempts -> deliveries are dropped. A foreign key
-- into a partitioned table blocks dropping a partition of the referenced table while the
-- referencing partition exists, and each check locks the event row just written (the cost 0650 and
-- 0670 took out). The rows are written only by the fan-out (from the event row it reads) and by the
-- attempt recorder (from the delivery it updates); retention drops a day's three partitions in one
-- transaction, children first. webhook_deliveries -> webhooks stays (webhooks is not partitioned).
-- Rows move with their ids; the identity sequences continue after the highest id.

-- outbox_events ---------------------------------------------------------------------------------
ALTER TABLE outbox_events RENAME TO outbox_events_unpartitioned;
DROP TRIGGER outbox_events_pending ON outbox_events_unpartitioned;
DROP TRIGGER outbox_events_0_references ON outbox_events_unpartitioned;
DROP TRIGGER outbox_events_references_stay ON outbox_events_unpartitioned;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_outbox_id_fkey;
ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_delivery_id_fkey;
ALTER INDEX outbox_events_pkey RENAME TO outbox_events_unpartitioned_pkey;
ALTER INDEX outbox_events_event_id_key RENAME TO outbox_events_unpartitioned_event_id_key;
ALTER INDEX outbox_events_merchant_feed_idx RENAME TO outbox_events_unpartitioned_merchant_feed_idx;

CREATE TABLE outbox_events (
  id           bigint GENERATED ALWAYS AS IDENTITY,
  event_id     uuid NOT NULL DEFAULT gen_random_uuid(),
  event        text NOT NULL,
  merchant_id  bigint,
  account_id   bigint,
  subject      text NOT NULL,
  payload      jsonb NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  xact_id      xid8 DEFAULT pg_current_xact_id(),
  CONSTRAINT outbox_events_pkey PRIMARY KEY (id, created_at),
  CONSTRAINT outbox_events_event_id_key UNIQUE (event_id, created_at)
) PARTITION BY RANGE (created_at);
CREATE TABLE outbox_events_default PARTITION OF outbox_events DEFAULT;
CREATE INDEX outbox_events_merchant_feed_idx ON outbox_events (merchant_id, id);
-- Look-ups by id alone (the fan-out, the subject checks): one probe per partition.
CREATE INDEX outbox_events_id_idx ON outbox_events (id);

INSERT INTO outbox_events (id, event_id, event, merchant_id, account_id, subject, payload, created_at, xact_id)
  OVERRIDING SYSTEM VALUE
  SELECT id, event_id, event, merchant_id, account_id, subject, payload, created_at, xact_id FROM outbox_events_unpartitioned;
SELECT setval(pg_get_serial_sequence('outbox_events', 'id'), (SELECT max(id) FROM outbox_events))
 WHERE EXISTS (SELECT 1 FROM outbox_events);
DROP TABLE outbox_events_unpartitioned;

CREATE TRIGGER outbox_events_0_references AFTER INSERT ON outbox_events
  REFERENCING NEW TABLE AS new_events
  FOR EACH STATEMENT EXECUTE FUNCTION outbox_events_references();
CREATE TRIGGER outbox_events_pending AFTER INSERT ON outbox_events
  REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION outbox_events_pending();
CREATE TRIGGER outbox_events_references_stay BEFORE UPDATE OF merchant_id, account_id ON outbox_events FOR EACH ROW
  WHEN (OLD.merchant_id IS DISTINCT FROM NEW.merchant_id OR OLD.account_id IS DISTINCT FROM NEW.account_id)
  EXECUTE FUNCTION outbox_events_references_stay();

-- webhook_deliveries ----------------------------------------------------------------------------
ALTER TABLE webhook_deliveries RENAME TO webhook_deliveries_unpartitioned;
ALTER INDEX webhook_deliveries_pkey RENAME TO webhook_deliveries_unpartitioned_pkey;
ALTER INDEX webhook_deliveries_event_webhook_key RENAME TO webhook_deliveries_unpartitioned_event_webhook_key;
ALTER INDEX webhook_deliveries_due_idx RENAME TO webhook_deliveries_unpartitioned_due_idx;
ALTER INDEX webhook_deliveries_subject_idx RENAME TO webhook_deliveries_unpartitioned_subject_idx;
ALTER TABLE webhook_deliveries_unpartitioned RENAME CONSTRAINT webhook_deliveries_webhook_id_fkey TO webhook_deliveries_unpartitioned_webhook_id_fkey;

CREATE TABLE webhook_deliveries (
  id                uuid NOT NULL DEFAULT gen_random_uuid(),
  webhook_id        uuid NOT NULL,
  outbox_id         bigint NOT NULL,
  event             text NOT NULL,
  subject           text NOT NULL,
  status            text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed', 'cancelled')),
  attempts          integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  retry_step        integer NOT NULL DEFAULT 0 CHECK (retry_step >= 0),
  next_attempt_at   timestamptz NOT NULL DEFAULT now(),
  ready             boolean NOT NULL DEFAULT true,
  claim_token       uuid,
  last_attempt_at   timestamptz,
  last_status_code  integer,
  last_error        text,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  delivered_at      timestamptz,
  failed_at         timestamptz,
  -- The created_at of its event (outbox_events): the partition key, shared with the event.
  event_created_at  timestamptz NOT NULL,
  CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id, event_created_at),
  CONSTRAINT webhook_deliveries_event_webhook_key UNIQUE (webhook_id, outbox_id, event_created_at),
  CONSTRAINT webhook_deliveries_webhook_id_fkey FOREIGN KEY (webhook_id) REFERENCES webhooks (id)
) PARTITION BY RANGE (event_created_at);
CREATE TABLE webhook_deliveries_default PARTITION OF webhook_deliveries DEFAULT;
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending' AND ready;
CREATE INDEX webhook_deliveries_subject_idx ON webhook_deliveries (webhook_id, subject, outbox_id) WHERE status = 'pending';
-- Look-ups by id alone (claims, results, the operator view): one probe per partition.
CREATE INDEX webhook_deliveries_id_idx ON webhook_deliveries (id);

INSERT INTO webhook_deliveries (id, webhook_id, outbox_id, event, subject, status, attempts, retry_step, next_attempt_at, ready,
                                claim_token, last_attempt_at, last_status_code, last_error, created_at, updated_at,
                                delivered_at, failed_at, event_created_at)
  SELECT d.id, d.webhook_id, d.outbox_id, d.event, d.subject, d.status, d.attempts, d.retry_step, d.next_attempt_at, d.ready,
         d.claim_token, d.last_attempt_at, d.last_status_code, d.last_error, d.created_at, d.updated_at,
         d.delivered_at, d.failed_at, COALESCE(o.created_at, d.created_at)
    FROM webhook_deliveries_unpartitioned d LEFT JOIN outbox_events o ON o.id = d.outbox_id;

-- webhook_attempts ------------------------------------------------------------------------------
ALTER TABLE webhook_attempts RENAME TO webhook_attempts_unpartitioned;
ALTER INDEX webhook_attempts_pkey RENAME TO webhook_attempts_unpartitioned_pkey;
ALTER INDEX webhook_attempts_delivery_attempt_key RENAME TO webhook_attempts_unpartitioned_delivery_attempt_key;

CREATE TABLE webhook_attempts (
  id                bigint GENERATED ALWAYS AS IDENTITY,
  delivery_id       uuid NOT NULL,
  attempt           integer NOT NULL CHECK (attempt >= 1),
  worker            text NOT NULL,
  started_at        timestamptz NOT NULL,
  duration_ms       integer NOT NULL CHECK (duration_ms >= 0),
  status_code       integer,
  error             text,
  response_body     text,
  -- The created_at of the delivery's event: the partition key, shared with the event.
  event_created_at  timestamptz NOT NULL,
  CONSTRAINT webhook_attempts_pkey PRIMARY KEY (id, event_created_at),
  CONSTRAINT webhook_attempts_delivery_attempt_key UNIQUE (delivery_id, attempt, event_created_at)
) PARTITION BY RANGE (event_created_at);
CREATE TABLE webhook_attempts_default PARTITION OF webhook_attempts DEFAULT;

INSERT INTO webhook_attempts (id, delivery_id, attempt, worker, started_at, duration_ms, status_code, error, response_body, event_created_at)
  OVERRIDING SYSTEM VALUE
  SELECT a.id, a.delivery_id, a.attempt, a.worker, a.started_at, a.duration_ms, a.status_code, a.error, a.response_body, d.event_created_at
    FROM webhook_attempts_unpartitioned a JOIN webhook_deliveries d ON d.id = a.delivery_id;
SELECT setval(pg_get_serial_sequence('webhook_attempts', 'id'), (SELECT max(id) FROM webhook_attempts))
 WHERE EXISTS (SELECT 1 FROM webhook_attempts);
DROP TABLE webhook_attempts_unpartitioned;
DROP TABLE webhook_deliveries_unpartitioned;

