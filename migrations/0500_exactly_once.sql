-- Exactly-once money (issue 10).

-- The record an Idempotency-Key created, bound in that record's own transaction (a cash-out or a
-- refund: the `transactions` row id). One key row binds at most one record; a retry that takes the
-- key over resumes this record instead of creating another.
ALTER TABLE idempotency_keys ADD COLUMN resource_id text;

-- The rail simulator's stall switch (sandbox PUT /api/sandbox/rail/stall): answers to sendPayment
-- and sendReturn are delayed by delay_ms, or never given when drop is true. One row; every process
-- of the installation reads it.
CREATE TABLE sim_rail_stall (
  id          smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
  delay_ms    bigint NOT NULL DEFAULT 0 CHECK (delay_ms BETWEEN 0 AND 3600000),
  drop_answer boolean NOT NULL DEFAULT false,
  updated_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO sim_rail_stall (id) VALUES (1);
