-- 0001 foundation: merchants, accounts, the double-entry ledger, API keys, statement records, outbox.
-- Runs unchanged on PGlite and on PostgreSQL 15+. Money columns are bigint base units
-- (1 cent = 100 base units). Objects are created unqualified, in the first schema of search_path.

CREATE TABLE merchants (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  document    text NOT NULL CHECK (document ~ '^([0-9]{11}|[0-9]{14})$'),
  status      text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive')),
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- A merchant's payment account (the spec's account_id). Fees are in cents, as operators set them.
CREATE TABLE accounts (
  id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  merchant_id         bigint NOT NULL REFERENCES merchants (id),
  status              text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive')),
  cash_out_fee_cents  bigint NOT NULL DEFAULT 0 CHECK (cash_out_fee_cents >= 0),
  cash_in_fee_cents   bigint NOT NULL DEFAULT 0 CHECK (cash_in_fee_cents >= 0),
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX accounts_merchant_idx ON accounts (merchant_id, id);

-- Ledger accounts ("books"). Each merchant account owns three books:
--   available  money the merchant can move
--   blocked    precautionary MED blocks
--   pending    reserved for outbound payments in flight (debited from available at acceptance)
-- and the institution owns books that may go negative (its side of every movement):
--   institution:central_bank  settlement account at the central bank (PIX in and out)
--   institution:fees          fee revenue
--   institution:funding       operator deposits (capital put into merchant accounts)
-- Merchant books keep a running balance (row-locked, CHECKed >= 0). Institution books are touched by
-- every movement of every merchant, so they do not keep one (that row would serialize the whole
-- system): their balance is the sum of their entries (view ledger_balances).
CREATE TABLE ledger_accounts (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  code            text NOT NULL UNIQUE,
  account_id      bigint REFERENCES accounts (id),
  book            text NOT NULL CHECK (book IN ('available', 'blocked', 'pending', 'institution')),
  tracks_balance  boolean NOT NULL,
  balance         bigint NOT NULL DEFAULT 0,
  CONSTRAINT ledger_accounts_owner_book_key UNIQUE (account_id, book),
  CONSTRAINT ledger_accounts_book_owner CHECK ((book = 'institution') = (account_id IS NULL)),
  CONSTRAINT ledger_accounts_tracking CHECK (tracks_balance = (book <> 'institution')),
  -- The database refuses a negative available (or blocked, or pending) balance.
  CONSTRAINT ledger_accounts_balance_non_negative CHECK (book = 'institution' OR balance >= 0)
);

INSERT INTO ledger_accounts (code, book, tracks_balance) VALUES
  ('institution:central_bank', 'institution', false),
  ('institution:fees', 'institution', false),
  ('institution:funding', 'institution', false);

CREATE TABLE ledger_transactions (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind         text NOT NULL,
  reference    text,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ledger_transactions_reference_idx ON ledger_transactions (reference);

CREATE TABLE ledger_entries (
  id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  ledger_transaction_id  bigint NOT NULL REFERENCES ledger_transactions (id),
  ledger_account_id      bigint NOT NULL REFERENCES ledger_accounts (id),
  amount                 bigint NOT NULL CHECK (amount <> 0),
  created_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ledger_entries_transaction_idx ON ledger_entries (ledger_transaction_id);
CREATE INDEX ledger_entries_account_idx ON ledger_entries (ledger_account_id, id);

-- Each entry moves its book's running balance (merchant books only; see above).
CREATE FUNCTION ledger_apply_entry() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE ledger_accounts SET balance = balance + NEW.amount
   WHERE id = NEW.ledger_account_id AND tracks_balance;
  RETURN NULL;
END $$;
CREATE TRIGGER ledger_entries_apply AFTER INSERT ON ledger_entries
  FOR EACH ROW EXECUTE FUNCTION ledger_apply_entry();

-- At commit, every ledger transaction that received entries must sum to zero.
CREATE FUNCTION ledger_check_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE total bigint;
BEGIN
  SELECT COALESCE(sum(amount), 0) INTO total FROM ledger_entries
   WHERE ledger_transaction_id = NEW.ledger_transaction_id;
  IF total <> 0 THEN
    RAISE EXCEPTION 'ledger transaction % is unbalanced by %', NEW.ledger_transaction_id, total
      USING ERRCODE = '23514', CONSTRAINT = 'ledger_transaction_balanced';
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER ledger_entries_balanced AFTER INSERT ON ledger_entries
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_check_balanced();

-- Entries are append-only: a correction is a new, reversing transaction.
CREATE FUNCTION ledger_entries_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger entries are append-only' USING ERRCODE = '55000';
END $$;
CREATE TRIGGER ledger_entries_no_update BEFORE UPDATE OR DELETE ON ledger_entries
  FOR EACH ROW EXECUTE FUNCTION ledger_entries_immutable();

CREATE VIEW ledger_balances AS
SELECT la.id AS ledger_account_id, la.code, la.account_id, la.book,
       CASE WHEN la.tracks_balance THEN la.balance
            ELSE COALESCE((SELECT sum(e.amount) FROM ledger_entries e WHERE e.ledger_account_id = la.id), 0)
       END::bigint AS balance
  FROM ledger_accounts la;

-- API keys of the external API. Only a SHA-256 digest of the secret is stored (see docs/decisions.md).
CREATE TABLE api_keys (
  client_id     text PRIMARY KEY CHECK (client_id ~ '^cli_[A-Za-z0-9]+$'),
  secret_hash   text NOT NULL CHECK (secret_hash ~ '^[0-9a-f]{64}$'),
  merchant_id   bigint NOT NULL REFERENCES merchants (id),
  account_id    bigint REFERENCES accounts (id),
  permissions   text[] NOT NULL,
  ip_whitelist  text[] NOT NULL,
  hmac_enabled  boolean NOT NULL DEFAULT true,
  active        boolean NOT NULL DEFAULT true,
  expires_at    timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  revoked_at    timestamptz
);
CREATE INDEX api_keys_merchant_idx ON api_keys (merchant_id);

-- Keys of the boleto central API (header X-API-Key); digest only, like api_keys.
CREATE TABLE central_api_keys (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  key_hash    text NOT NULL UNIQUE CHECK (key_hash ~ '^[0-9a-f]{64}$'),
  active      boolean NOT NULL DEFAULT true,
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- PIX keys of this institution's own accounts.
CREATE TABLE pix_keys (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id  bigint NOT NULL REFERENCES accounts (id),
  type        text NOT NULL CHECK (type IN ('cpf', 'cnpj', 'email', 'phone', 'evp')),
  key         text NOT NULL UNIQUE,
  status      text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive')),
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pix_keys_account_idx ON pix_keys (account_id, created_at);

-- The simulated central bank's key directory (DICT). Keys of this institution's accounts are
-- registered here too (ispb = INSTITUTION_ISPB, account_id set). Only the rail simulator reads it.
CREATE TABLE sim_dict_entries (
  key            text PRIMARY KEY,
  type           text NOT NULL CHECK (type IN ('cpf', 'cnpj', 'email', 'phone', 'evp')),
  name           text NOT NULL,
  document       text NOT NULL,
  ispb           text NOT NULL CHECK (ispb ~ '^[0-9]{8}$'),
  bank_name      text,
  account_id     bigint REFERENCES accounts (id),
  behavior       text NOT NULL DEFAULT 'settle' CHECK (behavior IN ('settle', 'reject', 'hold', 'timeout')),
  fraud_flagged  boolean NOT NULL DEFAULT false,
  created_at     timestamptz NOT NULL DEFAULT now()
);

-- Statement records: one row per money movement a merchant sees (PIX in and out, refunds,
-- returns, internal deposits). Amounts in base units.
--   status          internal status: 1 completed, 2 pending (in process), 3 rejected, 4 failed
--   payment_status  outbound payment status (processing, queued, settled, rejected, failed, returned);
--                   NULL for movements that are final when written (deposits, inbound PIX)
--   stage           outbound progress: 1 accepted, 2 sent to the rail, 3 final (the spec's "stage")
CREATE TABLE transactions (
  id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  transaction_id      text NOT NULL UNIQUE,
  account_id          bigint NOT NULL REFERENCES accounts (id),
  kind                text NOT NULL,
  type                text NOT NULL CHECK (type IN ('pix', 'ted', 'internal')),
  direction           text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
  status              smallint NOT NULL CHECK (status BETWEEN 1 AND 4),
  payment_status      text CHECK (payment_status IN ('processing', 'queued', 'settled', 'rejected', 'failed', 'returned')),
  stage               smallint NOT NULL DEFAULT 3 CHECK (stage BETWEEN 1 AND 3),
  end_to_end_id       text,
  external_id         text,
  tag                 text,
  amount              bigint NOT NULL CHECK (amount > 0),
  fee_amount          bigint NOT NULL DEFAULT 0 CHECK (fee_amount >= 0),
  description         text NOT NULL DEFAULT '',
  counterparty_name   text NOT NULL DEFAULT '',
  recipient_key       text,
  recipient_key_type  text,
  recipient_document  text,
  recipient_ispb      text,
  payer_document      text,
  payer_ispb          text,
  payer_bank_name     text,
  original_id         uuid REFERENCES transactions (id),
  request_fingerprint text,
  metadata            jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  completed_at        timestamptz,
  CONSTRAINT transactions_end_to_end_id_key UNIQUE (end_to_end_id),
  CONSTRAINT transactions_account_external_id_key UNIQUE (account_id, external_id)
);
CREATE INDEX transactions_account_created_idx ON transactions (account_id, created_at DESC, id DESC);
CREATE INDEX transactions_account_tag_idx ON transactions (account_id, tag) WHERE tag IS NOT NULL;
CREATE INDEX transactions_original_idx ON transactions (original_id) WHERE original_id IS NOT NULL;

-- Transactional outbox: every event is written in the same database transaction as the state
-- change that causes it; the webhook worker fans it out to deliveries.
CREATE TABLE outbox_events (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event_id     uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  event        text NOT NULL,
  merchant_id  bigint REFERENCES merchants (id),
  account_id   bigint REFERENCES accounts (id),
  subject      text NOT NULL,
  payload      jsonb NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  dispatched_at timestamptz
);
CREATE INDEX outbox_events_undispatched_idx ON outbox_events (id) WHERE dispatched_at IS NULL;
CREATE INDEX outbox_events_subject_idx ON outbox_events (subject, id);
