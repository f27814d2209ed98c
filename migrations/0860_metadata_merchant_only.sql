-- 0860 (issue 26, item 5, after 0850): `transactions.metadata` keeps only what a merchant or a payer
-- supplied (a cash-out's `txid` and `emv`, an inbound PIX's `txid`). What pixgate itself wrote there
-- moves (docs/decisions.md, "r2-metadata"):
--   * to a typed column: `recipient_bank_name` (the receiver's bank as the directory named it),
--     `charge_unmatched_reason`, `counterpart_account_id` (TEF's `to_account_id`/`from_account_id`),
--     `pair_id` (a TEF credit's debit, was `tef_transaction_id`), `failed_at` (`rejected_at`/`failed_at`);
--   * nowhere, read through a join on what already holds it: `original_transaction_id` and
--     `original_end_to_end_id` (the row `original_id` points at), a boleto settlement's
--     `settlement_id`/`boleto_count` (boleto_settlements.transaction_id), a charge's `txid`
--     (pix_charges.transaction_uuid = transactions.id; pixgate generated it).
-- The CHECKs are NOT VALID as in 0510, 0690 and 0850: they bind new and updated rows without a scan.

ALTER TABLE transactions ADD COLUMN recipient_bank_name text;
ALTER TABLE transactions ADD COLUMN charge_unmatched_reason text;
ALTER TABLE transactions ADD COLUMN counterpart_account_id bigint REFERENCES accounts (id);
ALTER TABLE transactions ADD COLUMN pair_id uuid REFERENCES transactions (id);
ALTER TABLE transactions ADD COLUMN failed_at timestamptz;

UPDATE transactions SET recipient_bank_name = metadata->>'recipient_bank_name'
 WHERE direction = 'outbound' AND metadata ? 'recipient_bank_name';
UPDATE transactions SET charge_unmatched_reason = metadata->>'charge_unmatched_reason'
 WHERE kind = 'pix_in' AND metadata ? 'charge_unmatched_reason';
UPDATE transactions SET counterpart_account_id = (metadata->>'to_account_id')::bigint
 WHERE kind = 'tef_out' AND metadata ? 'to_account_id';
UPDATE transactions t SET counterpart_account_id = (t.metadata->>'from_account_id')::bigint,
       pair_id = (SELECT o.id FROM transactions o WHERE o.transaction_id = t.metadata->>'tef_transaction_id')
 WHERE t.kind = 'tef_in' AND t.metadata ?| ARRAY['from_account_id', 'tef_transaction_id'];
UPDATE transactions SET failed_at = COALESCE(metadata->>'rejected_at', metadata->>'failed_at')::timestamptz
 WHERE status IN (3, 4) AND metadata ?| ARRAY['rejected_at', 'failed_at'];

-- Keys removed: those copied above, and those another row holds. `original_*` only where
-- `original_id` names the original; a boleto settlement's keys only where its settlement row names
-- the record; a charge's txid only where its charge holds the same txid.
UPDATE transactions SET metadata = metadata - ARRAY['recipient_bank_name', 'charge_unmatched_reason', 'to_account_id', 'from_account_id', 'tef_transaction_id']
 WHERE (direction = 'outbound' AND metadata ? 'recipient_bank_name')
    OR (kind = 'pix_in' AND metadata ? 'charge_unmatched_reason')
    OR (kind = 'tef_out' AND metadata ? 'to_account_id')
    OR (kind = 'tef_in' AND metadata ?| ARRAY['from_account_id', 'tef_transaction_id']);
UPDATE transactions SET metadata = metadata - ARRAY['rejected_at', 'failed_at']
 WHERE status IN (3, 4) AND metadata ?| ARRAY['rejected_at', 'failed_at'];
UPDATE transactions SET metadata = metadata - ARRAY['original_transaction_id', 'original_end_to_end_id']
 WHERE original_id IS NOT NULL AND metadata ?| ARRAY['original_transaction_id', 'original_end_to_end_id'];
UPDATE transactions t SET metadata = t.metadata - ARRAY['settlement_id', 'boleto_count']
 WHERE t.kind = 'boleto_settlement' AND t.metadata ?| ARRAY['settlement_id', 'boleto_count']
   AND EXISTS (SELECT 1 FROM boleto_settlements s WHERE s.transaction_id = t.transaction_id);
UPDATE transactions t SET metadata = t.metadata - 'txid'
 WHERE t.kind = 'charge' AND t.metadata ? 'txid'
   AND EXISTS (SELECT 1 FROM pix_charges c WHERE c.transaction_uuid = t.id AND c.txid = t.metadata->>'txid');

ALTER TABLE transactions ADD CONSTRAINT transactions_recipient_bank_name CHECK (
  recipient_bank_name IS NULL OR direction = 'outbound'
) NOT VALID;
ALTER TABLE transactions ADD CONSTRAINT transactions_charge_unmatched_reason CHECK (
  charge_unmatched_reason IS NULL OR (kind = 'pix_in' AND charge_unmatched_reason IN
    ('no_txid', 'unknown_txid', 'other_account', 'expired', 'paid', 'cancelled', 'amount_mismatch'))
) NOT VALID;
ALTER TABLE transactions ADD CONSTRAINT transactions_counterpart_account_id CHECK (
  counterpart_account_id IS NULL OR (kind IN ('tef_out', 'tef_in') AND counterpart_account_id <> account_id)
) NOT VALID;
ALTER TABLE transactions ADD CONSTRAINT transactions_pair_id CHECK (
  (pair_id IS NOT NULL) = (kind = 'tef_in')
) NOT VALID;
ALTER TABLE transactions ADD CONSTRAINT transactions_failed_at CHECK (failed_at IS NULL OR status IN (3, 4)) NOT VALID;
