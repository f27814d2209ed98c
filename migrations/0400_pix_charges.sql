-- 0400 cash-in charges (POST /pix/cash-in). A charge is a statement record (`transactions` row with
-- kind 'charge', type 'pix', direction 'inbound', status 2 while open) plus this side table with
-- what only a charge has: its txid, BR Code, key, deadline and life cycle. Paying the charge (part 2)
-- turns the same `transactions` row into the completed inbound credit.
--
--   status     created -> paid | expired | cancelled (terminal)
--   txid       the BR Code's field 62-05, how an inbound payment names its charge; unique
--   expires_at the deadline: payable while now < expires_at; the expiry worker claims due rows
--   expired_at set to expires_at when the worker (or a late payment) expires the charge
CREATE TABLE pix_charges (
  transaction_uuid  uuid PRIMARY KEY REFERENCES transactions (id),
  account_id        bigint NOT NULL REFERENCES accounts (id),
  txid              text NOT NULL CHECK (txid ~ '^[A-Za-z0-9]{1,25}$'),
  pix_key           text NOT NULL,
  pix_key_type      text NOT NULL CHECK (pix_key_type IN ('cpf', 'cnpj', 'email', 'phone', 'evp')),
  brcode            text NOT NULL,
  status            text NOT NULL DEFAULT 'created' CHECK (status IN ('created', 'paid', 'expired', 'cancelled')),
  -- The payer the merchant expects, as given at creation (informational, not enforced).
  payer_name        text,
  payer_document    text CHECK (payer_document ~ '^([0-9]{11}|[0-9]{14})$'),
  expires_at        timestamptz NOT NULL,
  paid_at           timestamptz,
  expired_at        timestamptz,
  cancelled_at      timestamptz,
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL,
  CONSTRAINT pix_charges_txid_key UNIQUE (txid),
  CONSTRAINT pix_charges_deadline CHECK (expires_at > created_at),
  CONSTRAINT pix_charges_paid_at CHECK ((status = 'paid') = (paid_at IS NOT NULL)),
  CONSTRAINT pix_charges_expired_at CHECK ((status = 'expired') = (expired_at IS NOT NULL)),
  CONSTRAINT pix_charges_cancelled_at CHECK ((status = 'cancelled') = (cancelled_at IS NOT NULL))
);
-- The expiry worker's queue: open charges by deadline.
CREATE INDEX pix_charges_due_idx ON pix_charges (expires_at) WHERE status = 'created';
CREATE INDEX pix_charges_account_idx ON pix_charges (account_id, created_at);
