-- 0850 typed state (issue 26, item 5): the keys of `transactions.metadata` that pixgate itself
-- writes and reads back to decide money or state become typed columns the database holds to
-- their rules; `metadata` keeps what the merchant (or the payer) supplied and display copies
-- (docs/decisions.md, "p5-typed-state"). Each key is copied to its column and removed from
-- `metadata`. The CHECKs are NOT VALID, as in 0510 and 0690: they bind every new or updated row
-- without scanning (and locking) a large table to migrate; every row this backfill writes meets them.

-- The limit windows a cash-out's reservation counted in (limits.ts: the day window always, the
-- night window at night), given back when the reservation is released.
ALTER TABLE transactions ADD COLUMN limit_day_start timestamptz;
ALTER TABLE transactions ADD COLUMN limit_night_start timestamptz;
-- The payer of a cash-out's payment order: the account's holder when it was ordered
-- (payer_document is the column inbound records already use for their payer).
ALTER TABLE transactions ADD COLUMN payer_name text;
-- A cash-out that failed on a rail timeout and may be reserved and sent again by a repeat.
ALTER TABLE transactions ADD COLUMN resumable boolean NOT NULL DEFAULT false;
-- When the rail held a cash-out for analysis (it is announced once).
ALTER TABLE transactions ADD COLUMN held_at timestamptz;
-- Why a record was rejected or failed: the rail's reason code and reason, or this institution's
-- own failure code and detail (provider_timeout; a TEF's refusal).
ALTER TABLE transactions ADD COLUMN reason_code text;
ALTER TABLE transactions ADD COLUMN reason text;
-- The return code a refund, MED refund or payout return carries on the rail.
ALTER TABLE transactions ADD COLUMN return_code text;
-- The infraction a MED refund returns money for.
ALTER TABLE transactions ADD COLUMN infraction_id uuid;

UPDATE transactions SET
  limit_day_start = (SELECT (w->>'start')::timestamptz FROM jsonb_array_elements(metadata->'limit_windows') w WHERE w->>'kind' = 'day' LIMIT 1),
  limit_night_start = (SELECT (w->>'start')::timestamptz FROM jsonb_array_elements(metadata->'limit_windows') w WHERE w->>'kind' = 'night' LIMIT 1),
  payer_name = metadata->'payer'->>'name',
  payer_document = metadata->'payer'->>'document',
  resumable = COALESCE((metadata->>'resumable')::boolean, false),
  held_at = (metadata->>'held_at')::timestamptz,
  reason_code = COALESCE(metadata->>'reason_code', metadata->>'failure_code'),
  reason = COALESCE(metadata->>'reason', metadata->>'failure_detail'),
  metadata = metadata - ARRAY['limit_windows', 'payer', 'resumable', 'held_at', 'reason_code', 'failure_code', 'reason', 'failure_detail']
 WHERE kind IN ('cash_out', 'tef_out') AND metadata ?| ARRAY['limit_windows', 'payer', 'resumable', 'held_at', 'reason_code', 'failure_code', 'reason', 'failure_detail'];
UPDATE transactions SET
  return_code = metadata->>'return_code',
  reason_code = metadata->>'reason_code',
  reason = metadata->>'reason',
  infraction_id = (metadata->>'infraction_id')::uuid,
  metadata = metadata - ARRAY['return_code', 'reason_code', 'reason', 'infraction_id']
 WHERE kind IN ('refund', 'med_refund', 'payout_return');

ALTER TABLE transactions ADD CONSTRAINT transactions_limit_windows CHECK (
  (limit_day_start IS NULL AND limit_night_start IS NULL) OR kind = 'cash_out'
) NOT VALID;
ALTER TABLE transactions ADD CONSTRAINT transactions_payer_name CHECK (
  CASE WHEN kind = 'cash_out' THEN payer_name IS NOT NULL AND payer_document IS NOT NULL ELSE payer_name IS NULL END
) NOT VALID;
ALTER TABLE transactions ADD CONSTRAINT transactions_resumable CHECK (
  NOT resumable OR (kind = 'cash_out' AND status = 4 AND reason_code = 'provider_timeout')
) NOT VALID;
ALTER TABLE transactions ADD CONSTRAINT transactions_held_at CHECK (held_at IS NULL OR kind = 'cash_out') NOT VALID;
ALTER TABLE transactions ADD CONSTRAINT transactions_reason CHECK (
  (reason_code IS NULL OR status IN (3, 4)) AND (reason IS NULL OR reason_code IS NOT NULL)
) NOT VALID;
ALTER TABLE transactions ADD CONSTRAINT transactions_return_code CHECK (
  (return_code IS NOT NULL) = (kind IN ('refund', 'med_refund', 'payout_return'))
) NOT VALID;
ALTER TABLE transactions ADD CONSTRAINT transactions_infraction_id CHECK (
  (infraction_id IS NOT NULL) = (kind = 'med_refund')
) NOT VALID;
