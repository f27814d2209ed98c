-- Issue 27: access tokens of the API Pix façade (/api/pix/v2), granted by POST /api/pix/oauth/token
-- to a pixgate API key (OAuth2 client credentials). Only the SHA-256 digest of a token is stored;
-- the token in clear exists in the grant's answer only. A token is worth nothing without its key:
-- every call reads the key again (through the credential cache, which migration 0610's triggers
-- invalidate in every process), so revoking or disabling the key ends its tokens at once.
-- `cert_sha256` is the client certificate the token was granted over (mutual TLS), when one was.
CREATE TABLE api_pix_tokens (
  token_hash  text PRIMARY KEY CHECK (token_hash ~ '^[0-9a-f]{64}$'),
  client_id   text NOT NULL REFERENCES api_keys (client_id) ON DELETE CASCADE,
  scopes      text[] NOT NULL,
  cert_sha256 text,
  issued_at   timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL,
  CHECK (expires_at > issued_at)
);
CREATE INDEX api_pix_tokens_client ON api_pix_tokens (client_id, expires_at);
