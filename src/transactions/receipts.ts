import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Sql } from '../db/db.js';
import { DomainError } from '../errors/catalog.js';
import { receipt, type Holder } from './views.js';
import { TX_STATUS, type TransactionRow } from './repository.js';
import * as merchants from '../merchants/repository.js';

/**
 * Receipts (comprovantes) and their authenticity (docs/portal.md, "Receipts"). A settled PIX's
 * receipt shows payer, receiver, amount, date, end-to-end id and transaction id; its authenticity
 * code is an HMAC-SHA256 of exactly those fields under a server key (table receipt_keys, made at
 * random on first use), shortened to 80 bits and written `K-XXXX-XXXX-XXXX-XXXX` (K the key id,
 * the rest Crockford base32). Anyone holding the end-to-end id and the code may ask whether they
 * match (verifyReceipt): the answer is valid — with the receipt's own fields and nothing else — or
 * invalid, the same for an unknown id, an unsettled payment and a wrong code. CPFs are masked on
 * the receipt (`***.456.789-**`), as Brazilian banks print them; a CNPJ is shown whole.
 */

/** What a receipt shows: payer, receiver, amount (base units), date, ids. */
export interface ReceiptFields {
  transaction_id: string;
  end_to_end_id: string;
  direction: 'inbound' | 'outbound';
  amount: number;
  date: string;
  description: string | null;
  payer: ReceiptParty;
  receiver: ReceiptParty;
}

export interface ReceiptParty {
  name: string | null;
  document: string | null;
  bank_name: string | null;
  ispb: string | null;
  pix_key: string | null;
}

export interface SignedReceipt extends ReceiptFields {
  authenticity_code: string;
}

const CURRENT_KEY_ID = 1;
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'; // Crockford base32

/** A CPF (11 digits) as `***.456.789-**`; a CNPJ (14 digits) formatted whole; anything else as it is. */
export function maskDocument(doc: string | null | undefined): string | null {
  if (!doc) return null;
  const d = doc.replace(/\D/g, '');
  if (d.length === 11) return `***.${d.slice(3, 6)}.${d.slice(6, 9)}-**`;
  if (d.length === 14) return `${d.slice(0, 2)}.${d.slice(2, 5)}.${d.slice(5, 8)}/${d.slice(8, 12)}-${d.slice(12)}`;
  return doc;
}

function party(p: { name: string | null; document: string | null; ispb: string | null; bank_name: string | null; pix_key: string | null }): ReceiptParty {
  return { name: p.name || null, document: maskDocument(p.document), bank_name: p.bank_name ?? null, ispb: p.ispb ?? null, pix_key: p.pix_key ?? null };
}

/** The receipt's fields of a settled PIX record (the merchant's side named by `holder`). */
export function receiptFields(row: TransactionRow, holder: Holder, institution: { ispb: string; name: string }): ReceiptFields {
  const r = receipt(row, holder, institution);
  return {
    transaction_id: r.transaction_id,
    end_to_end_id: r.end_to_end_id!,
    direction: r.direction,
    amount: Number(r.amount),
    date: r.date!,
    description: r.description || null,
    payer: party(r.payer),
    receiver: party(r.receiver),
  };
}

/** The text the code signs: every shown field, in a fixed order, unambiguously joined. */
function signedText(f: ReceiptFields): string {
  const p = (x: ReceiptParty) => [x.name, x.document, x.bank_name, x.ispb, x.pix_key];
  return JSON.stringify(['pixgate-receipt-v1', f.transaction_id, f.end_to_end_id, f.direction, String(f.amount), f.date, f.description, ...p(f.payer), ...p(f.receiver)]);
}

async function keyOf(sql: Sql, id: number): Promise<Buffer | undefined> {
  const read = async () => (await sql.query<{ secret: Uint8Array }>('SELECT secret FROM receipt_keys WHERE id = $1', [id]))[0];
  let row = await read();
  if (!row && id === CURRENT_KEY_ID) {
    // First use: one of several concurrent inserts wins; every one then reads the winner's key.
    await sql.query('INSERT INTO receipt_keys (id, secret) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING', [id, randomBytes(32)]);
    row = await read();
  }
  return row ? Buffer.from(row.secret) : undefined;
}

function base32(bytes: Buffer): string {
  let bits = 0;
  let value = 0;
  let out = '';
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return out;
}

function codeWith(key: Buffer, keyId: number, f: ReceiptFields): string {
  const mac = createHmac('sha256', key).update(signedText(f), 'utf8').digest().subarray(0, 10); // 80 bits
  const b = base32(mac);
  return `${keyId}-${b.slice(0, 4)}-${b.slice(4, 8)}-${b.slice(8, 12)}-${b.slice(12, 16)}`;
}

/** A code as typed (lower case, spaces, O for 0, I/L for 1) in its canonical form, or null. */
export function normalizeCode(text: string | undefined): string | null {
  if (!text || text.length > 40) return null;
  const t = text.toUpperCase().replace(/[\s-]/g, '').replace(/O/g, '0').replace(/[IL]/g, '1');
  const m = /^([1-9])([0-9A-HJKMNP-TV-Z]{16})$/.exec(t);
  if (!m) return null;
  const b = m[2]!;
  return `${m[1]}-${b.slice(0, 4)}-${b.slice(4, 8)}-${b.slice(8, 12)}-${b.slice(12, 16)}`;
}

export interface ReceiptDeps {
  db: Sql;
  config: { institutionIspb: string };
  institutionName: string;
}

const SELECT_SETTLED_PIX = `SELECT t.* FROM transactions t WHERE t.type = 'pix' AND t.status = ${TX_STATUS.completed} AND t.stage = 3 AND t.completed_at IS NOT NULL AND t.end_to_end_id IS NOT NULL`;

async function fieldsOf(deps: ReceiptDeps, row: TransactionRow): Promise<ReceiptFields> {
  const account = (await merchants.findAccount(deps.db, row.account_id))!;
  const merchant = (await merchants.findMerchant(deps.db, account.merchant_id))!;
  return receiptFields(row, merchant, { ispb: deps.config.institutionIspb, name: deps.institutionName });
}

/** The signed receipt of a settled PIX of the account (`id`: transaction id or end-to-end id); 404/422 otherwise. */
export async function signedReceipt(deps: ReceiptDeps, accountId: number, id: string): Promise<SignedReceipt> {
  if (id.length > 256) throw new DomainError('not_found', { message: 'Transaction not found' });
  const [row] = await deps.db.query<TransactionRow>('SELECT * FROM transactions WHERE account_id = $1 AND (transaction_id = $2 OR end_to_end_id = $2)', [accountId, id]);
  if (!row) throw new DomainError('not_found', { message: 'Transaction not found' });
  if (row.type !== 'pix') throw new DomainError('unprocessable_entity', { message: 'Receipts exist for PIX transactions only' });
  if (row.status !== TX_STATUS.completed || row.stage < 3 || !row.completed_at || !row.end_to_end_id) {
    throw new DomainError('unprocessable_entity', { message: 'The receipt is available once the payment is settled' });
  }
  const fields = await fieldsOf(deps, row);
  const key = (await keyOf(deps.db, CURRENT_KEY_ID))!;
  return { ...fields, authenticity_code: codeWith(key, CURRENT_KEY_ID, fields) };
}

/**
 * Whether `code` is the authenticity code of the settled PIX `endToEndId`: its receipt when it is
 * (what the receipt shows, nothing more), null otherwise — an unknown id, a payment not settled
 * (or no longer: returned in full is still settled) and a wrong code alike. Constant-time compare.
 */
export async function verifyReceipt(deps: ReceiptDeps, endToEndId: string, code: string): Promise<SignedReceipt | null> {
  const canonical = normalizeCode(code);
  if (!canonical || endToEndId.length > 64) return null;
  const keyId = Number(canonical[0]);
  const [row] = await deps.db.query<TransactionRow>(`${SELECT_SETTLED_PIX} AND t.end_to_end_id = $1`, [endToEndId.trim()]);
  const key = await keyOf(deps.db, keyId);
  if (!row || !key) return null;
  const fields = await fieldsOf(deps, row);
  const expected = Buffer.from(codeWith(key, keyId, fields));
  const given = Buffer.from(canonical);
  return expected.length === given.length && timingSafeEqual(expected, given) ? { ...fields, authenticity_code: canonical } : null;
}
