-- The operator console (issue 29, docs/console.md): operators with their own accounts and their
-- browser sessions. Passwords are scrypt hashes (src/auth/passwords.ts); every operator has a TOTP
-- second factor, confirmed at the first sign-in (totp_enabled); the last accepted step is kept so a
-- code works once. Session ids are stored as their SHA-256, never as sent.
CREATE TABLE console_operators (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  username        text NOT NULL UNIQUE CHECK (username ~ '^[a-z0-9][a-z0-9._-]{1,39}$'),
  password_hash   text NOT NULL,
  role            text NOT NULL CHECK (role IN ('owner', 'operations', 'support', 'compliance')),
  totp_secret     text NOT NULL,
  totp_enabled    boolean NOT NULL DEFAULT false,
  totp_last_step  bigint,
  status          text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
  created_by      text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE console_sessions (
  token_hash   text PRIMARY KEY,
  operator_id  bigint NOT NULL REFERENCES console_operators (id) ON DELETE CASCADE,
  csrf_token   text NOT NULL,
  flash        text,
  created_at   timestamptz NOT NULL,
  expires_at   timestamptz NOT NULL
);
CREATE INDEX console_sessions_operator_idx ON console_sessions (operator_id);
CREATE INDEX console_sessions_expires_idx ON console_sessions (expires_at);

-- The audit page filters by operator and period.
CREATE INDEX admin_audit_log_actor_idx ON admin_audit_log (actor, id);
