-- A cash-out's record is written three times: inserted at stage 1, acknowledged by the rail
-- (stage 2), made final (stage 3). The acknowledgement changed `stage` and `updated_at`, both read
-- by the recovery's partial index (transactions_unsent_idx: updated_at WHERE stage = 1), so it was
-- never a heap-only update: each acknowledgement wrote a new entry in every index of the table
-- (six), with its WAL. Now no index reads a column the acknowledgement changes:
--   - the recovery finds the records left at stage 1 among the records in flight, through
--     transactions_in_flight_idx (statement_status = 'in_flight': outbound PIX below stage 3 —
--     the same at stage 1 and 2). Those are the orders the rail has not settled yet: a few
--     seconds' worth, which the recovery filters on stage and updated_at;
--   - a record at stage 1 is one in flight (transactions_stage_one_in_flight), so that index holds
--     every record the recovery must find;
--   - inserts leave 40% of a page free (fillfactor 60) for the acknowledged versions of its rows,
--     which arrive milliseconds after the insert (a record is ~600 bytes); pages written before
--     keep their layout. Measured in one bench run each (W=1, many accounts): fillfactor 100 /
--     75 / 60 made 0% / 48% / 80% of the acknowledgements heap-only, with heap bytes per record
--     1,625 / 1,562 / 1,451 (pruning within the page reclaims what VACUUM would) and index bytes
--     per record 858 / 822 / 753.
-- Stage 3 changes statement_status (indexed for the statement's filters): that update stays a
-- full one.
ALTER TABLE transactions ADD CONSTRAINT transactions_stage_one_in_flight CHECK (stage <> 1 OR statement_status = 'in_flight');
CREATE INDEX transactions_in_flight_idx ON transactions (created_at) WHERE statement_status = 'in_flight';
DROP INDEX transactions_unsent_idx;
ALTER TABLE transactions SET (fillfactor = 60);
