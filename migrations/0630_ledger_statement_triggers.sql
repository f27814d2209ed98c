-- The ledger's two triggers run once per statement instead of once per entry (issue 12).
--
-- Before: each entry ran an UPDATE of its book's running balance (AFTER INSERT FOR EACH ROW) and,
-- at commit, a sum over its ledger transaction (a deferred constraint trigger, FOR EACH ROW): a
-- batch of 13 cash-outs (26 entries) ran 52 trigger statements, and one hot book got 13 row
-- versions in a single statement. Now one trigger per INSERT statement, reading the statement's
-- entries from a transition table:
--   1. the entries the statement writes for each ledger transaction sum to zero. Each writer —
--      post(), the cash-out reserve and settlement batches — writes all the entries of a ledger
--      transaction in one statement, so this is the old rule checked sooner (no partial ledger
--      transaction is ever visible, not even inside a transaction), and it reads no other entry:
--      a look-up of ledger_entries per statement was planned, while the table was young, as a
--      merge over its whole index (16 ms per statement after 75,000 entries);
--   2. the merchant books the entries touch are locked in id order (the lock order of every money
--      movement), then each running balance moves once by the statement's net amount for it. The
--      CHECKs of ledger_accounts (balance >= 0, bounds) judge that result, as before.
DROP TRIGGER ledger_entries_apply ON ledger_entries;
DROP TRIGGER ledger_entries_balanced ON ledger_entries;
DROP FUNCTION ledger_apply_entry();
DROP FUNCTION ledger_check_balanced();

CREATE FUNCTION ledger_apply_entries() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  unbalanced record;
BEGIN
  SELECT n.ledger_transaction_id AS id, sum(n.amount) AS total INTO unbalanced
    FROM new_entries n
   GROUP BY n.ledger_transaction_id
  HAVING sum(n.amount) <> 0
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'ledger transaction % is unbalanced by %', unbalanced.id, unbalanced.total
      USING ERRCODE = '23514', CONSTRAINT = 'ledger_transaction_balanced';
  END IF;
  PERFORM 1 FROM ledger_accounts
    WHERE id IN (SELECT n.ledger_account_id FROM new_entries n) AND tracks_balance
    ORDER BY id FOR NO KEY UPDATE;
  UPDATE ledger_accounts la SET balance = la.balance + d.delta
    FROM (SELECT n.ledger_account_id, sum(n.amount) AS delta FROM new_entries n GROUP BY n.ledger_account_id) d
   WHERE la.id = d.ledger_account_id AND la.tracks_balance AND d.delta <> 0;
  RETURN NULL;
END $$;

CREATE TRIGGER ledger_entries_apply AFTER INSERT ON ledger_entries
  REFERENCING NEW TABLE AS new_entries
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_apply_entries();
