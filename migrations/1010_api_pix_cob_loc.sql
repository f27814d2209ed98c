-- Issue 27: the API Pix façade's charges (`cob`) and payload locations (`loc`).
--
-- A location is a URL this institution serves a charge's payload at (`<host>/qr/v2/<token>`); it
-- belongs to an account, is made for one kind of charge (`cob` or `cobv`) and is linked to at most
-- one charge at a time (api_pix_cobs.loc_id is unique).
CREATE TABLE api_pix_locations (
  id          bigserial PRIMARY KEY,
  account_id  bigint NOT NULL REFERENCES accounts (id),
  tipo_cob    text NOT NULL CHECK (tipo_cob IN ('cob', 'cobv')),
  token       text NOT NULL UNIQUE CHECK (token ~ '^[0-9a-f]{32}$'),
  created_at  timestamptz NOT NULL
);
CREATE INDEX api_pix_locations_account ON api_pix_locations (account_id, created_at);

-- A charge of the standard (`cob`): the receiver's txid (unique per account), its revision, and
-- the pixgate charge underneath (`charge_id`: pix_charges / transactions, which carry
-- the money, the statement, events and MED). A revision that changes what is paid (amount, key,
-- expiry) opens a new pixgate charge and cancels the previous one; `request` keeps what the
-- receiver sent as the standard's fields other than money (devedor, solicitacaoPagador,
-- infoAdicionais), `revisions` the state of each earlier revision (GET ?revisao=), `emv` the
-- dynamic BR Code pointing at the location (null while no location is linked). The status is the
-- pixgate charge's (created ATIVA, paid CONCLUIDA, cancelled REMOVIDA_PELO_USUARIO_RECEBEDOR,
-- expired REMOVIDA_PELO_PSP): one source of truth.
CREATE TABLE api_pix_cobs (
  id                   bigserial PRIMARY KEY,
  account_id           bigint NOT NULL REFERENCES accounts (id),
  txid                 text NOT NULL CHECK (txid ~ '^[A-Za-z0-9]{26,35}$'),
  revisao              integer NOT NULL DEFAULT 0 CHECK (revisao >= 0),
  charge_id            uuid NOT NULL REFERENCES transactions (id),
  loc_id               bigint UNIQUE REFERENCES api_pix_locations (id),
  chave                text NOT NULL,
  amount_cents         bigint NOT NULL CHECK (amount_cents > 0 AND amount_cents <= 999999999999),
  modalidade_alteracao smallint NOT NULL DEFAULT 0 CHECK (modalidade_alteracao IN (0, 1)),
  expiracao            integer NOT NULL CHECK (expiracao > 0),
  devedor_cpf          text,
  devedor_cnpj         text,
  emv                  text,
  request              jsonb NOT NULL DEFAULT '{}',
  revisions            jsonb NOT NULL DEFAULT '[]',
  created_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL,
  CONSTRAINT api_pix_cobs_txid_per_account UNIQUE (account_id, txid),
  CONSTRAINT api_pix_cobs_one_debtor_document CHECK (devedor_cpf IS NULL OR devedor_cnpj IS NULL)
);
CREATE INDEX api_pix_cobs_account_created ON api_pix_cobs (account_id, created_at, id);
CREATE UNIQUE INDEX api_pix_cobs_charge ON api_pix_cobs (charge_id);
