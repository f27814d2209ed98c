-- 0100 sending and returning money: cash-out limits, the rail inbox, the simulated central bank's
-- pending work, and the statement's filter column and indexes.

-- Cash-out limits of an account, in cents as operators set them (see docs/pix.md, "Limits").
--   cash_out_max_amount_cents       largest single cash-out                    default R$ 100,000.00
--   cash_out_daily_limit_cents      sum per calendar day, America/Sao_Paulo     default R$ 1,000,000.00
--   cash_out_nighttime_limit_cents  sum per night, 20:00-06:00 America/Sao_Paulo; 0 = no cash-out
--                                   at night                                   default R$ 20,000.00
ALTER TABLE accounts
  ADD COLUMN cash_out_max_amount_cents bigint NOT NULL DEFAULT 10000000
    CONSTRAINT accounts_cash_out_max_amount_non_negative CHECK (cash_out_max_amount_cents >= 0),
  ADD COLUMN cash_out_daily_limit_cents bigint NOT NULL DEFAULT 100000000
    CONSTRAINT accounts_cash_out_daily_limit_non_negative CHECK (cash_out_daily_limit_cents >= 0),
  ADD COLUMN cash_out_nighttime_limit_cents bigint NOT NULL DEFAULT 2000000
    CONSTRAINT accounts_cash_out_nighttime_limit_non_negative CHECK (cash_out_nighttime_limit_cents >= 0);

-- What an account has sent in the current day and night windows (base units), kept under the
-- account lock so a limit check is one row read, however many cash-outs the account makes.
-- A reservation adds to the windows it was counted in; a rejection or failure takes it back.
CREATE TABLE cash_out_usage (
  account_id    bigint NOT NULL REFERENCES accounts (id),
  window_kind   text NOT NULL CHECK (window_kind IN ('day', 'night')),
  window_start  timestamptz NOT NULL,
  amount        bigint NOT NULL DEFAULT 0 CHECK (amount >= 0),
  PRIMARY KEY (account_id, window_kind, window_start)
);
CREATE INDEX cash_out_usage_window_idx ON cash_out_usage (window_start);

-- Notifications of the rail already applied (inbox): the rail delivers at least once, and the
-- handler records the notification id in the same transaction as its effect, so a redelivery is a
-- no-op.
CREATE TABLE rail_inbox (
  notification_id  text PRIMARY KEY,
  kind             text NOT NULL,
  processed_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX rail_inbox_processed_idx ON rail_inbox (processed_at);

-- The simulated central bank (SPI): every payment and return it has seen, outbound (sent by this
-- institution) and inbound (sent to it). Work still to do (protection wait, settlement delay) is a
-- row with a due time, claimed with FOR UPDATE SKIP LOCKED, so it survives restarts and several
-- processes can run the simulator. Only src/rail/ reads these tables.
CREATE TABLE sim_payments (
  end_to_end_id           text PRIMARY KEY,
  kind                    text NOT NULL CHECK (kind IN ('payment', 'return')),
  direction               text NOT NULL CHECK (direction IN ('outbound', 'inbound')),
  transaction_id          text,
  original_end_to_end_id  text,
  amount                  bigint NOT NULL CHECK (amount > 0),
  returned_amount         bigint NOT NULL DEFAULT 0 CHECK (returned_amount >= 0),
  payer_name              text,
  payer_document          text,
  payer_ispb              text NOT NULL,
  payer_account_id        bigint,
  receiver_key            text,
  receiver_name           text,
  receiver_document       text,
  receiver_ispb           text NOT NULL,
  receiver_account_id     bigint,
  behavior                text NOT NULL DEFAULT 'settle' CHECK (behavior IN ('settle', 'reject', 'hold')),
  status                  text NOT NULL CHECK (status IN ('protection', 'in_flight', 'held', 'settled', 'rejected')),
  return_code             text,
  reason_code             text,
  description             text,
  txid                    text,
  due_at                  timestamptz,
  created_at              timestamptz NOT NULL,
  resolved_at             timestamptz,
  CONSTRAINT sim_payments_returned_le_amount CHECK (returned_amount <= amount)
);
CREATE INDEX sim_payments_due_idx ON sim_payments (due_at) WHERE status IN ('protection', 'in_flight');
CREATE UNIQUE INDEX sim_payments_transaction_idx ON sim_payments (transaction_id) WHERE transaction_id IS NOT NULL;
CREATE INDEX sim_payments_original_idx ON sim_payments (original_end_to_end_id) WHERE original_end_to_end_id IS NOT NULL;

-- Messages of the simulated central bank to this institution, waiting to be delivered to the
-- service (at least once, in order per subject). A delivered message is deleted.
CREATE TABLE sim_notifications (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  notification_id  text NOT NULL UNIQUE,
  subject          text NOT NULL,
  kind             text NOT NULL,
  payload          jsonb NOT NULL,
  created_at       timestamptz NOT NULL,
  attempts         integer NOT NULL DEFAULT 0,
  locked_until     timestamptz,
  last_error       text
);
CREATE INDEX sim_notifications_subject_idx ON sim_notifications (subject, id);

-- The statement's view of a record, kept by the database:
--   NULL        never listed (a cash-in charge until it is paid)
--   in_flight   outbound PIX not yet final (stage below 3): merged on page 1 of the statement
--   processing / settled / rejected / failed   what the `status` filter matches (spec table
--               "Statement status filter vs display")
ALTER TABLE transactions ADD COLUMN statement_status text GENERATED ALWAYS AS (
  CASE
    WHEN kind = 'charge' AND status <> 1 THEN NULL
    WHEN direction = 'outbound' AND type = 'pix' AND stage < 3 THEN 'in_flight'
    WHEN status = 2 OR payment_status IN ('processing', 'queued') THEN 'processing'
    WHEN payment_status = 'rejected' OR (payment_status IS NULL AND status = 3) THEN 'rejected'
    WHEN payment_status = 'failed' OR (payment_status IS NULL AND status = 4) THEN 'failed'
    WHEN payment_status IN ('settled', 'returned') OR (payment_status IS NULL AND status = 1) THEN 'settled'
    ELSE 'other'
  END
) STORED;

-- Page 1 of a statement or transaction list on an account with millions of rows reads the first
-- rows of one of these in order and stops.
CREATE INDEX transactions_listed_idx ON transactions (account_id, created_at DESC, id DESC)
  WHERE statement_status IS NOT NULL;
CREATE INDEX transactions_statement_status_idx ON transactions (account_id, statement_status, created_at DESC, id DESC);
CREATE INDEX transactions_listed_type_idx ON transactions (account_id, type, created_at DESC, id DESC)
  WHERE statement_status IS NOT NULL;
-- Orders accepted locally but not acknowledged by the rail (a crash between the two): the recovery
-- worker sends them again.
CREATE INDEX transactions_unsent_idx ON transactions (updated_at) WHERE stage = 1;
