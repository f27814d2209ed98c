/**
 * BR Code ("Pix copia e cola"): the EMV® QRCPS merchant-presented payload with the PIX template of
 * the central bank's BR Code manual. A payload is a list of TLV fields: 2-digit id, 2-digit length,
 * value; field 63 closes it with the CRC16-CCITT-FALSE (poly 0x1021, init 0xFFFF) of everything
 * before its value, as 4 upper-case hex digits.
 *
 *   00 payload format indicator "01"        52 merchant category code "0000"
 *   01 point of initiation "11" / "12"      53 currency "986" (BRL)
 *   26 merchant account information:       54 amount, e.g. "15.90" (optional)
 *        00 GUI "br.gov.bcb.pix"            58 country "BR"
 *        01 PIX key (static)                59 merchant name (≤ 25)
 *        02 description (optional)          60 merchant city (≤ 15)
 *        25 location URL (dynamic)          62 additional data: 05 txid (≤ 25, "***" = none)
 *                                           63 CRC16
 * Amounts are handled as integer cents; the text form is built and read with integer arithmetic.
 */

export const PIX_GUI = 'br.gov.bcb.pix';

export interface TlvField {
  id: string;
  value: string;
}

export class BrCodeError extends Error {
  override name = 'BrCodeError';
}

/** CRC16-CCITT-FALSE of a string's UTF-8 bytes, as 4 upper-case hex digits. */
export function crc16(text: string): string {
  let crc = 0xffff;
  for (const byte of Buffer.from(text, 'utf8')) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc.toString(16).toUpperCase().padStart(4, '0');
}

function tlv(id: string, value: string): string {
  const length = [...value].length;
  if (length > 99) throw new BrCodeError(`field ${id} is longer than 99 characters`);
  return `${id}${String(length).padStart(2, '0')}${value}`;
}

/** Splits a TLV string into fields (lengths count characters). */
export function parseTlv(text: string): TlvField[] {
  const chars = [...text];
  const fields: TlvField[] = [];
  let i = 0;
  while (i < chars.length) {
    const id = chars.slice(i, i + 2).join('');
    const lengthText = chars.slice(i + 2, i + 4).join('');
    if (!/^\d{2}$/.test(id) || !/^\d{2}$/.test(lengthText)) throw new BrCodeError(`malformed field at position ${i}`);
    const length = Number(lengthText);
    if (i + 4 + length > chars.length) throw new BrCodeError(`field ${id} runs past the end`);
    fields.push({ id, value: chars.slice(i + 4, i + 4 + length).join('') });
    i += 4 + length;
  }
  return fields;
}

/** "15.90" from 1590 cents. */
export function formatAmount(cents: number): string {
  if (!Number.isSafeInteger(cents) || cents <= 0) throw new BrCodeError('amount must be a positive integer of cents');
  return `${Math.trunc(cents / 100)}.${String(cents % 100).padStart(2, '0')}`;
}

/** Cents from "15.9", "15.90" or "15"; null if the text is not such an amount. */
export function parseAmount(text: string): number | null {
  const m = /^(\d{1,13})(?:\.(\d{1,2}))?$/.exec(text);
  if (!m) return null;
  const cents = Number(m[1]) * 100 + Number((m[2] ?? '0').padEnd(2, '0'));
  return Number.isSafeInteger(cents) ? cents : null;
}

/** ASCII letters (accents removed), digits, spaces, dots and hyphens only, cut to `max` characters. */
export function sanitizeName(text: string, max: number): string {
  return text
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[^A-Za-z0-9 .\-]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, max)
    .trim();
}

export interface BrCodeInput {
  /** PIX key (static code) — or `url` for a dynamic code. */
  key?: string;
  url?: string;
  /** Integer cents; omitted: the payer chooses the amount. */
  amountCents?: number;
  merchantName: string;
  merchantCity: string;
  /**
   * Static code: up to 25 characters of A-Z a-z 0-9; omitted: "***". A dynamic code (url) always
   * carries "***": its txid travels in the payload the location serves.
   */
  txid?: string;
  description?: string;
  /** Point of initiation: true = "12" (single use). */
  singleUse?: boolean;
}

/**
 * Builds a BR Code payload every bank reads: name and city without accents (NFD, combining marks
 * removed) cut to 25 and 15 characters, amount with two decimals, the CRC as 4 upper-case hex digits.
 */
export function encodeBrCode(input: BrCodeInput): string {
  if ((input.key === undefined) === (input.url === undefined)) throw new BrCodeError('exactly one of key or url is required');
  if (input.txid !== undefined && !/^[A-Za-z0-9]{1,25}$/.test(input.txid)) throw new BrCodeError('txid must be 1 to 25 letters or digits');
  if (input.txid !== undefined && input.url !== undefined) throw new BrCodeError('a dynamic BR Code (url) carries "***" as its txid');
  // The location is written without its scheme: the payer's app adds https://.
  const url = input.url?.replace(/^https:\/\//i, '');
  const name = sanitizeName(input.merchantName, 25);
  const city = sanitizeName(input.merchantCity, 15);
  if (!name || !city) throw new BrCodeError('merchant name and city are required');
  const account =
    tlv('00', PIX_GUI) +
    (input.key !== undefined ? tlv('01', input.key) : '') +
    (input.description ? tlv('02', input.description.slice(0, 40)) : '') +
    (url !== undefined ? tlv('25', url) : '');
  const payload =
    tlv('00', '01') +
    (input.singleUse ? tlv('01', '12') : '') +
    tlv('26', account) +
    tlv('52', '0000') +
    tlv('53', '986') +
    (input.amountCents !== undefined ? tlv('54', formatAmount(input.amountCents)) : '') +
    tlv('58', 'BR') +
    tlv('59', name) +
    tlv('60', city) +
    tlv('62', tlv('05', input.txid ?? '***')) +
    '6304';
  return payload + crc16(payload);
}

export interface DecodedBrCode {
  fields: TlvField[];
  key: string | null;
  url: string | null;
  description: string | null;
  amountCents: number | null;
  merchantName: string;
  merchantCity: string;
  txid: string | null;
  singleUse: boolean;
}

/**
 * Reads and checks a BR Code: TLV structure, payload format "01", the PIX GUI, currency 986,
 * country BR, a well-formed amount, and the CRC in field 63 (last). Throws BrCodeError naming
 * the first problem.
 */
export function decodeBrCode(payload: string): DecodedBrCode {
  const text = payload.trim();
  if (text.length < 30 || text.length > 512) throw new BrCodeError('payload length is out of range');
  const crcAt = text.length - 8;
  if (text.slice(crcAt, crcAt + 4) !== '6304') throw new BrCodeError('field 63 (CRC) must be last');
  const expected = crc16(text.slice(0, crcAt + 4));
  if (text.slice(crcAt + 4).toUpperCase() !== expected) throw new BrCodeError('CRC does not match');
  const fields = parseTlv(text);
  const get = (id: string) => fields.find((f) => f.id === id)?.value;
  if (fields[0]?.id !== '00' || fields[0].value !== '01') throw new BrCodeError('field 00 must be "01" and come first');
  const accountField = fields.find((f) => f.id === '26');
  if (!accountField) throw new BrCodeError('field 26 (merchant account information) is missing');
  const account = parseTlv(accountField.value);
  const sub = (id: string) => account.find((f) => f.id === id)?.value;
  if ((sub('00') ?? '').toLowerCase() !== PIX_GUI) throw new BrCodeError(`GUI must be ${PIX_GUI}`);
  const key = sub('01') ?? null;
  const url = sub('25') ?? null;
  if (key === null && url === null) throw new BrCodeError('neither a PIX key nor a location URL is present');
  if (get('53') !== '986') throw new BrCodeError('currency must be 986');
  if (get('58') !== 'BR') throw new BrCodeError('country must be BR');
  const amountText = get('54');
  const amountCents = amountText === undefined ? null : parseAmount(amountText);
  if (amountText !== undefined && (amountCents === null || amountCents <= 0)) throw new BrCodeError('amount is malformed');
  const additional = get('62');
  const txid = additional ? (parseTlv(additional).find((f) => f.id === '05')?.value ?? null) : null;
  return {
    fields,
    key,
    url,
    description: sub('02') ?? null,
    amountCents,
    merchantName: get('59') ?? '',
    merchantCity: get('60') ?? '',
    txid: txid === '***' ? null : txid,
    singleUse: get('01') === '12',
  };
}
