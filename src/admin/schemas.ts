import { z } from 'zod';
import { PERMISSIONS } from '../auth/permissions.js';
import { taxDocument } from '../lib/documentSchema.js';
import { badRequest } from '../http/errors.js';
import { cents, isoTimestamp } from '../http/validation.js';
import { queryInt } from '../http/listParams.js';
import { PIX_KEY_TYPES } from '../pix/keys.js';

const id = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

export const createMerchant = z.strictObject({
  name: z.string().trim().min(1).max(200),
  document: taxDocument({ canonical: true }),
});

/** Cash-out limits in cents: 0 (nothing allowed) up to R$ 10 billion. */
const limitCents = z.number().int().min(0).max(1_000_000_000_000);

export const patchAccount = z
  .strictObject({
    status: z.enum(['active', 'inactive']).optional(),
    cash_out_fee_cents: z.number().int().min(0).max(1_000_000_00).optional(),
    cash_in_fee_cents: z.number().int().min(0).max(1_000_000_00).optional(),
    cash_out_max_amount_cents: limitCents.optional(),
    cash_out_daily_limit_cents: limitCents.optional(),
    cash_out_nighttime_limit_cents: limitCents.optional(),
  })
  .refine((v) => Object.keys(v).length > 0, { message: 'must change at least one field', path: ['body'] });

export const deposit = z.strictObject({
  amount: cents,
  description: z.string().max(140).optional(),
});

/** The optional Idempotency-Key of a deposit: 1 to 256 printable ASCII characters. */
export function depositIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (typeof header !== 'string' || !/^[\x21-\x7e]{1,256}$/.test(header)) {
    throw badRequest({ 'Idempotency-Key': ['must be 1 to 256 printable ASCII characters without spaces'] });
  }
  return header;
}

const permissions = z.array(z.enum(PERMISSIONS)).max(PERMISSIONS.length);
// Entries are stored verbatim: the spec says malformed entries (spaces, leading zeros, wrong masks)
// are accepted and simply never match, answering the standard 403 at use.
const ipWhitelist = z.array(z.string().max(64)).max(100);

export const createApiKey = z.strictObject({
  merchant_id: id,
  account_id: id.nullable().optional(),
  permissions,
  ip_whitelist: ipWhitelist,
  expires_at: isoTimestamp.nullable().optional(),
  hmac: z.boolean().optional(),
});

export const patchApiKey = z
  .strictObject({
    permissions: permissions.optional(),
    ip_whitelist: ipWhitelist.optional(),
    expires_at: isoTimestamp.nullable().optional(),
    api_pix_certificate_sha256: z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, 'must be the SHA-256 of the certificate (DER), 64 hex digits')
      .transform((v) => v.toLowerCase())
      .nullable()
      .optional()
      .describe('API Pix mutual TLS: the client certificate bound to the key (null unbinds it); docs/api-pix.md'),
  })
  .refine((v) => Object.keys(v).length > 0, { message: 'must change at least one field', path: ['body'] });

export const createPixKey = z.strictObject({
  account_id: id,
  type: z.enum(PIX_KEY_TYPES),
  key: z.string().min(1).max(77).optional(),
});

export const createCentralKey = z.strictObject({
  name: z.string().trim().min(1).max(200),
  /** Beneficiary account of the key's own-institution boletos (docs/boleto-api.md). */
  account_id: id.nullable().optional(),
});

export const accountIdParam = z.strictObject({ account_id: z.string().regex(/^[1-9]\d{0,15}$/, 'must be a positive integer').transform(Number) });
export const clientIdParam = z.strictObject({ client_id: z.string().regex(/^cli_[A-Za-z0-9]{1,64}$/, 'is not a client id') });

export const auditLogQuery = z.strictObject({
  before: queryInt(1, Number.MAX_SAFE_INTEGER).optional(),
  limit: queryInt(1, 200).optional(),
});
