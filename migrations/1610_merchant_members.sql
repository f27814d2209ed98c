-- Team members of a merchant signing in to the portal with their own credentials (issue 28, item 4;
-- src/auth/members.ts). The password is stored as an scrypt hash (`scrypt$N$r$p$salt$hash`,
-- src/auth/passwords.ts), checked once per sign-in. The TOTP secret (base32) is kept as the
-- authenticator app has it: the server must compute codes from it. totp_last_step refuses a code
-- used once already (replay within its 30 s window).
CREATE TABLE merchant_members (
  id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  merchant_id        bigint NOT NULL REFERENCES merchants (id),
  email              text NOT NULL CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 254),
  name               text NOT NULL DEFAULT '' CHECK (length(name) <= 120),
  role               text NOT NULL CHECK (role IN ('owner', 'admin', 'finance', 'developer', 'support', 'viewer')),
  status             text NOT NULL DEFAULT 'invited' CHECK (status IN ('invited', 'active', 'removed')),
  password_hash      text CHECK (password_hash ~ '^scrypt\$'),
  totp_secret        text,
  totp_last_step     bigint,
  invite_token_hash  text UNIQUE CHECK (invite_token_hash ~ '^[0-9a-f]{64}$'),
  invite_expires_at  timestamptz,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  CHECK (status <> 'active' OR password_hash IS NOT NULL)
);
-- One person, one sign-in: an email is unique among members not removed (of any merchant).
CREATE UNIQUE INDEX merchant_members_email_idx ON merchant_members (email) WHERE status <> 'removed';
CREATE INDEX merchant_members_merchant_idx ON merchant_members (merchant_id);

-- The owner can require a second factor of every member.
ALTER TABLE merchants ADD COLUMN require_totp boolean NOT NULL DEFAULT false;

-- A portal session is an API key's (client_id) or a member's (member_id). mfa_pending: the password
-- passed, the second factor not yet (only the TOTP pages open). step_up_until: until when a
-- sensitive action needs no new TOTP code.
ALTER TABLE portal_sessions
  ALTER COLUMN client_id DROP NOT NULL,
  ADD COLUMN member_id bigint REFERENCES merchant_members (id) ON DELETE CASCADE,
  ADD COLUMN mfa_pending boolean NOT NULL DEFAULT false,
  ADD COLUMN step_up_until timestamptz,
  ADD CONSTRAINT portal_sessions_principal CHECK ((client_id IS NULL) <> (member_id IS NULL));
