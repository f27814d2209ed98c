-- Receipt authenticity (issue 28, src/transactions/receipts.ts): the server key under which a
-- receipt's (comprovante's) fields are signed with HMAC-SHA256; the shortened MAC is the receipt's
-- authenticity code, checked by the public verification page. Made at random on first use (one row
-- per key id; every process of the installation reads the same one). A new id rotates the key;
-- codes name the id they were made under.
CREATE TABLE receipt_keys (
  id          smallint PRIMARY KEY CHECK (id BETWEEN 1 AND 9),
  secret      bytea NOT NULL CHECK (length(secret) = 32),
  created_at  timestamptz NOT NULL DEFAULT now()
);
