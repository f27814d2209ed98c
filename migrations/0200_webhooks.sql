-- 0200 webhooks: merchant registrations, one delivery per (event, webhook), every attempt recorded.
-- The dispatcher fans `outbox_events` out to `webhook_deliveries`; senders claim due deliveries with
-- FOR UPDATE SKIP LOCKED and a lease (`next_attempt_at` moves past the attempt while it runs).
-- See docs/webhooks.md.

-- A registration. `account_id` NULL: global for the merchant (every account's events); otherwise
-- only that account's events. The secret is kept as given/generated: it is the HMAC key of every
-- delivery and the spec shows it in the list (docs/decisions.md, "Webhooks").
-- DELETE is a soft delete (`deleted_at`), so the delivery history stays readable by operators.
CREATE TABLE webhooks (
  id              uuid PRIMARY KEY,
  merchant_id     bigint NOT NULL REFERENCES merchants (id),
  account_id      bigint REFERENCES accounts (id),
  client_id       text REFERENCES api_keys (client_id),
  url             text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
  events          text[] NOT NULL CHECK (cardinality(events) >= 1),
  secret          text NOT NULL CHECK (length(secret) BETWEEN 16 AND 256),
  description     text,
  is_active       boolean NOT NULL DEFAULT true,
  allow_insecure  boolean NOT NULL DEFAULT false,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  deleted_at      timestamptz
);
CREATE INDEX webhooks_merchant_idx ON webhooks (merchant_id, created_at) WHERE deleted_at IS NULL;

-- One event for one webhook. `id` is the X-Service-Delivery header: the same on every attempt.
--   status          pending (waiting or in flight) | delivered | failed (schedule exhausted) |
--                   cancelled (webhook deleted before delivery)
--   attempts        attempts started (numbers the rows of webhook_attempts)
--   retry_step      failed attempts of the current cycle (drives the backoff; a re-send resets it)
--   next_attempt_at when a pending delivery may be claimed; while an attempt runs it holds the lease
--   ready           it is the head of its (webhook, subject) queue: no earlier delivery of the subject
--                   to the webhook is pending. Followers wait with ready = false and are promoted
--                   when the head finishes; senders only look at ready rows (the claim re-checks the
--                   order, so `ready` is what keeps claims cheap, not what keeps the order)
--   claim_token     fencing token of the attempt in hand: a result is written only with it
CREATE TABLE webhook_deliveries (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  webhook_id        uuid NOT NULL REFERENCES webhooks (id),
  outbox_id         bigint NOT NULL REFERENCES outbox_events (id),
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
  -- one delivery per event per webhook; also the per-webhook listing of operators
  CONSTRAINT webhook_deliveries_event_webhook_key UNIQUE (webhook_id, outbox_id)
);
-- Due work, in the order senders take it (heads of their subject queue only).
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending' AND ready;
-- "Is an earlier delivery of this subject to this webhook still pending?" (per-subject ordering),
-- and "which follower comes next?".
CREATE INDEX webhook_deliveries_subject_idx ON webhook_deliveries (webhook_id, subject, outbox_id) WHERE status = 'pending';

-- "Is an earlier event of this subject not fanned out yet?" (ordering across dispatcher batches).
CREATE INDEX outbox_events_undispatched_subject_idx ON outbox_events (subject, id) WHERE dispatched_at IS NULL;

-- Every attempt, successful or not.
CREATE TABLE webhook_attempts (
  id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  delivery_id    uuid NOT NULL REFERENCES webhook_deliveries (id),
  attempt        integer NOT NULL CHECK (attempt >= 1),
  worker         text NOT NULL,
  started_at     timestamptz NOT NULL,
  duration_ms    integer NOT NULL CHECK (duration_ms >= 0),
  status_code    integer,
  error          text,
  response_body  text,
  CONSTRAINT webhook_attempts_delivery_attempt_key UNIQUE (delivery_id, attempt)
);
