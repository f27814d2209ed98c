-- The sandbox clock (issue 28, docs/sandbox-clock.md): simulated time for the whole installation in
-- APP_ENV local and homologation. One row holds how far business time runs ahead of the real clock;
-- it only grows (POST /api/sandbox/clock/advance), and production refuses to start while it is not 0.
-- Every process reads it at start and follows it through the `sandbox_clock` notification, whose
-- payload is the new offset; SQL that compares business deadlines calls business_now(), which reads
-- the row in the statement's own snapshot, so all processes agree on it (docs/decisions.md).
CREATE TABLE sandbox_clock (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  offset_seconds bigint NOT NULL DEFAULT 0 CHECK (offset_seconds >= 0),
  updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO sandbox_clock DEFAULT VALUES;

-- Business now(): the transaction's now() plus the sandbox offset (0 in production).
CREATE FUNCTION business_now() RETURNS timestamptz LANGUAGE sql STABLE AS $$
  SELECT now() + COALESCE((SELECT offset_seconds FROM sandbox_clock), 0) * interval '1 second'
$$;
