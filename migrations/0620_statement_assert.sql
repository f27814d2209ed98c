-- A statement that must be all or nothing checks its own invariants with this: the cash-out
-- reserve (src/pix/repository.ts, reserveCashOutsIfUnchanged) runs as one autocommit statement, so
-- a broken invariant must abort the statement itself — nothing is committed — rather than be
-- found by the caller after COMMIT. SQLSTATE P0004 (assert_failure), with the message given.
CREATE FUNCTION statement_assert(ok boolean, message text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF ok IS NOT TRUE THEN
    RAISE EXCEPTION '%', message USING ERRCODE = 'P0004';
  END IF;
  RETURN true;
END $$;
