import { z } from 'zod';
import { taxDocument } from '../lib/documentSchema.js';
import { UUID_V4 } from '../lib/ids.js';
import { isCalendarDate, MAX_AMOUNT_CENTS } from './barcode.js';
import { BOLETO_STATUSES } from './repository.js';

/** Request shapes of the boleto central API. Objects are strict: unknown fields are refused. */

/** Digits only, 1 to 17 (the barcode carries it zero-padded to 17 digits). */
export const nossoNumero = z.string().regex(/^\d{1,17}$/, 'must be 1 to 17 digits');

/** Integer cents, > 0, within the barcode's 10-digit amount field (R$ 99,999,999.99). */
const amountCents = z.number().int().min(1).max(MAX_AMOUNT_CENTS);

const dueDate = z.string().refine(isCalendarDate, 'must be a date in the format YYYY-MM-DD');

const name = z.string().trim().min(1).max(200);

const ispb = z.string().regex(/^\d{8}$/, 'must be 8 digits');

/** CPF or CNPJ (numeric or alphanumeric), with or without the usual punctuation; stored canonical. */
const document = taxDocument();

export const createBoleto = z.strictObject({
  boleto: z.strictObject({
    nosso_numero: nossoNumero,
    amount_cents: amountCents,
    due_date: dueDate,
    payer_document: document,
    payer_name: name,
    beneficiary_ispb: ispb,
    beneficiary_name: name,
  }),
});
export type CreateBoletoInput = z.output<typeof createBoleto>['boleto'];

/** What may change before payment: the amount and the due date. */
export const patchBoleto = z.strictObject({
  boleto: z
    .strictObject({ amount_cents: amountCents.optional(), due_date: dueDate.optional() })
    .refine((v) => v.amount_cents !== undefined || v.due_date !== undefined, 'must change amount_cents or due_date'),
});
export type PatchBoletoInput = z.output<typeof patchBoleto>['boleto'];

/** The body is optional; `amount_cents`, when sent, must equal the boleto's amount. */
export const payBoleto = z.strictObject({ amount_cents: amountCents.optional() }).optional();

/** The trigger takes no parameters; a body, if any, must be an empty object. */
export const triggerSettlement = z.strictObject({}).optional();

export const nossoNumeroParams = z.strictObject({ nosso_numero: nossoNumero });
export const settlementParams = z.strictObject({ id: z.string().regex(UUID_V4, 'must be a UUID') });

export const MAX_PAGE_SIZE = 100;
export const DEFAULT_PAGE_SIZE = 50;

const limit = z
  .string()
  .regex(/^\d+$/, 'must be an integer')
  .transform(Number)
  .pipe(z.number().int().min(1).max(MAX_PAGE_SIZE));

/** Opaque page cursor: base64url of the position after which the next page starts. */
export function encodeCursor(position: number): string {
  return Buffer.from(`p${position}`).toString('base64url');
}

const cursor = z
  .string()
  .max(64)
  .transform((s, ctx) => {
    const match = /^p([1-9]\d{0,15})$/.exec(Buffer.from(s, 'base64url').toString('utf8'));
    if (!match) {
      ctx.addIssue({ code: 'custom', message: 'is not a cursor returned by this API' });
      return z.NEVER;
    }
    return Number(match[1]);
  });

const nossoNumeroList = z
  .string()
  .transform((s) => s.split(',').map((part) => part.trim()).filter((part) => part !== ''))
  .pipe(z.array(nossoNumero).min(1).max(MAX_PAGE_SIZE));

export const listBoletosQuery = z.strictObject({
  nosso_numero: nossoNumeroList.optional(),
  status: z.enum(BOLETO_STATUSES).optional(),
  limit: limit.optional(),
  cursor: cursor.optional(),
});

export const listSettlementsQuery = z.strictObject({
  limit: limit.optional(),
  cursor: cursor.optional(),
});
