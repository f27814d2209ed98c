import type { Logger } from 'pino';
import type { BackgroundWorker } from '../../lib/worker.js';
import { sqlState, UNIQUE_VIOLATION, type Database, type Sql } from '../../db/db.js';
import { emitEvent } from '../../events/outbox.js';
import { requestHash } from '../../lib/idempotencyKey.js';
import { DomainError } from '../../errors/catalog.js';
import { encodeBrCode, sanitizeName } from '../../lib/brcode.js';
import { isoZ, runsInRealTime, type Clock } from '../../lib/clock.js';
import { CLOCK_CHANNEL } from '../../lib/sandboxClock.js';
import { brasiliaDate } from '../../lib/businessDays.js';
import { amountDue } from '../../apiPix/cobv/amountDue.js';
import { newTransactionId, randomAlnum, TX_PREFIX } from '../../lib/ids.js';
import { centsToBaseUnits } from '../../lib/money.js';
import { periodicWorker } from '../../lib/periodic.js';
import { wakeableWorker } from '../../lib/wakeable.js';
import { findMerchant } from '../../merchants/repository.js';
import { insertTransaction, TX_STATUS } from '../../transactions/records.js';
import { listOwnKeys, type PixKeyRow } from '../ownKeys.js';
import { normalizePixKey } from '../keys.js';
import { qrCodeDataUrl } from './qrImage.js';
import * as repo from './repository.js';
import type { ChargeRow } from './repository.js';

/**
 * Cash-in charges (POST /pix/cash-in): a fixed-amount BR Code with a unique txid on one of the
 * account's PIX keys, stored as a pending inbound statement record plus a `pix_charges` row, with
 * its deadline kept in the database so that expiry fires after a restart too.
 *
 *   created --(payment matching the txid, amount and account, before the deadline)--> paid
 *   created --(deadline passed; expiry worker)--> expired
 */
export const CHARGE = {
  kind: 'charge',
  defaultExpiresInSeconds: 3600,
  minExpiresInSeconds: 60,
  maxExpiresInSeconds: 30 * 24 * 3600,
  /** Field 54 of the BR Code holds at most 13 characters: 9999999999.99. */
  maxAmountCents: 999_999_999_999,
  txidLength: 25,
  /** Field 60 (merchant city, at most 15): merchants have no address in pixgate yet. */
  merchantCity: 'SAO PAULO',
  /** Field 59 when the merchant's name has no character a BR Code can carry. */
  fallbackMerchantName: 'PIXGATE',
  defaultDescription: 'Cobrança PIX',
  /** Sweep interval with a test clock (see chargeWorkers). */
  expirySweepMs: 1000,
  /** Longest sleep of the expiry worker; must stay below minExpiresInSeconds. */
  expirySafetyNetMs: 30_000,
  expiryBatch: 100,
} as const;

/** A validated POST /pix/cash-in command (amount in cents, strings trimmed, document digits). */
export interface ChargeCommand {
  amountCents: number;
  expiresInSeconds: number;
  payerName: string | undefined;
  payerDocument: string | undefined;
  description: string | undefined;
  tag: string | undefined;
  externalId: string | undefined;
  pixKey: string | undefined;
}

export interface ChargeOwner {
  merchantId: number;
  accountId: number;
}

export interface ChargeAnswer {
  statusCode: 200 | 201;
  body: ChargeBody;
}

/** Records the answer inside the creating transaction (the pipeline's `recordAnswer`). */
export type RecordAnswer = (tx: Sql, statusCode: number, body: unknown) => Promise<void>;

/**
 * Creates a charge, or — when `externalId` already names a charge created from the same command —
 * answers that charge as it is now (200). The same `externalId` on another command or on another
 * kind of movement is a 409.
 */
export async function createCharge(
  ctx: { db: Database; clock: Clock },
  owner: ChargeOwner,
  command: ChargeCommand,
  record: RecordAnswer,
): Promise<ChargeAnswer> {
  const fingerprint = commandFingerprint(command);
  for (let attempt = 0; ; attempt++) {
    if (command.externalId !== undefined) {
      const holder = await repo.findByExternalId(ctx.db, owner.accountId, command.externalId);
      if (holder) {
        if (!holder.charge || holder.request_fingerprint !== fingerprint) {
          throw new DomainError('conflict', { message: 'external_id was already used for a different request' });
        }
        return { statusCode: 200, body: chargeBody(holder.charge) };
      }
    }
    const key = await chooseKey(ctx.db, owner.accountId, command.pixKey);
    const merchant = (await findMerchant(ctx.db, owner.merchantId))!;
    const now = ctx.clock.now();
    const txid = randomAlnum(CHARGE.txidLength);
    const brcode = encodeBrCode({
      key: key.key,
      amountCents: command.amountCents,
      merchantName: sanitizeName(merchant.name, 25) || CHARGE.fallbackMerchantName,
      merchantCity: CHARGE.merchantCity,
      txid,
      singleUse: true, // field 01 = "12": one payment settles the charge
    });
    const qrImage = qrCodeDataUrl(brcode); // CPU only: before the transaction, not inside it
    try {
      return await ctx.db.transaction(async (tx) => {
        const charge = await writeCharge(tx, owner, command, { fingerprint, key, txid, brcode, now });
        await emitChargeEvent(tx, charge, 'created', { created_at: isoZ(charge.created_at) });
        const body = chargeBody(charge, qrImage);
        await record(tx, 201, body);
        return { statusCode: 201 as const, body };
      });
    } catch (err) {
      // A concurrent request inserted the same external_id first: answer from its row.
      if (sqlState(err) === UNIQUE_VIOLATION && command.externalId !== undefined && attempt === 0) continue;
      throw err;
    }
  }
}

/** A new charge's statement record (pending) and its `pix_charges` row, in the creating transaction. */
async function writeCharge(
  tx: Sql,
  owner: ChargeOwner,
  command: ChargeCommand,
  c: { fingerprint: string; key: PixKeyRow; txid: string; brcode: string; now: Date },
): Promise<ChargeRow> {
  const { fingerprint, key, txid, brcode, now } = c;
  const statement = await insertTransaction(tx, {
    transaction_id: newTransactionId(TX_PREFIX.charge, now),
    account_id: owner.accountId,
    kind: CHARGE.kind,
    type: 'pix',
    direction: 'inbound',
    status: TX_STATUS.pending,
    amount: centsToBaseUnits(command.amountCents),
    description: command.description || CHARGE.defaultDescription,
    tag: command.tag ?? null,
    external_id: command.externalId ?? null,
    request_fingerprint: fingerprint,
    created_at: now,
  });
  const charge: ChargeRow = {
    id: statement.id,
    transaction_id: statement.transaction_id,
    account_id: owner.accountId,
    merchant_id: owner.merchantId,
    amount: statement.amount,
    description: statement.description,
    tag: statement.tag,
    external_id: statement.external_id,
    request_fingerprint: fingerprint,
    txid,
    pix_key: key.key,
    pix_key_type: key.type,
    brcode,
    status: 'created',
    payer_name: command.payerName ?? null,
    payer_document: command.payerDocument ?? null,
    created_at: now,
    expires_at: new Date(now.getTime() + command.expiresInSeconds * 1000),
    paid_at: null,
    expired_at: null,
    cancelled_at: null,
    due_terms: null,
  };
  await repo.insertCharge(tx, {
    transactionUuid: charge.id,
    accountId: charge.account_id,
    txid,
    pixKey: charge.pix_key,
    pixKeyType: charge.pix_key_type,
    brcode,
    payerName: charge.payer_name,
    payerDocument: charge.payer_document,
    createdAt: now,
    expiresAt: charge.expires_at,
  });
  return charge;
}

/**
 * Opens a charge inside the caller's transaction, on a key the caller chose (the API Pix façade's
 * `cob`, src/apiPix/): the same statement record, `pix_charges` row, BR Code and
 * `pix.charge.created` event as POST /pix/cash-in, with a txid of pixgate's own.
 */
export async function openChargeInTx(tx: Sql, owner: ChargeOwner, command: ChargeCommand, key: PixKeyRow, merchantName: string, now: Date): Promise<ChargeRow> {
  const txid = randomAlnum(CHARGE.txidLength);
  const brcode = encodeBrCode({
    key: key.key,
    amountCents: command.amountCents,
    merchantName: sanitizeName(merchantName, 25) || CHARGE.fallbackMerchantName,
    merchantCity: CHARGE.merchantCity,
    txid,
    singleUse: true,
  });
  const charge = await writeCharge(tx, owner, command, { fingerprint: commandFingerprint(command), key, txid, brcode, now });
  await emitChargeEvent(tx, charge, 'created', { created_at: isoZ(charge.created_at) });
  return charge;
}

/** Cancels an open charge in the caller's transaction, with its `pix.charge.cancelled` event; false when it was not open. */
export async function cancelChargeInTx(tx: Sql, charge: ChargeRow, now: Date): Promise<boolean> {
  if (!(await repo.markCancelled(tx, charge.id, now))) return false;
  await emitChargeEvent(tx, charge, 'cancelled', { cancelled_at: isoZ(now) });
  return true;
}

/**
 * The key a charge is payable to: the requested one (it must be an active key of the account), or
 * else the account's oldest active random (EVP) key, or else its oldest active key. A random key is
 * preferred because a QR code is shown to strangers and an EVP reveals no e-mail, phone or document.
 */
async function chooseKey(db: Database, accountId: number, requested: string | undefined): Promise<PixKeyRow> {
  const active = (await listOwnKeys(db, accountId)).filter((k) => k.status === 'active');
  if (requested !== undefined) {
    const match = active.find((k) => normalizePixKey(k.type, requested) === k.key);
    if (!match) throw new DomainError('unprocessable_entity', { message: 'pix_key is not an active PIX key of this account' });
    return match;
  }
  const key = active.find((k) => k.type === 'evp') ?? active[0];
  if (!key) throw new DomainError('unprocessable_entity', { message: 'The account has no active PIX key; register one before creating charges' });
  return key;
}

/** What makes two cash-in commands "the same payload" for external_id idempotency. */
export function commandFingerprint(c: ChargeCommand): string {
  return requestHash(
    JSON.stringify([
      'pix.cash-in.v1',
      c.amountCents,
      c.expiresInSeconds,
      c.payerName ?? null,
      c.payerDocument ?? null,
      c.description || null, // absent, null and "" (blanks are trimmed to it) are one command
      c.tag ?? null,
      c.externalId ?? null,
      c.pixKey ?? null,
    ]),
  );
}

/** The answer of POST /pix/cash-in (documented in docs/cash-in.md). */
export interface ChargeBody {
  worked: true;
  id: string;
  transaction_id: string;
  txid: string;
  status: repo.ChargeStatus;
  amount: number;
  description: string;
  tag: string | null;
  external_id: string | null;
  pix_key: string;
  pix_key_type: string;
  payer_name: string | null;
  payer_document: string | null;
  emv: string;
  qr_code_image: string;
  created_at: string;
  expires_at: string;
  paid_at: string | null;
  expired_at: string | null;
}

export function chargeBody(c: ChargeRow, qrImage = qrCodeDataUrl(c.brcode)): ChargeBody {
  return {
    worked: true,
    id: c.id,
    transaction_id: c.transaction_id,
    txid: c.txid,
    status: c.status,
    amount: c.amount,
    description: c.description,
    tag: c.tag,
    external_id: c.external_id,
    pix_key: c.pix_key,
    pix_key_type: c.pix_key_type,
    payer_name: c.payer_name,
    payer_document: c.payer_document,
    emv: c.brcode,
    qr_code_image: qrImage,
    created_at: isoZ(c.created_at)!,
    expires_at: isoZ(c.expires_at)!,
    paid_at: isoZ(c.paid_at),
    expired_at: isoZ(c.expired_at),
  };
}

/**
 * Writes `pix.charge.<status>` about a charge in the caller's transaction (subject: its
 * transaction_id). Every such event carries `status`, `transaction_id`, `txid`, `amount` (base
 * units), `expires_at`, `tag` and `external_id`, plus `extra` (e.g. `expired_at`, or for `paid` the
 * payment's fields).
 */
export async function emitChargeEvent(tx: Sql, c: ChargeRow, status: repo.ChargeStatus, extra: Record<string, unknown>): Promise<void> {
  await emitEvent(tx, {
    event: `pix.charge.${status}`,
    merchantId: c.merchant_id,
    accountId: c.account_id,
    subject: c.transaction_id,
    payload: {
      status,
      transaction_id: c.transaction_id,
      txid: c.txid,
      amount: c.amount,
      expires_at: isoZ(c.expires_at),
      tag: c.tag,
      external_id: c.external_id,
      ...extra,
    },
  });
}

/**
 * Expires locked open charges (from `claimDueCharges` or `lockChargeByTxid`) in the caller's
 * transaction: status `expired`, statement record out of pending, one `pix.charge.expired` each.
 */
export async function expireCharges(tx: Sql, charges: readonly ChargeRow[], now: Date): Promise<number> {
  const changed = new Set(await repo.markExpired(tx, charges.map((c) => c.id), now));
  for (const c of charges) {
    if (!changed.has(c.id)) continue;
    await emitChargeEvent(tx, c, 'expired', { expired_at: isoZ(c.expires_at) });
  }
  return changed.size;
}

/** One sweep: expires every charge whose deadline has passed, in batches. Returns how many. */
export async function expireDueCharges(db: Database, clock: Clock, batch: number = CHARGE.expiryBatch): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await db.transaction(async (tx) => {
      const now = clock.now();
      return expireCharges(tx, await repo.claimDueCharges(tx, now, batch), now);
    });
    total += n;
    if (n < batch) return total;
  }
}

/**
 * Background work of cash-in: the expiry sweep. It sleeps until the earliest deadline of an open
 * charge (read once after each sweep), and reads again at least every CHARGE.expirySafetyNetMs: a
 * charge created meanwhile lives at least CHARGE.minExpiresInSeconds (60 s > 30 s), so it is seen
 * before its deadline without any notification. An advance of the sandbox clock wakes it (its
 * notification, src/lib/sandboxClock.ts). With a clock that does not run in real time (tests move
 * it by hand) a real-time sleep means nothing, so the sweep runs every CHARGE.expirySweepMs.
 */
export function chargeWorkers(ctx: { db: Database; clock: Clock; log: Logger }): BackgroundWorker[] {
  if (!runsInRealTime(ctx.clock)) return [periodicWorker('charge-expiry', CHARGE.expirySweepMs, ctx.log, () => expireDueCharges(ctx.db, ctx.clock))];
  return [
    wakeableWorker({ name: 'charge-expiry', log: ctx.log, safetyNetMs: CHARGE.expirySafetyNetMs, wakeOn: { db: ctx.db, channels: [CLOCK_CHANNEL] } }, async () => {
      const next = await repo.earliestOpenExpiry(ctx.db);
      if (next === null) return undefined;
      const inMs = next.getTime() - ctx.clock.now().getTime();
      if (inMs > 0) return inMs;
      // Some expired: read the next deadline at once. None: a due charge is locked by a payment in
      // progress (SKIP LOCKED); look again in a second.
      return (await expireDueCharges(ctx.db, ctx.clock)) > 0 ? 0 : CHARGE.expirySweepMs;
    }),
  ];
}

/** Why an inbound payment did not pay a charge. */
export type UnmatchedReason = 'no_txid' | 'unknown_txid' | 'other_account' | 'expired' | 'paid' | 'cancelled' | 'amount_mismatch';

export type ChargeMatch =
  | { matched: true; charge: ChargeRow }
  | { matched: false; reason: UnmatchedReason; charge: ChargeRow | null };

/**
 * Called by the inbound crediting (`receiveInboundPayment`): decides, inside the crediting transaction, whether an inbound PIX
 * pays a charge. The charge row stays locked until that transaction ends, so a payment and the
 * expiry worker never both win. A payment pays a charge when it carries the charge's txid (BR Code
 * field 62-05), arrives for the charge's account (the key it was sent to is the account's), before
 * the deadline (`at < expires_at`), for exactly the charge's amount (a due-date charge's: the amount
 * due on the payment's date in Brasília, src/apiPix/cobv/amountDue.ts), and the charge is still
 * `created`. Anything else is `matched: false` and is credited as a plain inbound PIX
 * (docs/cash-in.md, "Paying a charge").
 */
export async function matchInboundPayment(
  tx: Sql,
  payment: { accountId: number; txid: string | null; amount: number; at: Date },
): Promise<ChargeMatch> {
  if (payment.txid === null) return { matched: false, reason: 'no_txid', charge: null };
  const charge = await repo.lockChargeByTxid(tx, payment.txid);
  if (!charge) return { matched: false, reason: 'unknown_txid', charge: null };
  if (charge.account_id !== payment.accountId) return { matched: false, reason: 'other_account', charge: null };
  if (charge.status !== 'created') return { matched: false, reason: charge.status, charge };
  if (payment.at.getTime() >= charge.expires_at.getTime()) return { matched: false, reason: 'expired', charge };
  if (payment.amount !== expectedAmount(charge, payment.at)) return { matched: false, reason: 'amount_mismatch', charge };
  return { matched: true, charge };
}

/** What a payment at `at` must bring to pay `charge`, in base units (a due-date charge's depends on the day). */
export function expectedAmount(charge: ChargeRow, at: Date): number {
  if (charge.due_terms === null) return charge.amount;
  return centsToBaseUnits(amountDue(charge.due_terms.value, charge.due_terms.calendar, brasiliaDate(at)).finalCents);
}
