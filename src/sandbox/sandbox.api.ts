import { z } from 'zod';
import { baseUnits, int, named } from '../http/apiSchemas.js';
import { defineRoutes } from '../http/routeSpec.js';
import { cents } from '../http/validation.js';
import { taxDocument } from '../lib/documentSchema.js';
import { END_TO_END_ID } from '../lib/ids.js';
import { MedRecord } from '../api/med/med.api.js';
import { PIX_KEY_TYPES } from '../pix/keys.js';
import { INFRACTION_DECISIONS } from '../rail/rail.js';
import { TransactionRecord } from '../api/transactions/transactions.api.js';

/**
 * The rail simulator's controls (/api/sandbox, not served in production): the directory of other
 * institutions, decisions on payouts, returns by receivers, incoming PIX, BR Code payments and MED.
 */
const ispb = z.string().regex(/^\d{8}$/, 'must be 8 digits');
const document = taxDocument({ canonical: true });

export const dictKey = z.strictObject({
  key: z.string().min(1).max(77),
  type: z.enum(PIX_KEY_TYPES),
  name: z.string().trim().min(1).max(140),
  document,
  ispb,
  bank_name: z.string().trim().min(1).max(140).optional(),
  behavior: z.enum(['settle', 'reject', 'hold', 'timeout']).optional(),
  fraud_flagged: z.boolean().optional(),
});
export const transactionIdParam = z.strictObject({ transaction_id: z.string().min(1).max(64) });
export const returnBody = z.strictObject({ amount: cents.optional() }).optional();
export const inbound = z.strictObject({
  account_id: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  amount: cents,
  payer_name: z.string().trim().min(1).max(140).optional(),
  payer_document: document.optional(),
  payer_ispb: ispb.optional(),
  description: z.string().max(140).optional(),
});
export const pay = z.strictObject({
  emv: z.string().trim().min(1).max(512),
  amount: cents.optional(),
  payer_name: z.string().trim().min(1).max(140).optional(),
  payer_document: document.optional(),
  payer_ispb: ispb.optional(),
});
export const explain = z.strictObject({ emv: z.string().min(1).max(1024) });
const Finding = z.object({
  field: z.string().describe('EMV id path: `26.01`, `62.05`; `payload` for the whole'),
  severity: z.enum(['error', 'interop']).describe('`error`: refused by every reader, pixgate too; `interop`: pixgate reads it, banks are known to refuse it'),
  code: z.string(),
  message: z.string(),
});
const Explanation = named(
  'BrCodeExplanation',
  z.object({
    readable: z.boolean(),
    interoperable: z.boolean(),
    kind: z.enum(['static', 'dynamic']).nullable(),
    fields: z.array(z.object({ id: z.string(), length: int, value: z.string() })),
    findings: z.array(Finding),
  }),
);
export const report = z.strictObject({
  end_to_end_id: z.string().trim().regex(END_TO_END_ID, 'must be an end-to-end id (E + ISPB + date + 11 characters)'),
  reason: z.string().trim().min(1).max(140).optional(),
  amount: cents.optional(),
});
export const resolve = z.strictObject({ decision: z.enum(INFRACTION_DECISIONS) });

const ForeignKey = named(
  'SandboxDictKey',
  z.object({
    key: z.string(),
    type: z.enum(PIX_KEY_TYPES),
    name: z.string(),
    document: z.string(),
    ispb: z.string(),
    bank_name: z.string().nullable(),
    behavior: z.enum(['settle', 'reject', 'hold', 'timeout']),
    fraud_flagged: z.boolean(),
  }),
);
const payer = z.object({ name: z.string().nullable(), document: z.string().nullable(), ispb: z.string().nullable(), bank_name: z.string().nullable() });

const tag = 'Sandbox';
const payoutDecision = (decision: 'settle' | 'reject') =>
  ({
    method: 'POST',
    path: `/payouts/:transaction_id/${decision}`,
    operationId: `sandbox${decision === 'settle' ? 'Settle' : 'Reject'}Payout`,
    tag,
    summary: `The central bank ${decision === 'settle' ? 'settles' : 'rejects'} a held payout`,
    params: transactionIdParam,
    responses: {
      200: { description: 'The payout after the decision', schema: TransactionRecord },
      404: { description: 'No such payout at the central bank' },
      409: { description: 'The payout is not waiting for a decision' },
    },
  }) as const;

export const sandboxApi = defineRoutes({
  dictKey: {
    method: 'POST',
    path: '/dict/keys',
    operationId: 'sandboxRegisterDictKey',
    tag,
    summary: 'Register a key of another institution in the simulated directory, with how payments to it behave',
    body: dictKey,
    bodyExample: { key: 'maria@example.com', type: 'email', name: 'Maria', document: '52998224725', ispb: '18236120' },
    responses: {
      200: { description: 'Updated', schema: ForeignKey },
      201: { description: 'Registered', schema: ForeignKey },
      409: { description: 'The key belongs to an account of this institution' },
    },
  },
  settle: payoutDecision('settle'),
  reject: payoutDecision('reject'),
  returnPayout: {
    method: 'POST',
    path: '/payouts/:transaction_id/return',
    operationId: 'sandboxReturnPayout',
    tag,
    summary: 'The receiver returns (part of) a settled payout',
    params: transactionIdParam,
    body: returnBody,
    bodyRequired: false,
    responses: {
      200: {
        description: 'The return was refused: by the central bank (amount above what remains), or by this institution (the account cannot take it)',
        schema: z.object({ returned: z.literal(false), end_to_end_id: z.string(), detail: z.string(), payout: TransactionRecord }),
      },
      201: {
        description: 'Returned',
        schema: z.object({ returned: z.literal(true), transaction_id: z.string().nullable(), end_to_end_id: z.string(), amount: baseUnits.nullable(), payout: TransactionRecord }),
      },
      404: { description: 'No such payout' },
      409: { description: 'The payout is not settled' },
    },
  },
  inbound: {
    method: 'POST',
    path: '/pix/inbound',
    operationId: 'sandboxInboundPix',
    tag,
    summary: 'Another bank’s customer sends a PIX to an account',
    body: inbound,
    bodyExample: { account_id: 1, amount: 5000, payer_name: 'Carlos' },
    responses: {
      201: { description: 'Credited', schema: z.object({ transaction_id: z.string(), end_to_end_id: z.string().nullable(), amount: baseUnits }) },
      422: { description: 'Refused back to the payer: the account cannot take the amount (`amount_too_large`, past its maximum balance); nothing credited' },
    },
  },
  explainBrCode: {
    method: 'POST',
    path: '/pix/brcode/explain',
    operationId: 'sandboxExplainBrCode',
    tag,
    summary: 'Why a BR Code would be refused, field by field (by pixgate, and by other banks’ readers)',
    body: explain,
    bodyExample: { emv: '00020126330014br.gov.bcb.pix0111529982247255204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***6304ABCD' },
    responses: {
      200: { description: 'The fields read and every finding; `readable` false when pixgate (and every bank) refuses it', schema: Explanation },
    },
  },
  pay: {
    method: 'POST',
    path: '/pix/pay',
    operationId: 'sandboxPayBrCode',
    tag,
    summary: 'A payer of another bank pays a BR Code (a charge’s, or any static one)',
    body: pay,
    responses: {
      201: {
        description: 'Paid',
        schema: z.object({
          transaction_id: z.string(),
          end_to_end_id: z.string(),
          amount: baseUnits,
          fee_amount: baseUnits,
          net_amount: int,
          txid: z.string().nullable(),
          charge: z.object({ transaction_id: z.string(), status: z.string() }).nullable(),
          payer,
        }),
      },
      404: { description: 'The BR Code’s key is not a key of this institution' },
      409: { description: 'The charge is paid or expired already' },
      422: { description: 'Invalid BR Code or amount; or refused back to the payer (`amount_too_large`): the account cannot take the amount, the charge stays open' },
    },
  },
  reportInfraction: {
    method: 'POST',
    path: '/infractions',
    operationId: 'sandboxReportInfraction',
    tag,
    summary: 'The payer’s bank reports a MED infraction against a PIX received',
    body: report,
    responses: {
      201: { description: 'The infraction, as the merchant sees it', schema: MedRecord },
      404: { description: 'No such PIX received' },
      409: { description: 'An infraction is open for it already' },
      422: { description: 'Amount above the PIX' },
    },
  },
  resolveInfraction: {
    method: 'POST',
    path: '/infractions/:id/resolve',
    operationId: 'sandboxResolveInfraction',
    tag,
    summary: 'The central bank’s final decision on an infraction',
    params: z.object({ id: z.string().describe('The infraction id (UUID)') }),
    body: resolve,
    responses: {
      200: { description: 'The infraction after the decision', schema: MedRecord },
      404: { description: 'Infraction not found' },
      409: { description: 'Already resolved' },
    },
  },
});
