-- 0300 boleto central API: boletos, settlements, the clearing book, and the beneficiary account of
-- a central API key. Amounts of this API are bigint cents (the spec's amount_cents); ledger entries
-- stay in base units (1 cent = 100 base units).

-- The account credited when boletos registered with this key (and with this institution's ISPB as
-- beneficiary_ispb) are settled. NULL: the key's boletos are all of other institutions.
ALTER TABLE central_api_keys ADD COLUMN account_id bigint REFERENCES accounts (id);

-- Money of paid boletos waiting for settlement. A payment moves it from the central bank into this
-- book; a settlement moves it on to the beneficiary (a merchant account, or back out through the
-- central bank for beneficiaries of other institutions). Its balance is what is paid and unsettled.
INSERT INTO ledger_accounts (code, book, tracks_balance) VALUES ('institution:boleto_clearing', 'institution', false);

-- One settlement per beneficiary (ISPB and, for this institution, account) per trigger call.
CREATE TABLE boleto_settlements (
  id                     uuid PRIMARY KEY,
  seq                    bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  central_key_id         bigint NOT NULL REFERENCES central_api_keys (id),
  beneficiary_ispb       text NOT NULL CHECK (beneficiary_ispb ~ '^[0-9]{8}$'),
  account_id             bigint REFERENCES accounts (id),
  boleto_count           integer NOT NULL CHECK (boleto_count > 0),
  amount_cents           bigint NOT NULL CHECK (amount_cents > 0),
  -- The BOLSET statement record of the credit, when the beneficiary is one of our accounts.
  transaction_id         text UNIQUE REFERENCES transactions (transaction_id),
  ledger_transaction_id  bigint NOT NULL UNIQUE REFERENCES ledger_transactions (id),
  settled_at             timestamptz NOT NULL,
  CONSTRAINT boleto_settlements_credit CHECK ((account_id IS NULL) = (transaction_id IS NULL))
);
CREATE INDEX boleto_settlements_key_idx ON boleto_settlements (central_key_id, seq DESC);

--   registered  issued, awaiting payment; amount and due date may change; may be cancelled
--   paid        payment recorded, money in the clearing book
--   settled     paid and credited to the beneficiary (part of a settlement)
--   cancelled   withdrawn before payment (DELETE)
CREATE TABLE boletos (
  id                      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  central_key_id          bigint NOT NULL REFERENCES central_api_keys (id),
  nosso_numero            text NOT NULL CHECK (nosso_numero ~ '^[0-9]{1,17}$'),
  amount_cents            bigint NOT NULL CHECK (amount_cents BETWEEN 1 AND 9999999999),
  due_date                date NOT NULL,
  payer_document          text NOT NULL CHECK (payer_document ~ '^([0-9]{11}|[0-9]{14})$'),
  payer_name              text NOT NULL CHECK (length(payer_name) BETWEEN 1 AND 200),
  beneficiary_ispb        text NOT NULL CHECK (beneficiary_ispb ~ '^[0-9]{8}$'),
  beneficiary_name        text NOT NULL CHECK (length(beneficiary_name) BETWEEN 1 AND 200),
  beneficiary_account_id  bigint REFERENCES accounts (id),
  barcode                 text NOT NULL CHECK (barcode ~ '^[0-9]{44}$'),
  linha_digitavel         text NOT NULL CHECK (linha_digitavel ~ '^[0-9]{47}$'),
  status                  text NOT NULL DEFAULT 'registered' CHECK (status IN ('registered', 'paid', 'settled', 'cancelled')),
  paid_at                 timestamptz,
  cancelled_at            timestamptz,
  settlement_id           uuid REFERENCES boleto_settlements (id),
  settled_at              timestamptz,
  created_at              timestamptz NOT NULL,
  updated_at              timestamptz NOT NULL,
  CONSTRAINT boletos_paid_at CHECK ((status IN ('paid', 'settled')) = (paid_at IS NOT NULL)),
  CONSTRAINT boletos_settled CHECK ((status = 'settled') = (settlement_id IS NOT NULL AND settled_at IS NOT NULL)),
  CONSTRAINT boletos_cancelled_at CHECK ((status = 'cancelled') = (cancelled_at IS NOT NULL))
);
-- nosso_numero is unique per key as a number: the barcode carries it zero-padded to 17 digits, so
-- '123' and '0123' would print the same barcode.
CREATE UNIQUE INDEX boletos_key_nosso_numero_key ON boletos (central_key_id, lpad(nosso_numero, 17, '0'));
CREATE INDEX boletos_key_id_idx ON boletos (central_key_id, id DESC);
CREATE INDEX boletos_unsettled_idx ON boletos (central_key_id, id) WHERE status = 'paid';
CREATE INDEX boletos_settlement_idx ON boletos (settlement_id) WHERE settlement_id IS NOT NULL;

-- Each boleto payment and each settlement is posted to the ledger once, whatever the application
-- does: a second posting with the same reference fails.
CREATE UNIQUE INDEX ledger_transactions_boleto_once ON ledger_transactions (kind, reference)
  WHERE kind IN ('boleto_payment', 'boleto_settlement');
