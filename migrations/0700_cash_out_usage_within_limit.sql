-- The database's own backstop of the cash-out limits (issue 24): no write may raise an account's
-- usage of a window (cash_out_usage, base units) above the account's limit for that window
-- (accounts.cash_out_daily_limit_cents / cash_out_nighttime_limit_cents, cents; 1 cent = 100 base
-- units). The checks of step 1 and of a TEF decide under the account's books lock; this trigger
-- makes a decision taken on stale figures fail its statement (SQLSTATE 23514, constraint
-- cash_out_usage_within_limit: nothing is written) instead of passing the limit. Only an increase
-- is judged: giving usage back (a rejection, a failure) always succeeds, even after an operator
-- lowered the limit below what the window had already sent.
CREATE FUNCTION cash_out_usage_within_limit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  limit_cents bigint;
BEGIN
  IF NEW.amount = 0 OR (TG_OP = 'UPDATE' AND NEW.amount <= OLD.amount) THEN
    RETURN NEW;
  END IF;
  SELECT CASE WHEN NEW.window_kind = 'night' THEN a.cash_out_nighttime_limit_cents ELSE a.cash_out_daily_limit_cents END
    INTO limit_cents FROM accounts a WHERE a.id = NEW.account_id;
  IF NEW.amount > limit_cents * 100 THEN
    RAISE EXCEPTION 'cash-out usage of account % in its % window from % would be % base units, above its limit of % cents',
      NEW.account_id, NEW.window_kind, NEW.window_start, NEW.amount, limit_cents
      USING ERRCODE = '23514', CONSTRAINT = 'cash_out_usage_within_limit';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER cash_out_usage_within_limit BEFORE INSERT OR UPDATE OF amount ON cash_out_usage
  FOR EACH ROW EXECUTE FUNCTION cash_out_usage_within_limit();
