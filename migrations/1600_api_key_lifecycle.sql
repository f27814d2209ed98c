-- API keys managed by the merchant (issue 28, item 4; docs/portal.md "API keys and team members").
--
-- Rotation with a grace period: the new secret's digest replaces secret_hash and the old one moves
-- to previous_secret_hash until previous_secret_expires_at; authentication accepts either until
-- then (src/auth/credentials.ts), checked against the clock on every request, so the end of the
-- grace needs no notification. The UPDATE of a rotation or a revocation fires the auth_changed
-- trigger of migration 0610: every process drops its cached row at commit.
ALTER TABLE api_keys
  ADD COLUMN name text NOT NULL DEFAULT '' CHECK (length(name) <= 80),
  ADD COLUMN previous_secret_hash text CHECK (previous_secret_hash ~ '^[0-9a-f]{64}$'),
  ADD COLUMN previous_secret_expires_at timestamptz,
  ADD COLUMN rotated_at timestamptz,
  ADD CONSTRAINT api_keys_previous_secret_pair CHECK ((previous_secret_hash IS NULL) = (previous_secret_expires_at IS NULL));

-- Last use of a key, kept apart from api_keys so that recording it never fires the auth_changed
-- trigger (it would empty every process's credential cache). Written at most once a minute per key
-- (src/auth/keyUsage.ts; the ON CONFLICT ... WHERE of its upsert holds it across processes too).
CREATE TABLE api_key_usage (
  client_id     text PRIMARY KEY REFERENCES api_keys (client_id) ON DELETE CASCADE,
  last_used_at  timestamptz NOT NULL,
  last_used_ip  text NOT NULL CHECK (length(last_used_ip) <= 64)
);

-- The merchant's audit log: every change of its keys and team (who, from where, what), written in
-- the transaction of the change (src/auth/merchantAudit.ts). The operator's writes keep their own
-- log (admin_audit_log).
CREATE TABLE merchant_audit_log (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  merchant_id  bigint NOT NULL REFERENCES merchants (id),
  at           timestamptz NOT NULL,
  actor        text NOT NULL CHECK (length(actor) <= 200),
  client_ip    text,
  action       text NOT NULL CHECK (action ~ '^[a-z_.]+$'),
  target       jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX merchant_audit_log_merchant_idx ON merchant_audit_log (merchant_id, id DESC);

-- The sweep that ends graces (src/auth/keyLifecycle.ts endGraces) finds them here.
CREATE INDEX api_keys_grace_idx ON api_keys (previous_secret_expires_at) WHERE previous_secret_expires_at IS NOT NULL;
