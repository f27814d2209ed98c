-- 1200 API Pix (issue 27): the client-named returns of received Pix and the standard's webhooks.
-- Owned by src/apiPix/ (returns: pixReturns.ts; webhooks and their notices: pixWebhooks.ts,
-- pixNotices.ts). See docs/api-pix.md, "Received Pix, returns and webhooks".

-- A return requested through PUT /pix/{e2eid}/devolucao/{id}: the client's id of it, bound to the
-- pixgate refund record (kind 'refund') it became. The primary key makes the id unique per Pix
-- received, and it is written in the refund's own transaction, so a repeat finds it or nothing
-- moved. `fingerprint` is what the client asked (valor, natureza, descricao): the same id with
-- another request is refused.
CREATE TABLE api_pix_returns (
  original_id   uuid NOT NULL REFERENCES transactions (id),
  return_id     text NOT NULL CHECK (return_id ~ '^[a-zA-Z0-9]{1,35}$'),
  refund_id     uuid NOT NULL UNIQUE REFERENCES transactions (id),
  natureza      text NOT NULL CHECK (natureza IN ('ORIGINAL', 'RETIRADA')),
  fingerprint   text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (original_id, return_id)
);

-- A webhook of the standard (PUT /webhook/{chave}): one per PIX key of the receiver, riding on a
-- row of `webhooks` (the delivery engine's registration, url = {webhookUrl}/pix) that it owns.
CREATE TABLE api_pix_webhooks (
  id            uuid PRIMARY KEY,
  merchant_id   bigint NOT NULL REFERENCES merchants (id),
  account_id    bigint NOT NULL REFERENCES accounts (id),
  chave         text NOT NULL CHECK (length(chave) BETWEEN 1 AND 77),
  webhook_url   text NOT NULL CHECK (length(webhook_url) BETWEEN 1 AND 2048),
  webhook_id    uuid NOT NULL REFERENCES webhooks (id),
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL,
  CONSTRAINT api_pix_webhooks_key UNIQUE (account_id, chave)
);
CREATE INDEX api_pix_webhooks_merchant_idx ON api_pix_webhooks (merchant_id, created_at);

-- Pix to notify: written in the transaction of the state change (a charge paid, a return final)
-- when the key has a webhook; taken in batches by the delivery engine's dispatcher, which turns
-- each batch into one delivery of {"pix": [...]}.
CREATE TABLE api_pix_webhook_notices (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  subscription_id  uuid NOT NULL REFERENCES api_pix_webhooks (id) ON DELETE CASCADE,
  end_to_end_id    text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_pix_webhook_notices_subscription_idx ON api_pix_webhook_notices (subscription_id, id);
