-- Issue 10: bounded money, idempotent operator deposits, the operator audit log.
--
-- Bounds (src/lib/money.ts): every amount of one operation is at most MAX_AMOUNT_CENTS (R$ 1 billion
-- = 10^13 base units); a merchant book holds at most MAX_BALANCE_BASE_UNITS (9 * 10^15, below 2^53,
-- so balances and their sums stay exact JavaScript numbers). A ledger entry may carry an amount plus
-- its fee or a settlement batch, so entries are bounded by the balance maximum. The constraints are
-- NOT VALID: they bind every new or updated row without refusing to migrate an older database.
ALTER TABLE ledger_accounts ADD CONSTRAINT ledger_accounts_balance_max
  CHECK (book = 'institution' OR balance <= 9000000000000000) NOT VALID;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_amount_max
  CHECK (amount BETWEEN -9000000000000000 AND 9000000000000000) NOT VALID;
ALTER TABLE transactions ADD CONSTRAINT transactions_amount_max
  CHECK (amount <= 10000000000000) NOT VALID;
ALTER TABLE transactions ADD CONSTRAINT transactions_fee_amount_max
  CHECK (fee_amount <= 10000000000000) NOT VALID;
ALTER TABLE med_infractions ADD CONSTRAINT med_infractions_amount_max
  CHECK (amount <= 10000000000000) NOT VALID;

-- Operator deposits: an Idempotency-Key is bound to the deposit it created, in the deposit's own
-- transaction, unique per account. A retry finds the row and answers the original deposit; the same
-- key with another body (fingerprint) is a 409. Kept as long as the deposit (never purged).
CREATE TABLE deposit_idempotency_keys (
  account_id       bigint NOT NULL REFERENCES accounts (id),
  idempotency_key  text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 256),
  fingerprint      text NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
  transaction_id   text NOT NULL UNIQUE REFERENCES transactions (transaction_id),
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, idempotency_key)
);

-- Every authenticated write of the operator (admin and sandbox APIs), written by one hook.
--   actor      who: for the static ADMIN_TOKEN, `admin-token:` + 12 hex of its SHA-256 (never the token)
--   client_ip  the caller's address (TRUSTED_PROXIES applied)
--   route      the matched route pattern (`/api/admin/accounts/:account_id/deposits`)
--   target     path parameters, plus the ids the answer created (merchant_id, transaction_id, …)
--   status     the HTTP status answered
CREATE TABLE admin_audit_log (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at          timestamptz NOT NULL,
  actor       text NOT NULL,
  client_ip   text NOT NULL,
  method      text NOT NULL,
  route       text NOT NULL,
  target      jsonb NOT NULL DEFAULT '{}'::jsonb,
  request_id  text NOT NULL,
  status      smallint NOT NULL CHECK (status BETWEEN 100 AND 599)
);
