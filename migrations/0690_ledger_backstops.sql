-- 0690 backstops of the ledger and the statement records (issue 24, items 6–8): what no code path
-- may write, the database refuses. Every state the code writes was listed from its writers
-- (docs/decisions.md, "Ledger backstops (issue 24)"). The CHECKs on `transactions` are NOT VALID,
-- as in 0510: they bind every new or updated row without scanning (and locking) a large table to
-- migrate; the unique indexes are built over what exists.

-- How much of a cash-out the receiver returned, a typed column instead of a key of `metadata`, so
-- the database can hold it to the payout: only a settled cash-out has returns, never beyond its
-- amount, and `returned` means returned in full. (The payout_return records remain the detail.)
ALTER TABLE transactions ADD COLUMN returned_amount bigint NOT NULL DEFAULT 0;
UPDATE transactions SET returned_amount = (metadata->>'returned_amount')::bigint
 WHERE kind = 'cash_out' AND metadata ? 'returned_amount';
ALTER TABLE transactions ADD CONSTRAINT transactions_returned_amount CHECK (
  returned_amount >= 0 AND returned_amount <= amount
  AND (returned_amount = 0 OR (kind = 'cash_out' AND payment_status IN ('settled', 'returned')))
  AND (payment_status IS DISTINCT FROM 'returned' OR returned_amount = amount)
) NOT VALID;

-- The kinds of statement record the code writes.
ALTER TABLE transactions ADD CONSTRAINT transactions_kind CHECK (kind IN (
  'cash_out', 'payout_return', 'refund', 'med_refund', 'pix_in', 'charge',
  'tef_out', 'tef_in', 'deposit', 'boleto_settlement'
)) NOT VALID;

-- status (1 completed, 2 pending, 3 rejected, 4 failed), payment_status and stage tell one story:
--   processing, queued   in flight: pending, below stage 3
--   settled, returned    completed, final
--   rejected             rejected, final
--   failed               failed, final
--   none                 final when written (deposits, PIX in, returns, boleto settlements), or a
--                        cash-in charge: pending until paid, failed once expired or cancelled
ALTER TABLE transactions ADD CONSTRAINT transactions_status_stage CHECK (
  CASE
    WHEN payment_status IN ('processing', 'queued') THEN status = 2 AND stage < 3
    WHEN payment_status IN ('settled', 'returned') THEN status = 1 AND stage = 3
    WHEN payment_status = 'rejected' THEN status = 3 AND stage = 3
    WHEN payment_status = 'failed' THEN status = 4 AND stage = 3
    ELSE stage = 3 AND (status <> 2 OR kind = 'charge')
  END
) NOT VALID;

-- Ledger kinds that happen once per business record (the reference): a settlement, a rejection's
-- release, a return, a refund's reservation, settlement or release, a PIX received, a deposit, a
-- transfer. A second posting of one of them fails (23505) whatever the code does. Not bound: MED
-- blocks and releases (several per infraction) and a cash-out's reservation and its release after
-- a timeout (a resumed order reserves again). Boleto kinds have their own index (0300). Cost: one
-- entry in this index per once-only posting — on the cash-out path only the settlement's
-- (cash_out_settle), not the reservation's.
CREATE UNIQUE INDEX ledger_transactions_once ON ledger_transactions (kind, reference) WHERE kind IN (
  'cash_out_settle', 'cash_out_reverse', 'payout_return', 'refund_reserve', 'refund_settle', 'refund_reverse',
  'med_refund_settle', 'med_refund_reverse', 'pix_in', 'deposit', 'tef'
);

-- An Idempotency-Key binds one record, and a record is bound by one key.
CREATE UNIQUE INDEX idempotency_keys_resource_id_key ON idempotency_keys (resource_id) WHERE resource_id IS NOT NULL;

-- Rail notifications this institution refused instead of applying (kept, unlike rail_inbox, which
-- retention purges): a payment or a return that cannot be credited — its payout did not settle,
-- it exceeds what the payout settled, or the account would pass its maximum balance. Nothing was
-- credited; the rail was answered with the reason, and a redelivery is answered the same.
CREATE TABLE rail_refusals (
  notification_id  text PRIMARY KEY,
  kind             text NOT NULL CHECK (kind IN ('inbound.payment', 'payment.returned')),
  end_to_end_id    text NOT NULL,
  account_id       bigint,
  amount           bigint NOT NULL CHECK (amount > 0),
  reason_code      text NOT NULL,
  reason           text NOT NULL,
  refused_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX rail_refusals_end_to_end_idx ON rail_refusals (end_to_end_id);
