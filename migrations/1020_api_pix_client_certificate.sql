-- Issue 27: mutual TLS of the API Pix façade. The SHA-256 (hex, of the DER) of the TLS client
-- certificate bound to an API key: its grants of API Pix tokens, and every call with those tokens,
-- must come over a connection presenting that certificate. A column of api_keys, so that binding
-- or unbinding drops the key from every process's credential cache (migration 0610's trigger).
ALTER TABLE api_keys ADD COLUMN api_pix_cert_sha256 text CHECK (api_pix_cert_sha256 ~ '^[0-9a-f]{64}$');
