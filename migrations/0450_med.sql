-- 0450 MED (Mecanismo Especial de Devolução): infractions against PIX received by merchants, with
-- the precautionary block on the account's balance, the merchant's defense and the resolution
-- (refund executed from the blocked funds, or the block released). See docs/med.md.
--
--   status          OPEN -> defense_submitted -> CLOSED | CANCELLED (OPEN -> CLOSED | CANCELLED too).
--                   "open" = OPEN or defense_submitted: not resolved yet.
--   amount          refund the infraction claims (base units), at most what was left of the payment
--   blocked_amount  what is held in the account's `blocked` book for it now. Below `amount` while
--                   open when the available balance was short: every later credit to the account
--                   tops it up (oldest infraction first). After an accepted decision it holds the
--                   refund in flight until the return settles.
--   refunded_amount returned to the payer (settled MED return); released_amount given back to the
--                   merchant. blocked + refunded + released never exceed amount.
--   refund_status   requested (funds held, decision pending) -> processing (return in flight) ->
--                   settled | failed; or released (rejected, cancelled, or nothing was blocked)
CREATE TABLE med_infractions (
  id                    uuid PRIMARY KEY,            -- the rail's infraction id
  account_id            bigint NOT NULL REFERENCES accounts (id),
  original_id           uuid NOT NULL REFERENCES transactions (id),
  end_to_end_id         text NOT NULL,               -- of the original (inbound) PIX
  status                text NOT NULL DEFAULT 'OPEN' CHECK (status IN ('OPEN', 'defense_submitted', 'CLOSED', 'CANCELLED')),
  reason                text NOT NULL,
  amount                bigint NOT NULL CHECK (amount > 0),
  blocked_amount        bigint NOT NULL DEFAULT 0 CHECK (blocked_amount >= 0),
  refunded_amount       bigint NOT NULL DEFAULT 0 CHECK (refunded_amount >= 0),
  released_amount       bigint NOT NULL DEFAULT 0 CHECK (released_amount >= 0),
  refund_status         text NOT NULL DEFAULT 'requested' CHECK (refund_status IN ('requested', 'processing', 'settled', 'released', 'failed')),
  refund_id             uuid REFERENCES transactions (id),
  decision              text CHECK (decision IN ('accepted', 'rejected', 'cancelled')),
  defense_text          text,
  defense_attachments   jsonb,
  defense_submitted_at  timestamptz,
  defense_deadline      timestamptz NOT NULL,
  created_at            timestamptz NOT NULL,
  updated_at            timestamptz NOT NULL,
  resolved_at           timestamptz,
  CONSTRAINT med_infractions_amounts CHECK (blocked_amount + refunded_amount + released_amount <= amount),
  CONSTRAINT med_infractions_resolved CHECK ((status IN ('CLOSED', 'CANCELLED')) = (resolved_at IS NOT NULL)),
  CONSTRAINT med_infractions_decision CHECK ((decision IS NULL) = (resolved_at IS NULL)),
  CONSTRAINT med_infractions_cancelled CHECK ((status = 'CANCELLED') = (decision IS NOT DISTINCT FROM 'cancelled')),
  CONSTRAINT med_infractions_defense CHECK ((defense_submitted_at IS NULL) = (defense_text IS NULL)),
  CONSTRAINT med_infractions_defense_status CHECK (status <> 'defense_submitted' OR defense_submitted_at IS NOT NULL),
  CONSTRAINT med_infractions_open_refund CHECK (status NOT IN ('OPEN', 'defense_submitted') OR (refund_status = 'requested' AND refund_id IS NULL))
);
-- One open infraction per received PIX.
CREATE UNIQUE INDEX med_infractions_one_open_idx ON med_infractions (original_id) WHERE status IN ('OPEN', 'defense_submitted');
-- GET /med, newest first, with and without a status filter.
CREATE INDEX med_infractions_account_idx ON med_infractions (account_id, created_at DESC, id DESC);
CREATE INDEX med_infractions_account_status_idx ON med_infractions (account_id, status, created_at DESC, id DESC);
-- Open blocks still short of their amount: what a credit to the account tops up first. Empty for
-- nearly every account, so the check every credit makes is one probe of an empty index range.
CREATE INDEX med_infractions_short_idx ON med_infractions (account_id, created_at, id)
  WHERE status IN ('OPEN', 'defense_submitted') AND blocked_amount < amount;

-- The simulated central bank's infractions (DICT's MED): reported against an inbound payment it
-- settled, resolved by the sandbox. Only src/rail/ reads it.
CREATE TABLE sim_infractions (
  id             uuid PRIMARY KEY,
  end_to_end_id  text NOT NULL REFERENCES sim_payments (end_to_end_id),
  amount         bigint NOT NULL CHECK (amount > 0),
  reason         text NOT NULL,
  status         text NOT NULL CHECK (status IN ('OPEN', 'CLOSED', 'CANCELLED')),
  decision       text CHECK (decision IN ('accepted', 'rejected', 'cancelled')),
  created_at     timestamptz NOT NULL,
  resolved_at    timestamptz
);
CREATE UNIQUE INDEX sim_infractions_one_open_idx ON sim_infractions (end_to_end_id) WHERE status = 'OPEN';
