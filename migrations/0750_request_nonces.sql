-- Signature-v2 nonces kept durably (issue 25): Redis (or process memory) answers the claim on the
-- fast path, and every nonce that passes it is also recorded here before the request goes on, so
-- a nonce accepted before a Redis failover, flush or replacement is still refused for other
-- content after it. A row lives as long as its nonce can be presented (expires_at: the claim's
-- time plus twice the 300-second timestamp tolerance); the retention worker deletes expired rows
-- by the expires_at index, and a claim may take an expired row over before that.
CREATE TABLE request_nonces (
  client_id text NOT NULL,
  nonce text NOT NULL CHECK (length(nonce) BETWEEN 16 AND 128),
  -- The verified v2 signature the nonce was claimed with: the same signature again is a
  -- byte-identical repeat (passed on to idempotency), another one a reuse (409).
  fingerprint text NOT NULL CHECK (fingerprint <> ''),
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (client_id, nonce)
);
CREATE INDEX request_nonces_expires_at ON request_nonces (expires_at);
