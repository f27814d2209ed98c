-- Every process caches what authentication reads (src/auth/credentialCache.ts) and must drop an
-- entry the moment what it was read from changes. These triggers send that change on the channel
-- `<schema>__auth_changed` (see notify() in src/db/db.ts) inside the transaction that makes it, so
-- it is delivered at COMMIT, never on rollback, and whatever writes the row (the operator API, a
-- migration, an operator's psql) invalidates the caches of every process.
--
-- Payloads: `key:<client_id>` (an API key changed or was deleted), `account:<id>` (an account's
-- status changed: the keys operating on it), `merchant:<id>` (a merchant's status changed: its
-- keys), `central:<id>` (a boleto central key changed).

CREATE FUNCTION auth_changed_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  payload text;
BEGIN
  IF TG_TABLE_NAME = 'api_keys' THEN
    payload := 'key:' || OLD.client_id;
  ELSIF TG_TABLE_NAME = 'accounts' THEN
    payload := 'account:' || OLD.id;
  ELSIF TG_TABLE_NAME = 'merchants' THEN
    payload := 'merchant:' || OLD.id;
  ELSE
    payload := 'central:' || OLD.id;
  END IF;
  PERFORM pg_notify(current_schema() || '__auth_changed', payload);
  RETURN NULL;
END
$$;

CREATE TRIGGER api_keys_auth_changed AFTER UPDATE OR DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION auth_changed_notify();

CREATE TRIGGER central_api_keys_auth_changed AFTER UPDATE OR DELETE ON central_api_keys
  FOR EACH ROW EXECUTE FUNCTION auth_changed_notify();

CREATE TRIGGER accounts_auth_changed_update AFTER UPDATE ON accounts
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.merchant_id IS DISTINCT FROM NEW.merchant_id)
  EXECUTE FUNCTION auth_changed_notify();
CREATE TRIGGER accounts_auth_changed_delete AFTER DELETE ON accounts
  FOR EACH ROW EXECUTE FUNCTION auth_changed_notify();

CREATE TRIGGER merchants_auth_changed_update AFTER UPDATE ON merchants
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
  EXECUTE FUNCTION auth_changed_notify();
CREATE TRIGGER merchants_auth_changed_delete AFTER DELETE ON merchants
  FOR EACH ROW EXECUTE FUNCTION auth_changed_notify();
