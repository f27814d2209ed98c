-- Two indexes no query reads, dropped (issue 12): each cost an entry per row written and per
-- update that is not HOT — seven index insertions per cash-out (a record inserted and updated
-- twice, two events inserted and marked dispatched).
--   transactions_account_created_idx (account_id, created_at DESC, id DESC): every list reads
--     transactions_listed_idx, transactions_statement_status_idx or transactions_listed_type_idx
--     (each query has a statement_status clause: src/transactions/repository.ts); look-ups by id,
--     external_id or tag have their own indexes. An account's rows are still found by an index
--     leading with account_id (statement status, external_id), as the foreign key needs.
--   outbox_events_subject_idx (subject, id): the subject-order checks of the webhook workers read
--     the partial outbox_events_undispatched_subject_idx; the feed reads outbox_events_merchant_feed_idx.
DROP INDEX transactions_account_created_idx;
DROP INDEX outbox_events_subject_idx;
