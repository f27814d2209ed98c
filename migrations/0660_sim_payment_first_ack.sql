-- The simulated rail acknowledges a repeated payment order as it acknowledged it first.
--
-- A payment to a fraud-flagged key is queued by protection (ack "queued"), and a while later the
-- rail lets it go (status in_flight, notification payment.accepted). An order sent again under
-- the same end-to-end id (a recovery after a crash, a client's retry of a record still at stage 1)
-- was answered from the payment's status at that moment: "accepted" once protection was over.
-- pixgate then recorded processing directly and the payment.accepted notification that came after
-- found nothing to move: the payout never had its pix.payout.queued event. A real rail answers a
-- duplicate with the original acknowledgement (it is idempotent on the end-to-end id); the
-- simulator now keeps which one that was.
ALTER TABLE sim_payments ADD COLUMN queued_by_protection boolean NOT NULL DEFAULT false;
-- Payments in protection now were queued by it when taken; those it already let go cannot be told
-- apart any more and keep answering "accepted".
UPDATE sim_payments SET queued_by_protection = true WHERE status = 'protection';
