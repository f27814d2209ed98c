-- The events not fanned out yet live in a queue of their own, and outbox_events is written once
-- (issue 12).
--
-- Before: an event waited with dispatched_at NULL, and the fan-out locked it (FOR UPDATE) and set
-- dispatched_at. An event row carries its whole delivery body (about a kilobyte): the lock and the
-- update wrote it to the WAL again with a new entry in each of its indexes (the update could not
-- be HOT: dispatched_at is in the predicates of the two partial indexes) — about 2.8 kB of WAL of
-- a cash-out's 14 kB, the largest share of any table. Now:
--   outbox_pending   one narrow row (id, subject) per event waiting for fan-out, written by the
--                    trigger below in the statement that writes the event (every writer, no way
--                    around it), deleted by the fan-out that claims it. An event is dispatched
--                    exactly when it has no row here.
-- No foreign key to outbox_events: its check would lock the event row just written (one more WAL
-- record per event); the trigger is the only writer and the purge of old events takes only
-- events without a pending row (src/retention/repository.ts).
CREATE TABLE outbox_pending (
  id      bigint PRIMARY KEY,
  subject text NOT NULL
);
-- The subject-order checks of the webhook workers (SUBJECT_HEAD in src/webhooks/repository.ts).
CREATE INDEX outbox_pending_subject_idx ON outbox_pending (subject, id);

INSERT INTO outbox_pending (id, subject) SELECT id, subject FROM outbox_events WHERE dispatched_at IS NULL;

CREATE FUNCTION outbox_events_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO outbox_pending (id, subject) SELECT n.id, n.subject FROM new_events n ORDER BY n.id;
  RETURN NULL;
END;
$$;

CREATE TRIGGER outbox_events_pending AFTER INSERT ON outbox_events
  REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION outbox_events_pending();

DROP INDEX outbox_events_undispatched_idx;
DROP INDEX outbox_events_undispatched_subject_idx;
ALTER TABLE outbox_events DROP COLUMN dispatched_at;
