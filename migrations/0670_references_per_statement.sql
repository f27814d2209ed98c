-- The references of ledger entries and outbox events are checked once per statement instead of by
-- foreign keys (issue 12).
--
-- A foreign key checks each inserted row on its own and locks the row it refers to (FOR KEY SHARE)
-- until the transaction ends: a cash-out's two to three ledger entries per movement and its two
-- events took about seven such locks — each a WAL record (Heap/LOCK: a third of the row locks a
-- cash-out wrote under the bench, 20.4 -> 13.3) and a per-row trigger — most of them on the same
-- few hot rows (the central bank's and the fees' books, the merchant's row and its account's),
-- which concurrent batches then share through multixacts.
--
-- The lock exists so that the referenced row cannot be deleted (or its key changed) before the
-- referencing row commits. Here such rows are never deleted and their ids never change — now
-- enforced below — so a check that sees the row is as good as the lock, and it is done once per
-- statement on the rows the statement wrote (a statement trigger over its transition table).
-- Refusals keep SQLSTATE 23503 (foreign_key_violation) and the old constraints' names.
ALTER TABLE ledger_entries
  DROP CONSTRAINT ledger_entries_ledger_transaction_id_fkey,
  DROP CONSTRAINT ledger_entries_ledger_account_id_fkey;
ALTER TABLE outbox_events
  DROP CONSTRAINT outbox_events_merchant_id_fkey,
  DROP CONSTRAINT outbox_events_account_id_fkey;

-- Rows that entries and events refer to stay, with their ids.
CREATE FUNCTION referenced_rows_stay() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    RAISE EXCEPTION '% ids never change: ledger entries and events refer to them', TG_TABLE_NAME USING ERRCODE = '23503';
  END IF;
  RAISE EXCEPTION '% rows are never deleted: ledger entries and events refer to them', TG_TABLE_NAME USING ERRCODE = '23503';
END $$;

CREATE TRIGGER ledger_accounts_stay BEFORE DELETE OR TRUNCATE ON ledger_accounts FOR EACH STATEMENT EXECUTE FUNCTION referenced_rows_stay();
CREATE TRIGGER ledger_transactions_stay BEFORE DELETE OR TRUNCATE ON ledger_transactions FOR EACH STATEMENT EXECUTE FUNCTION referenced_rows_stay();
CREATE TRIGGER merchants_stay BEFORE DELETE OR TRUNCATE ON merchants FOR EACH STATEMENT EXECUTE FUNCTION referenced_rows_stay();
CREATE TRIGGER accounts_stay BEFORE DELETE OR TRUNCATE ON accounts FOR EACH STATEMENT EXECUTE FUNCTION referenced_rows_stay();
-- Identity columns take no value but DEFAULT, which would give the row a new id.
CREATE TRIGGER ledger_accounts_id_stays BEFORE UPDATE OF id ON ledger_accounts FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION referenced_rows_stay();
CREATE TRIGGER ledger_transactions_id_stays BEFORE UPDATE OF id ON ledger_transactions FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION referenced_rows_stay();
CREATE TRIGGER merchants_id_stays BEFORE UPDATE OF id ON merchants FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION referenced_rows_stay();
CREATE TRIGGER accounts_id_stays BEFORE UPDATE OF id ON accounts FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION referenced_rows_stay();

-- The checks: a statement trigger beside the one each table has already (the ledger's running
-- balances, 0630; the outbox's queue, 0650), over the same transition table, and before it:
-- PostgreSQL fires a table's triggers of one event in name order, hence the 0 in the names (the
-- foreign keys' own triggers, RI_…, came first too). Each check is a scalar
-- subquery per row — one probe of the referenced primary key — which the planner cannot turn into
-- a scan of the whole ledger. Entries are append-only (0001), so inserts are the only writes to
-- check; an event's references cannot change (below).
CREATE FUNCTION ledger_entries_references() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  missing bigint;
BEGIN
  SELECT n.ledger_account_id INTO missing FROM new_entries n
   WHERE (SELECT 1 FROM ledger_accounts a WHERE a.id = n.ledger_account_id) IS NULL LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'ledger entry refers to ledger account %, which does not exist', missing
      USING ERRCODE = '23503', CONSTRAINT = 'ledger_entries_ledger_account_id_fkey';
  END IF;
  SELECT n.ledger_transaction_id INTO missing FROM new_entries n
   WHERE (SELECT 1 FROM ledger_transactions t WHERE t.id = n.ledger_transaction_id) IS NULL LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'ledger entry refers to ledger transaction %, which does not exist', missing
      USING ERRCODE = '23503', CONSTRAINT = 'ledger_entries_ledger_transaction_id_fkey';
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER ledger_entries_0_references AFTER INSERT ON ledger_entries
  REFERENCING NEW TABLE AS new_entries
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_entries_references();

CREATE FUNCTION outbox_events_references() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  missing bigint;
BEGIN
  SELECT n.merchant_id INTO missing FROM new_events n
   WHERE n.merchant_id IS NOT NULL AND (SELECT 1 FROM merchants m WHERE m.id = n.merchant_id) IS NULL LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'outbox event refers to merchant %, which does not exist', missing
      USING ERRCODE = '23503', CONSTRAINT = 'outbox_events_merchant_id_fkey';
  END IF;
  SELECT n.account_id INTO missing FROM new_events n
   WHERE n.account_id IS NOT NULL AND (SELECT 1 FROM accounts a WHERE a.id = n.account_id) IS NULL LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'outbox event refers to account %, which does not exist', missing
      USING ERRCODE = '23503', CONSTRAINT = 'outbox_events_account_id_fkey';
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER outbox_events_0_references AFTER INSERT ON outbox_events
  REFERENCING NEW TABLE AS new_events
  FOR EACH STATEMENT EXECUTE FUNCTION outbox_events_references();

-- An event's merchant and account are written once.
CREATE FUNCTION outbox_events_references_stay() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the references of an outbox event never change' USING ERRCODE = '23503';
END $$;
CREATE TRIGGER outbox_events_references_stay BEFORE UPDATE OF merchant_id, account_id ON outbox_events FOR EACH ROW
  WHEN (OLD.merchant_id IS DISTINCT FROM NEW.merchant_id OR OLD.account_id IS DISTINCT FROM NEW.account_id)
  EXECUTE FUNCTION outbox_events_references_stay();
