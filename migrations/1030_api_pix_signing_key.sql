-- Issue 27: the key that signs the API Pix payload locations' JWS (GET /qr/v2/<token>), one for the
-- whole installation so that every process signs with the key GET /api/pix/jwks.json publishes.
-- Made by the first process that needs it (INSERT … ON CONFLICT DO NOTHING, then read). It signs
-- what this institution publishes; it authenticates nobody (docs/api-pix.md, "Deviations").
CREATE TABLE api_pix_signing_key (
  id          smallint PRIMARY KEY CHECK (id = 1),
  kid         text NOT NULL,
  private_pem text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
