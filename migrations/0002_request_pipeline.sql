-- 0002 request pipeline: idempotency records of the external API.
-- Scope: (merchant, method, path, key) for 24 hours. A request claims its key (in_progress, with a
-- fencing token and a lease); the answer is stored in the same database transaction as the
-- business effect when the operation writes, so an executed operation always has its record.
CREATE TABLE idempotency_keys (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  merchant_id      bigint NOT NULL REFERENCES merchants (id),
  method           text NOT NULL,
  path             text NOT NULL,
  key              text NOT NULL CHECK (length(key) BETWEEN 1 AND 256),
  request_hash     text NOT NULL,
  status           text NOT NULL CHECK (status IN ('in_progress', 'completed')),
  owner_token      uuid NOT NULL,
  locked_until     timestamptz NOT NULL,
  response_status  integer,
  response_body    text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  expires_at       timestamptz NOT NULL,
  CONSTRAINT idempotency_keys_scope_key UNIQUE (merchant_id, method, path, key),
  CONSTRAINT idempotency_keys_completed CHECK (status = 'in_progress' OR (response_status IS NOT NULL AND response_body IS NOT NULL))
);
CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at);
