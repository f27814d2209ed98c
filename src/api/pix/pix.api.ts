import { z } from 'zod';
import { baseUnits, CashOutError, int, named, timestamp } from '../../http/apiSchemas.js';
import { defineRoutes } from '../../http/routeSpec.js';
import { taxDocument } from '../../lib/documentSchema.js';
import { MAX_AMOUNT_CENTS } from '../../lib/money.js';
import { CHARGE } from '../../pix/cashin/charges.js';
import { CHARGE_STATUSES } from '../../pix/cashin/repository.js';
import { EXTERNAL_ID, EXTERNAL_ID_MESSAGE } from '../../pix/externalId.js';
import { PIX_KEY_TYPES } from '../../pix/keys.js';

/**
 * The PIX routes of the merchant API: cash-out, refund, the account's keys and charges (cash-in).
 * The cash-out and refund bodies are read by their own parsers (src/pix/cashOutCommand.ts,
 * src/pix/refundRequest.ts: several fields interact and each problem has its own answer); the
 * schemas below are the shape those parsers accept, and the contract test checks every accepted
 * request against them.
 */

/** external_id / tag: the rule of src/pix/externalId.ts (surrounding spaces are trimmed). */
const identifier = z.string().regex(new RegExp(`^\\s*${EXTERNAL_ID.source.slice(1, -1)}\\s*$`), EXTERNAL_ID_MESSAGE);
const centsIn = z.number().int().min(1).max(Math.floor(Number.MAX_SAFE_INTEGER / 100)).describe('Amount in cents');

export const cashOutBody = z
  .strictObject({
    amount: centsIn.nullish().describe('Amount in cents; optional with an `emv` that carries its amount'),
    pix_key: z.string().nullish().describe('The receiver’s PIX key (CPF, CNPJ, e-mail, +55 phone or EVP); or send `emv`'),
    pix_key_type: z.enum(PIX_KEY_TYPES).nullish().describe('Needed when an 11-digit key could be a CPF or a phone'),
    emv: z.string().nullish().describe('A static BR Code to pay instead of `pix_key`'),
    description: z.string().max(140).nullish(),
    external_id: identifier.nullish().describe('Your id of this payment: a repeat with the same payload answers the same order'),
  })
  .describe('Either `pix_key` (with `amount`) or `emv`');

const CashOutStatus = z.enum(['accepted', 'queued', 'settled', 'rejected', 'returned', 'failed']);
export const CashOutResponse = named(
  'CashOutResponse',
  z.object({
    worked: z.literal(true),
    final: z.boolean(),
    transaction_id: z.string(),
    end_to_end_id: z.string(),
    external_id: z.string().nullable(),
    amount: baseUnits,
    fee_amount: baseUnits,
    net_amount: baseUnits,
    status: CashOutStatus,
    detail: z.string(),
  }),
);

export const refundBody = z.strictObject({
  original_transaction_id: z.string().nullish().describe('The PIX received: its transaction_id, end-to-end id or id (first of the aliases sent wins)'),
  original_e2e_id: z.string().nullish(),
  originalTransactionId: z.string().nullish(),
  transaction_id: z.string().nullish(),
  end_to_end_id: z.string().nullish(),
  amount: centsIn.nullish().describe('Cents; the whole remaining amount when absent'),
  reason: z.string().max(35).nullish().describe('Return code (default MD06)'),
  return_code: z.string().max(35).nullish().describe('Alias of reason'),
  description: z.string().max(140).nullish(),
});

export const RefundResponse = named(
  'RefundResponse',
  z.object({
    worked: z.literal(true),
    transaction_id: z.string(),
    end_to_end_id: z.string(),
    original_transaction_id: z.string(),
    original_end_to_end_id: z.string().nullable(),
    amount: baseUnits,
    reason: z.string(),
    description: z.string(),
    status: z.enum(['accepted', 'settled']),
    detail: z.string(),
  }),
);

export const RefundRecord = named(
  'RefundRecord',
  z.object({
    worked: z.literal(true),
    id: z.string(),
    transaction_id: z.string(),
    end_to_end_id: z.string().nullable(),
    original_transaction_id: z.string(),
    original_end_to_end_id: z.string().nullable(),
    account_id: int,
    amount: baseUnits,
    original_amount: baseUnits,
    reason: z.string().nullable(),
    description: z.string().nullable(),
    created_at: timestamp.nullable(),
    status: z.enum(['accepted', 'settled', 'failed']),
    total_refunded: baseUnits,
    remaining_refundable: int,
    is_partial: z.boolean(),
    reason_code: z.string().nullable(),
    failure_reason: z.string().nullable(),
    infraction_id: z.string().nullable(),
    completed_at: timestamp.nullable(),
    updated_at: timestamp.nullable(),
  }),
);

const OwnKeys = named(
  'PixKeyList',
  z.object({
    worked: z.literal(true),
    data: z.array(z.object({ type: z.enum(PIX_KEY_TYPES), key: z.string(), status: z.enum(['active', 'inactive']), created_at: timestamp.nullable() })),
  }),
);

/** CPF or CNPJ (numeric or alphanumeric), with or without the usual punctuation; kept canonical. */
const document = taxDocument({ invalidMessage: 'must be a valid CPF (11 digits) or CNPJ (14 characters)' });

/** Optional fields accept null as "not sent". */
const optional = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);


// The rule applies to the trimmed value: the pattern allows the surrounding spaces trim() removes.
const trimmedIdentifier = identifier.transform((s) => s.trim());
export const cashInBody = z.strictObject({
  amount: z.number().int().min(1).max(Math.min(CHARGE.maxAmountCents, MAX_AMOUNT_CENTS)).describe('Amount in cents'),
  expires_in: optional(z.number().int().min(CHARGE.minExpiresInSeconds).max(CHARGE.maxExpiresInSeconds)).describe('Seconds (default 3600)'),
  payer_name: optional(z.string().trim().min(1).max(100)),
  payer_document: optional(document),
  description: optional(z.string().trim().max(140)),
  tag: optional(trimmedIdentifier),
  external_id: optional(trimmedIdentifier),
  pix_key: optional(z.string().trim().min(1).max(77)).describe('One of the account’s active keys (default: its first)'),
});

export const ChargeResponse = named(
  'Charge',
  z.object({
    worked: z.literal(true),
    id: z.string(),
    transaction_id: z.string(),
    txid: z.string(),
    status: z.enum(CHARGE_STATUSES),
    amount: baseUnits,
    description: z.string(),
    tag: z.string().nullable(),
    external_id: z.string().nullable(),
    pix_key: z.string(),
    pix_key_type: z.string(),
    payer_name: z.string().nullable(),
    payer_document: z.string().nullable(),
    emv: z.string().describe('The BR Code (copy-and-paste)'),
    qr_code_image: z.string().describe('PNG data URL of the QR code'),
    created_at: timestamp,
    expires_at: timestamp,
    paid_at: timestamp.nullable(),
    expired_at: timestamp.nullable(),
  }),
);

const refundError = { description: 'Refund refused (`worked: false` beside `errors`)' };

export const pixApi = defineRoutes({
  cashOut: {
    method: 'POST',
    path: '/pix/cash-out',
    operationId: 'cashOut',
    tag: 'PIX',
    summary: 'Send a PIX (by key or BR Code)',
    description:
      'Reserves amount plus fee and sends the payment to the central bank. 200 `accepted` (or final `settled`/`rejected`/`failed`), 202 `queued` by a protection rule. A repeat with the same `external_id` and payload answers the same order; a different payload is 409 `external_id_conflict`.',
    permission: 'transfer:write',
    signed: true,
    body: cashOutBody,
    bodyExample: { amount: 1500, pix_key: 'maria@example.com', description: 'Pedido 42', external_id: 'order-42' },
    responses: {
      200: { description: 'Accepted (or already final)', schema: CashOutResponse },
      202: { description: 'Queued by a protection rule; reprocessed automatically', schema: CashOutResponse },
      400: { description: 'Malformed body, insufficient balance, central bank timeout', schema: CashOutError },
      409: { description: 'external_id used with a different payload', schema: CashOutError },
      422: { description: 'Invalid amount, key or BR Code; destination not found; self or same-institution transfer; limits', schema: CashOutError },
    },
    errorShape: 'operation',
  },
  refund: {
    method: 'POST',
    path: '/pix/refund',
    operationId: 'refund',
    tag: 'PIX',
    summary: 'Return (part of) a PIX received',
    permission: 'payment:write',
    signed: true,
    body: refundBody,
    bodyExample: { original_transaction_id: 'PIXIN20260101120000abcdef', amount: 500, reason: 'MD06' },
    responses: {
      200: { description: 'Settled before the answer', schema: RefundResponse },
      202: { description: 'Accepted; the outcome follows as pix.refund.completed or pix.refund.failed', schema: RefundResponse },
      400: refundError,
      404: refundError,
      422: refundError,
    },
    errorShape: 'business_worked',
  },
  getRefund: {
    method: 'GET',
    path: '/pix/refund/:id',
    operationId: 'getRefund',
    tag: 'PIX',
    summary: 'A refund (voluntary or MED) by transaction_id, end-to-end id or id',
    permission: 'transfer:read',
    responses: { 200: { description: 'The refund', schema: RefundRecord }, 404: { description: 'Refund not found' } },
    errorShape: 'business_worked',
  },
  listKeys: {
    method: 'GET',
    path: '/pix/keys',
    operationId: 'listPixKeys',
    tag: 'PIX',
    summary: 'The PIX keys of the key’s account, oldest first',
    permission: 'pix:read',
    responses: { 200: { description: 'The keys', schema: OwnKeys } },
  },
  cashIn: {
    method: 'POST',
    path: '/pix/cash-in',
    operationId: 'createCharge',
    tag: 'PIX',
    summary: 'Create a charge: a BR Code and its QR image',
    description: 'A repeat with the same external_id and payload answers 200 with the same charge.',
    permission: 'pix:write',
    signed: true,
    body: cashInBody,
    bodyExample: { amount: 2500, expires_in: 3600, description: 'Pedido 42', external_id: 'order-42' },
    responses: {
      200: { description: 'The existing charge of this external_id', schema: ChargeResponse },
      201: { description: 'Created', schema: ChargeResponse },
      409: { description: 'external_id used with a different payload' },
      422: { description: 'pix_key is not an active key of the account, or the account has no active PIX key' },
    },
  },
  getCharge: {
    method: 'GET',
    path: '/pix/cash-in/:id',
    operationId: 'getCharge',
    tag: 'PIX',
    summary: 'A charge again (BR Code and QR image included), by id, transaction_id, txid or external_id',
    permission: 'pix:read',
    responses: { 200: { description: 'The charge', schema: ChargeResponse }, 400: { description: 'id is not 1 to 128 characters' }, 404: { description: 'charge not found' } },
  },
});
