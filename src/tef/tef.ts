import { createHash } from 'node:crypto';
import type { PixDeps, TxDeps } from '../pix/deps.js';
import type { Sql } from '../db/db.js';
import { emitEvent } from '../events/outbox.js';
import { DomainError, type DomainErrorOptions, type ErrorCode } from '../errors/catalog.js';
import { readBody } from '../lib/bodyReader.js';
import { canonicalize } from '../lib/canonicalJson.js';
import { isoZ } from '../lib/clock.js';
import { newTransactionId } from '../lib/ids.js';
import { AmountTooLargeError, centsToBaseUnits, MAX_BALANCE_BASE_UNITS } from '../lib/money.js';
import { lockAccounts, post } from '../ledger/ledger.js';
import * as merchants from '../merchants/repository.js';
import { DESCRIPTION_MAX, resolveKey } from '../pix/cashOutCommand.js';
import { amountInCents, parseExternalId } from '../pix/externalId.js';
import { PIX_KEY_TYPES, type PixKeyType } from '../pix/keys.js';
import { limitProblem, limitWindows } from '../pix/limits.js';
import { accountWithHolder, type AccountWithHolder } from '../merchants/holders.js';
import { addUsage, usageIn } from '../pix/store/limitWindows.js';
import { findByExternalId, insertTransaction, TX_STATUS, type OwnedTransaction } from '../transactions/records.js';

/**
 * TEF: a transfer between two accounts of this institution (docs/tef.md), an extension of the
 * spec. Synchronous: one database transaction locks both accounts' books (id order), checks the
 * destination, the source's limits (the cash-out windows) and safe balance, and writes the balanced
 * ledger transaction, a statement row of type `internal` on each side and `tef.transfer.sent` /
 * `tef.transfer.received`. An inactive source is refused (nothing recorded). A transfer that passes
 * validation but cannot settle (destination inactive, safe balance short, destination unable to
 * hold the credit) is recorded as failed on the source with `tef.transfer.failed`.
 */

export const TEF_PREFIX = 'TEF';

/** The codes a TEF answers with (src/errors/catalog.ts; the OpenAPI document lists them). */
export const TEF_ERROR_CODES = [
  'bad_request',
  'invalid_amount',
  'unprocessable_entity',
  'pix_key_ambiguous',
  'destination_not_found',
  'same_account',
  'amount_limit_exceeded',
  'nighttime_limit_exceeded',
  'daily_limit_exceeded',
  'external_id_conflict',
  'account_inactive',
  'destination_inactive',
  'destination_cannot_receive',
  'insufficient_balance',
] as const satisfies readonly ErrorCode[];

/** TEF's own wording where it differs from the catalog's message (the cash-out's). */
const TEF_MESSAGES: Partial<Record<ErrorCode, string>> = {
  destination_not_found: 'Destination account not found in this institution',
  insufficient_balance: 'Balance below the amount; the transfer failed',
};

/** A TEF refusal: the catalog's code, with TEF's message where it has its own. */
function tefError(code: (typeof TEF_ERROR_CODES)[number], options: DomainErrorOptions = {}): DomainError {
  const message = TEF_MESSAGES[code];
  return new DomainError(code, message === undefined ? options : { message, ...options });
}

/** A TEF request, validated and normalized. */
export interface TefCommand {
  amountCents: number;
  /** Exactly one of the two: an account of the caller's merchant, or a PIX key of this institution. */
  toAccountId: number | null;
  pixKey: { key: string; keyType: PixKeyType } | null;
  description: string | null;
  externalId: string | null;
  fingerprint: string;
}

const FIELDS = new Set(['amount', 'account_id', 'pix_key', 'pix_key_type', 'description', 'external_id']);

/** Validates the body of POST /tef/transfers (unknown fields refused; the cash-out's rules for amount, key, description and external_id). */
export function parseTef(body: unknown): TefCommand {
  const r = readBody(body, FIELDS);
  const { add, present, str } = r;
  const b = r.body;
  const pixKeyRaw = str('pix_key');
  const keyTypeRaw = str('pix_key_type');
  const description = str('description');
  const externalRaw = str('external_id');
  let toAccountId: number | null = null;
  if (present('account_id')) {
    if (typeof b.account_id !== 'number' || !Number.isSafeInteger(b.account_id) || b.account_id <= 0) add('account_id', 'must be a positive integer');
    else toAccountId = b.account_id;
  }
  if (!present('account_id') && !present('pix_key')) add('account_id', 'or pix_key is required');
  if (present('account_id') && present('pix_key')) add('pix_key', 'must not be sent together with account_id');
  if (!present('amount')) add('amount', 'is required');
  if (keyTypeRaw !== null && !(PIX_KEY_TYPES as readonly string[]).includes(keyTypeRaw)) add('pix_key_type', `must be one of: ${PIX_KEY_TYPES.join(', ')}`);
  if (description !== null && [...description].length > DESCRIPTION_MAX) add('description', `is too long (maximum is ${DESCRIPTION_MAX} characters)`);
  const externalId = parseExternalId(externalRaw, add);
  r.check();
  const a = amountInCents(b.amount, (detail) => tefError('invalid_amount', { detail }));
  const pixKey = pixKeyRaw === null ? null : resolveKey(pixKeyRaw, keyTypeRaw as PixKeyType | null);
  const what = { amount: a, account_id: toAccountId, key: pixKey?.key ?? null, description };
  const fingerprint = createHash('sha256').update(canonicalize(JSON.stringify(what)), 'utf8').digest('hex');
  return { amountCents: a, toAccountId, pixKey, description, externalId, fingerprint };
}

export interface TefResponse {
  worked: boolean;
  final: true;
  transaction_id: string;
  external_id: string | null;
  amount: number;
  fee_amount: number;
  net_amount: number;
  status: 'settled' | 'failed';
  from_account_id: number;
  /** Null when the destination belongs to another merchant (named by its key). */
  to_account_id: number | null;
  recipient: { name: string; document: string; pix_key: string | null };
  description: string | null;
  created_at: string;
  completed_at: string | null;
  detail: string;
}

/** The failures that are recorded (a failed transfer on the source's statement, `tef.transfer.failed`). */
type RecordedFailure = 'destination_inactive' | 'destination_cannot_receive' | 'insufficient_balance';

export interface TefSource {
  merchantId: number;
  accountId: number;
}

/**
 * Records the answer of a transfer inside its transaction: the 200 answer of a settled transfer, or
 * the error of a recorded failure (an API Idempotency-Key keeps 2xx answers only; a portal form
 * keeps both).
 */
export type RecordTefAnswer = (tx: Sql, answer: { statusCode: number; body: TefResponse } | DomainError) => Promise<void>;

interface Destination {
  accountId: number;
  pixKey: string | null;
  sameMerchant: boolean;
}

/** The destination account of a command, or the TEF error that forbids it. */
async function resolveDestination(ctx: PixDeps, source: TefSource, cmd: TefCommand): Promise<Destination> {
  if (cmd.toAccountId !== null) {
    const account = await merchants.findAccount(ctx.db, cmd.toAccountId);
    // Other merchants' account ids are not disclosed: they are reached by their PIX keys.
    if (!account || account.merchant_id !== source.merchantId) {
      throw tefError('destination_not_found', { detail: `Account ${cmd.toAccountId} is not an account of yours; pay another merchant by one of its PIX keys` });
    }
    if (account.id === source.accountId) throw tefError('same_account', { detail: 'Source and destination are the same account' });
    return { accountId: account.id, pixKey: null, sameMerchant: true };
  }
  const key = cmd.pixKey!.key;
  const entry = await ctx.rail.directory.lookupKey(key);
  if (!entry || entry.accountId === null) {
    throw tefError('destination_not_found', {
      detail: entry ? `PIX key ${key} belongs to another institution; send a PIX with POST /pix/cash-out` : `PIX key ${key} is not registered in the directory`,
    });
  }
  if (entry.accountId === source.accountId) throw tefError('same_account', { detail: `PIX key ${key} belongs to the source account` });
  const account = await merchants.findAccount(ctx.db, entry.accountId);
  if (!account) throw tefError('destination_not_found', { detail: `PIX key ${key} has no account` });
  return { accountId: account.id, pixKey: key, sameMerchant: account.merchant_id === source.merchantId };
}

function answerOf(row: OwnedTransaction): TefResponse {
  const settled = row.status === TX_STATUS.completed;
  return {
    worked: settled,
    final: true,
    transaction_id: row.transaction_id,
    external_id: row.external_id,
    amount: row.amount,
    fee_amount: row.fee_amount,
    net_amount: row.amount + row.fee_amount,
    status: settled ? 'settled' : 'failed',
    from_account_id: row.account_id,
    to_account_id: row.counterpart_account_id,
    recipient: { name: row.counterparty_name, document: row.recipient_document ?? '', pix_key: row.recipient_key },
    description: row.description || null,
    created_at: isoZ(row.created_at)!,
    completed_at: isoZ(row.completed_at),
    detail: settled ? 'Transfer settled' : (row.reason ?? 'Transfer failed'),
  };
}

/** The error of a recorded failed transfer (with the record's ids). */
function failureOf(body: TefResponse, row: OwnedTransaction): DomainError {
  const code = (row.reason_code as RecordedFailure | null) ?? 'insufficient_balance';
  return tefError(code, { detail: body.detail, extra: { final: true, status: 'failed', transaction_id: body.transaction_id, external_id: body.external_id, amount: body.amount } });
}

/** The answer of a recorded transfer: 200 settled, or the failure with the record. */
function respond(row: OwnedTransaction): { statusCode: number; body: TefResponse } {
  const body = answerOf(row);
  if (body.status === 'settled') return { statusCode: 200, body };
  throw failureOf(body, row);
}

/**
 * The ledger's bounds refusing the credit (the check under the lock makes it unreachable): TEF's
 * code, never the ledger's message about the destination's balance. Nothing was written.
 */
function boundRefusal(err: unknown): never {
  if (err instanceof AmountTooLargeError) throw tefError('destination_cannot_receive', { detail: 'The destination account cannot receive this transfer; nothing was debited' });
  throw err;
}

function repeat(existing: OwnedTransaction, cmd: TefCommand) {
  if (existing.kind !== 'tef_out' || existing.request_fingerprint !== cmd.fingerprint) {
    throw tefError('external_id_conflict', { detail: `external_id ${cmd.externalId} belongs to ${existing.transaction_id}, sent with a different payload` });
  }
  return respond(existing);
}

/** The two accounts of a transfer as its transaction read them (books locked), with their merchants' state. */
interface Parties {
  from: AccountWithHolder;
  to: AccountWithHolder;
  merchantActive(id: number): boolean;
}

/**
 * Executes a TEF from `source`. Returns the 200 answer of a settled transfer; throws the TEF error
 * (a recorded failure included). A repeat with the same external_id answers the original.
 */
export async function transfer(ctx: PixDeps, source: TefSource, cmd: TefCommand, record: RecordTefAnswer): Promise<{ statusCode: number; body: TefResponse }> {
  let destination: Destination;
  try {
    destination = await resolveDestination(ctx, source, cmd);
  } catch (err) {
    const existing = cmd.externalId === null ? undefined : await findByExternalId(ctx.db, source.accountId, cmd.externalId);
    if (existing) return repeat(existing, cmd);
    throw err;
  }
  const result = await ctx.db
    .transaction(async (tx) => {
      const balances = await lockAccounts(tx, [source.accountId, destination.accountId]);
      if (cmd.externalId !== null) {
        const existing = await findByExternalId(tx, source.accountId, cmd.externalId);
        if (existing) return { existing };
      }
      const parties = await readParties(tx, source.accountId, destination.accountId);
      const { from, to } = parties;
      // Inactive accounts neither send nor receive. The API refuses an inactive source at
      // authentication; this covers the operator's route and a deactivation since then.
      if (from.status !== 'active' || !parties.merchantActive(from.merchant_id)) throw tefError('account_inactive');
      const now = ctx.clock.now();
      const amount = centsToBaseUnits(cmd.amountCents);
      const windows = await countInLimits(tx, from, amount, now);
      const failure = failureFor(parties, balances.get(from.id)!.safe, balances.get(to.id)!.available, amount);
      const sourceOwned = await insertSource(tx, ctx, cmd, destination, parties, amount, failure, now);
      if (failure) {
        // The window count is given back: a failed transfer moved nothing.
        await addUsage(tx, from.id, windows, -amount);
        await emitEvent(tx, { event: 'tef.transfer.failed', merchantId: from.merchant_id, accountId: from.id, subject: sourceOwned.transaction_id, payload: { ...sentBody(cmd, destination, parties, sourceOwned.transaction_id, amount, now), reason_code: failure.code, reason: failure.detail, failed_at: isoZ(now) } });
        await record(tx, failureOf(answerOf(sourceOwned), sourceOwned));
        return { failed: sourceOwned };
      }
      await settle(tx, ctx, cmd, destination, parties, sourceOwned, amount, now);
      const answer = respond(sourceOwned);
      await record(tx, answer);
      return { answer };
    })
    .catch(boundRefusal);
  if ('existing' in result) return repeat(result.existing!, cmd);
  if ('failed' in result) return respond(result.failed!);
  return result.answer;
}

async function readParties(tx: Sql, fromId: number, toId: number): Promise<Parties> {
  const from = await accountWithHolder(tx, fromId);
  const to = await accountWithHolder(tx, toId);
  const statuses = await tx.query<{ id: number; status: string }>('SELECT id, status FROM merchants WHERE id = ANY($1::bigint[])', [[from.merchant_id, to.merchant_id]]);
  return { from, to, merchantActive: (id) => statuses.some((m) => Number(m.id) === Number(id) && m.status === 'active') };
}

/**
 * Limits: a TEF counts in the source's cash-out windows (the same per-operation, nighttime and
 * daily limits); a refusal here records nothing. The usage is read first (the books are locked: it
 * is current) and counted only once the limits let it through — the database refuses a usage above
 * a limit (migration 0700). Returns the windows counted in.
 */
async function countInLimits(tx: Sql, from: AccountWithHolder, amount: number, now: Date) {
  const windows = limitWindows(now);
  const used = await usageIn(tx, from.id, windows);
  const problem = limitProblem(
    amount,
    { maxAmountCents: from.cash_out_max_amount_cents, dailyLimitCents: from.cash_out_daily_limit_cents, nighttimeLimitCents: from.cash_out_nighttime_limit_cents },
    windows,
    used,
  );
  if (problem) throw tefError(problem.code, { detail: problem.detail });
  await addUsage(tx, from.id, windows, amount);
  return windows;
}

/**
 * Why a transfer that passed validation cannot settle, or null. The destination's books are
 * locked: a credit that fits now still fits at the posting. Its refusal says nothing of the
 * destination's balance (another merchant's).
 */
function failureFor({ to, merchantActive }: Parties, safe: number, toAvailable: number, amount: number): { code: RecordedFailure; detail: string } | null {
  if (to.status !== 'active' || !merchantActive(to.merchant_id)) return { code: 'destination_inactive', detail: 'The destination account is not active; nothing was debited' };
  if (safe < amount) return { code: 'insufficient_balance', detail: `Available balance ${safe} is below the amount ${amount} (base units); nothing was debited` };
  if (toAvailable > MAX_BALANCE_BASE_UNITS - amount) return { code: 'destination_cannot_receive', detail: 'The destination account cannot receive this transfer; nothing was debited' };
  return null;
}

/** The source's record: settled, or failed with its code. */
async function insertSource(
  tx: Sql,
  ctx: TxDeps,
  cmd: TefCommand,
  destination: Destination,
  { from, to }: Parties,
  amount: number,
  failure: { code: RecordedFailure; detail: string } | null,
  now: Date,
): Promise<OwnedTransaction> {
  const row = await insertTransaction(tx, {
    ...common(cmd, amount, now),
    transaction_id: newTransactionId(TEF_PREFIX, now),
    account_id: from.id,
    kind: 'tef_out',
    direction: 'outbound',
    status: failure ? TX_STATUS.failed : TX_STATUS.completed,
    payment_status: failure ? 'failed' : 'settled',
    stage: 3,
    external_id: cmd.externalId,
    counterparty_name: to.holder_name,
    recipient_key: destination.pixKey,
    recipient_key_type: cmd.pixKey?.keyType ?? null,
    recipient_document: to.holder_document,
    recipient_ispb: ctx.config.institutionIspb,
    request_fingerprint: cmd.fingerprint,
    ...(failure ? { reason_code: failure.code, reason: failure.detail } : {}),
    counterpart_account_id: destination.sameMerchant ? to.id : null,
    completed_at: failure ? null : now,
  });
  return { ...row, merchant_id: from.merchant_id };
}

/** What both records of a transfer share. */
function common(cmd: TefCommand, amount: number, now: Date) {
  return { type: 'internal' as const, amount, fee_amount: 0, description: cmd.description ?? '', created_at: now };
}

/** The payload of tef.transfer.sent (and, with the reason, tef.transfer.failed). */
function sentBody(cmd: TefCommand, destination: Destination, { from, to }: Parties, transactionId: string, amount: number, now: Date) {
  return {
    transaction_id: transactionId,
    external_id: cmd.externalId,
    account_id: from.id,
    direction: 'debit',
    amount,
    fee_amount: 0,
    net_amount: amount,
    receiver: { name: to.holder_name, document: to.holder_document, pix_key: destination.pixKey, account_id: destination.sameMerchant ? to.id : null },
    description: cmd.description,
    created_at: isoZ(now),
  };
}

/** A settled transfer: the destination's record, the balanced posting and both events. */
async function settle(tx: Sql, ctx: TxDeps, cmd: TefCommand, destination: Destination, parties: Parties, source: Pick<OwnedTransaction, 'id' | 'transaction_id'>, amount: number, now: Date): Promise<void> {
  const { from, to } = parties;
  const transactionId = source.transaction_id;
  const destinationRow = await insertTransaction(tx, {
    ...common(cmd, amount, now),
    transaction_id: newTransactionId(TEF_PREFIX, now),
    account_id: to.id,
    kind: 'tef_in',
    direction: 'inbound',
    status: TX_STATUS.completed,
    payment_status: 'settled',
    stage: 3,
    counterparty_name: from.holder_name,
    payer_document: from.holder_document,
    payer_ispb: ctx.config.institutionIspb,
    payer_bank_name: ctx.institutionName,
    pair_id: source.id,
    counterpart_account_id: destination.sameMerchant ? from.id : null,
    completed_at: now,
  });
  // The ledger's credit primitive tops up the destination's short MED blocks (src/ledger).
  await post(tx, {
    kind: 'tef',
    reference: transactionId,
    now,
    postings: [
      { book: { accountId: from.id, book: 'available' }, amount: -amount },
      { book: { accountId: to.id, book: 'available' }, amount },
    ],
  });
  await emitEvent(tx, { event: 'tef.transfer.sent', merchantId: from.merchant_id, accountId: from.id, subject: transactionId, payload: { ...sentBody(cmd, destination, parties, transactionId, amount, now), completed_at: isoZ(now) } });
  await emitEvent(tx, {
    event: 'tef.transfer.received',
    merchantId: to.merchant_id,
    accountId: to.id,
    subject: destinationRow.transaction_id,
    payload: {
      transaction_id: destinationRow.transaction_id,
      tef_transaction_id: transactionId,
      account_id: to.id,
      direction: 'credit',
      amount,
      fee_amount: 0,
      net_amount: amount,
      payer: { name: from.holder_name, document: from.holder_document, account_id: destination.sameMerchant ? from.id : null },
      description: cmd.description,
      created_at: isoZ(now),
      completed_at: isoZ(now),
    },
  });
}
