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

-- Every advance: from when (the database's now()) which offset held. Rows stamped by the database's
-- own now() (outbox_events.created_at, the partition key) are shown in simulated time by adding the
-- offset that held when they were written (the events feed), at no cost to the writes.
CREATE TABLE sandbox_clock_history (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  since timestamptz NOT NULL,
  offset_seconds bigint NOT NULL CHECK (offset_seconds > 0)
);
CREATE INDEX sandbox_clock_history_since ON sandbox_clock_history (since);

-- Business now(): the transaction's now() plus the sandbox offset (0 in production).
CREATE FUNCTION business_now() RETURNS timestamptz LANGUAGE sql STABLE AS $$
  SELECT now() + COALESCE((SELECT offset_seconds FROM sandbox_clock), 0) * interval '1 second'
$$;
