-- Issue 27: the API Pix façade's due-date charges (`cobv`) and their batches (`lotecobv`).
--
-- pix_charges.due_terms: a charge whose amount depends on the payment date (a cobv's original
-- amount, rebate, discounts, fine, interest, due date and days after it, as src/apiPix/cobv/
-- amountDue.ts reads them). NULL for a fixed-amount charge. A payment matches such a charge when it
-- brings the amount due on its own date (Brasília); the charge's record then takes that amount.
ALTER TABLE pix_charges ADD COLUMN due_terms jsonb;

-- A batch of cobv requests (PUT /lotecobv/{id}); `id` is the receiver's.
CREATE TABLE api_pix_lotes_cobv (
  account_id  bigint NOT NULL REFERENCES accounts (id),
  id          bigint NOT NULL CHECK (id >= 0),
  descricao   text NOT NULL CHECK (length(descricao) <= 140),
  created_at  timestamptz NOT NULL,
  PRIMARY KEY (account_id, id)
);
CREATE INDEX api_pix_lotes_cobv_created ON api_pix_lotes_cobv (account_id, created_at, id);

-- Each request of a batch: the txid it names, its outcome (CRIADA / NEGADA; EM_PROCESSAMENTO while
-- it runs) and, when refused, the problem (RFC 7807 body) a PUT /cobv/{txid} would have answered.
CREATE TABLE api_pix_lote_cobv_items (
  account_id  bigint NOT NULL,
  lote_id     bigint NOT NULL,
  position    integer NOT NULL CHECK (position >= 0),
  txid        text NOT NULL CHECK (txid ~ '^[A-Za-z0-9]{26,35}$'),
  status      text NOT NULL CHECK (status IN ('EM_PROCESSAMENTO', 'CRIADA', 'NEGADA')),
  problema    jsonb,
  created_at  timestamptz,
  updated_at  timestamptz NOT NULL,
  PRIMARY KEY (account_id, lote_id, position),
  FOREIGN KEY (account_id, lote_id) REFERENCES api_pix_lotes_cobv (account_id, id),
  CONSTRAINT api_pix_lote_cobv_items_txid UNIQUE (account_id, txid),
  CONSTRAINT api_pix_lote_cobv_items_problem CHECK ((status = 'NEGADA') = (problema IS NOT NULL))
);

-- A due-date charge of the standard: the receiver's txid (unique per account, and not a cob's:
-- checked on creation), its revision, and the pixgate charge underneath (charge_id: pix_charges /
-- transactions carry the money, statement, events and MED; its due_terms say what it asks on each
-- day, its deadline is the end of the last payable day). A revision that changes what is paid opens
-- a new pixgate charge and cancels the previous one. `valor` keeps the standard's valor object as
-- the receiver sent it (normalised), `request` the other fields (devedor, solicitacaoPagador,
-- infoAdicionais), `revisions` each earlier revision's state (GET ?revisao=), `emv` the dynamic
-- BR Code at the location (null while none is linked). Status comes from the pixgate charge:
-- created ATIVA, paid CONCLUIDA, cancelled REMOVIDA_PELO_USUARIO_RECEBEDOR, expired REMOVIDA_PELO_PSP.
CREATE TABLE api_pix_cobvs (
  id               bigserial PRIMARY KEY,
  account_id       bigint NOT NULL REFERENCES accounts (id),
  txid             text NOT NULL CHECK (txid ~ '^[A-Za-z0-9]{26,35}$'),
  revisao          integer NOT NULL DEFAULT 0 CHECK (revisao >= 0),
  charge_id        uuid NOT NULL REFERENCES transactions (id),
  loc_id           bigint UNIQUE REFERENCES api_pix_locations (id),
  lote_id          bigint,
  chave            text NOT NULL,
  original_cents   bigint NOT NULL CHECK (original_cents > 0 AND original_cents <= 999999999999),
  due_date         date NOT NULL,
  days_after_due   integer NOT NULL CHECK (days_after_due BETWEEN 0 AND 3650),
  valor            jsonb NOT NULL,
  devedor_cpf      text CHECK (devedor_cpf ~ '^[0-9]{11}$'),
  devedor_cnpj     text CHECK (devedor_cnpj ~ '^[0-9A-Z]{12}[0-9]{2}$'),
  emv              text,
  request          jsonb NOT NULL DEFAULT '{}',
  revisions        jsonb NOT NULL DEFAULT '[]',
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  CONSTRAINT api_pix_cobvs_txid_per_account UNIQUE (account_id, txid),
  CONSTRAINT api_pix_cobvs_one_debtor_document CHECK ((devedor_cpf IS NULL) <> (devedor_cnpj IS NULL)),
  CONSTRAINT api_pix_cobvs_lote FOREIGN KEY (account_id, lote_id) REFERENCES api_pix_lotes_cobv (account_id, id)
);
CREATE INDEX api_pix_cobvs_account_created ON api_pix_cobvs (account_id, created_at, id);
CREATE UNIQUE INDEX api_pix_cobvs_charge ON api_pix_cobvs (charge_id);
