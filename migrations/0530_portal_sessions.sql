-- Merchant portal sessions (src/portal/session.ts). The cookie carries a random token; only its
-- SHA-256 is stored. A session is bound to the API key it signed in with: every request re-checks
-- that key (active, not expired, IP whitelist, permissions), so revoking the key ends the session.
CREATE TABLE portal_sessions (
  token_hash   text PRIMARY KEY,
  client_id    text NOT NULL,
  csrf_token   text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  -- a one-time message for the next page (after a redirect)
  flash        text
);
CREATE INDEX portal_sessions_expires_idx ON portal_sessions (expires_at);
