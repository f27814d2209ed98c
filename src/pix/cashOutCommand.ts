import { createHash } from 'node:crypto';
import { amountInCents, parseExternalId } from './externalId.js';
import { BrCodeError, decodeBrCode } from '../lib/brcode.js';
import { canonicalize } from '../lib/canonicalJson.js';
import { readBody } from '../lib/bodyReader.js';
import { DomainError, invalidFields } from '../errors/catalog.js';
import { brCodeKey, detectPixKeyType, normalizePixKey, PIX_KEY_TYPES, type PixKeyType } from './keys.js';

/** A cash-out request, validated and normalized. */
export interface CashOutCommand {
  amountCents: number;
  /** The receiver's key in the directory's canonical form, and its type. */
  key: string;
  keyType: PixKeyType;
  /** The BR Code paid, when the request sent `emv` instead of `pix_key`. */
  emv: string | null;
  /** The charge id (txid) the BR Code carries, forwarded to the receiver. */
  txid: string | null;
  description: string | null;
  externalId: string | null;
  /** Digest of what the command asks for (not its external_id): a repeat must match it. */
  fingerprint: string;
}

const FIELDS = new Set(['amount', 'pix_key', 'pix_key_type', 'emv', 'description', 'external_id']);
export const DESCRIPTION_MAX = 140;

/**
 * Validates the body of POST /pix/cash-out in this order: shape and field types (400 with a field
 * map), amount (`invalid_amount`), then the key or BR Code (`pix_key_ambiguous`, 422 `Invalid PIX
 * key format`, 422 `Invalid EMV payload: …`). Unknown fields are refused.
 */
export function parseCashOut(body: unknown): CashOutCommand {
  const r = readBody(body, FIELDS);
  const { add, present, str } = r;
  const b = r.body;
  const pixKey = str('pix_key');
  const emv = str('emv');
  // One canonical form for "no description": absent, null, "" and blanks are all null, so they are
  // one command for external_id (fingerprint) and are stored and sent alike.
  const descriptionRaw = str('description');
  const description = descriptionRaw !== null && descriptionRaw.trim() === '' ? null : descriptionRaw;
  const externalRaw = str('external_id');
  const keyTypeRaw = str('pix_key_type');

  if (!present('pix_key') && !present('emv')) add('pix_key', 'is required');
  if (present('pix_key') && present('emv')) add('emv', 'must not be sent together with pix_key');
  if (!present('amount') && !present('emv')) add('amount', 'is required');
  if (keyTypeRaw !== null && !(PIX_KEY_TYPES as readonly string[]).includes(keyTypeRaw)) add('pix_key_type', `must be one of: ${PIX_KEY_TYPES.join(', ')}`);
  if (descriptionRaw !== null && [...descriptionRaw].length > DESCRIPTION_MAX) add('description', `is too long (maximum is ${DESCRIPTION_MAX} characters)`);
  const externalId = parseExternalId(externalRaw, add);
  r.check();

  let amountCents: number | null = null;
  if (present('amount')) {
    amountCents = amountInCents(b.amount, (detail) => new DomainError('invalid_amount', { detail }));
  }

  let key: string;
  let keyType: PixKeyType;
  let txid: string | null = null;
  if (emv !== null) {
    const decoded = decodeEmv(emv);
    if (decoded.amountCents !== null) {
      if (amountCents !== null && amountCents !== decoded.amountCents) {
        throw new DomainError('unprocessable_entity', {
          message: 'amount differs from the amount of the EMV payload',
          detail: `amount is ${amountCents} cents but the EMV payload asks for ${decoded.amountCents}`,
        });
      }
      amountCents = decoded.amountCents;
    }
    if (amountCents === null) throw invalidFields({ amount: ['is required when the EMV payload has no amount'] });
    ({ key, keyType } = decoded);
    txid = decoded.txid;
  } else {
    ({ key, keyType } = resolveKey(pixKey!, keyTypeRaw as PixKeyType | null));
  }

  const command = { amountCents: amountCents!, key, keyType, emv: emv?.trim() ?? null, txid, description };
  return { ...command, externalId, fingerprint: fingerprint(command) };
}

/** The canonical key and its type from `pix_key` and optional `pix_key_type`. */
export function resolveKey(raw: string, declared: PixKeyType | null): { key: string; keyType: PixKeyType } {
  let keyType = declared;
  if (keyType === null) {
    const detected = detectPixKeyType(raw);
    if ('ambiguous' in detected) {
      throw new DomainError('pix_key_ambiguous', { detail: `pix_key ${raw.trim()} has 11 digits: send pix_key_type "cpf" or "phone"` });
    }
    if ('invalid' in detected) throw invalidKey(`pix_key is not a CPF, CNPJ, e-mail, phone (+55…) or random (EVP) key`);
    keyType = detected.type;
  }
  const key = normalizePixKey(keyType, raw);
  if (key === null) throw invalidKey(`pix_key is not a valid ${keyType} key`);
  return { key, keyType };
}

function invalidKey(detail: string) {
  return new DomainError('unprocessable_entity', { message: 'Invalid PIX key format', detail });
}

/** Reads a BR Code: CRC and structure, a static key (dynamic codes are refused), amount, txid. */
function decodeEmv(emv: string): { key: string; keyType: PixKeyType; amountCents: number | null; txid: string | null } {
  let decoded;
  try {
    decoded = decodeBrCode(emv);
  } catch (err) {
    if (err instanceof BrCodeError) {
      throw new DomainError('unprocessable_entity', { message: `Invalid EMV payload: ${err.message}`, detail: `The emv field is not a valid BR Code: ${err.message}` });
    }
    throw err;
  }
  if (decoded.key === null) {
    throw new DomainError('unprocessable_entity', {
      message: 'Invalid EMV payload: dynamic BR Codes (location URL) are not supported',
      detail: 'The BR Code carries a location URL instead of a PIX key; pay it with the key instead',
    });
  }
  const found = brCodeKey(decoded.key);
  if (found === null) throw invalidKey(`the EMV payload's key ${decoded.key} is not a CPF, CNPJ, e-mail, phone (+55…) or random (EVP) key`);
  return { key: found.key, keyType: found.type, amountCents: decoded.amountCents, txid: decoded.txid };
}

function fingerprint(c: Omit<CashOutCommand, 'fingerprint' | 'externalId'>): string {
  const text = canonicalize(
    JSON.stringify({ amount: c.amountCents, key: c.key, key_type: c.keyType, emv: c.emv, description: c.description }),
  );
  return createHash('sha256').update(text, 'utf8').digest('hex');
}
