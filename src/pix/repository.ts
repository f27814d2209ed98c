/**
 * The SQL of the PIX money movements, by statement family (issue 26): the statement records in
 * src/transactions/records.ts (the one writer of `transactions`), the cash-out limit windows, the
 * rail inbox, and the cash-out's batched statements — step 1's reads (reserveRead) and writes
 * (reserve), step 3 (sent) and the settlements of a delivery batch (settlement) — in src/pix/store/.
 * This module gathers them for the PIX code that uses several.
 */
export {
  claimSentUnsettled,
  claimUnsent,
  findByEndToEndId,
  findByExternalId,
  findById,
  findForMerchant,
  lockTransaction,
  markSent,
  oldestUnsent,
  refundTotals,
  updateState,
  windowColumns,
  windowsOf,
  type OwnedTransaction,
  type StateChange,
} from '../transactions/records.js';
export { accountWithHolder, type AccountWithHolder } from '../merchants/holders.js';
export * from './store/limitWindows.js';
export * from './store/railInbox.js';
export * from './store/reserveRead.js';
export * from './store/reserve.js';
export * from './store/sent.js';
export * from './store/settlement.js';
