/**
 * Why a BR Code would be refused, field by field (the sandbox's `POST /pix/brcode/explain`).
 *
 * Readers differ: pixgate's own decoder (`decodeBrCode`) is lenient where the manual allows it, but a
 * payload that is to work in every bank's app must follow the manual to the letter. Each finding
 * names the field (EMV id path, e.g. `26.01`, `62.05`), a stable code and a sentence:
 *
 *   error    the manual is broken: pixgate's reader refuses it, and so do banks
 *   interop  pixgate reads it, yet banks' readers are known to refuse it (accents and other
 *            non-ASCII text, a lower-case CRC, an amount without two decimals, a name or city over
 *            its limit, a GUI not in lower case)
 *
 * The checks are the failure classes integrators report: TLV structure and lengths, field 00 first
 * and `01`, point of initiation `11`/`12`, the PIX GUI, a key (static) or a location URL (dynamic),
 * merchant category, currency 986, amount `\d+.\d{2}`, country BR, name ≤ 25, city ≤ 15, the txid
 * (`***` in a dynamic code; `***` or 1–25 letters and digits in a static one), and the CRC (field 63
 * last, 4 upper-case hex digits, matching).
 */
import { crc16, parseTlv, PIX_GUI, type TlvField } from './brcode.js';

export type FindingSeverity = 'error' | 'interop';

export interface BrCodeFinding {
  field: string;
  severity: FindingSeverity;
  code: string;
  message: string;
}

export interface BrCodeExplanation {
  /** No finding of severity `error`. */
  readable: boolean;
  /** No finding at all: every bank's reader should take it. */
  interoperable: boolean;
  kind: 'static' | 'dynamic' | null;
  fields: { id: string; length: number; value: string }[];
  findings: BrCodeFinding[];
}

export const NAME_MAX = 25;
export const CITY_MAX = 15;
const ASCII_PRINTABLE = /^[\x20-\x7e]*$/;

export interface ExplainOptions {
  /** Why a static code's key is not a valid PIX key, or null when it is (the domain's rule). */
  keyProblem?: (key: string) => string | null;
}

/** Every reason a reader would refuse `payload`; see the file's comment. */
export function explainBrCode(payload: string, options: ExplainOptions = {}): BrCodeExplanation {
  const findings: BrCodeFinding[] = [];
  const add = (field: string, severity: FindingSeverity, code: string, message: string) => findings.push({ field, severity, code, message });
  const text = payload;
  if (text !== text.trim()) add('payload', 'interop', 'surrounding_whitespace', 'the payload has spaces or line breaks around it; copy it exactly');
  const body = text.trim();
  if (!ASCII_PRINTABLE.test(body)) {
    add('payload', 'interop', 'non_ascii', 'the payload holds characters outside printable ASCII (accents, ç, emoji): readers that count bytes see other lengths and another CRC');
  }
  let fields: TlvField[];
  try {
    fields = parseTlv(body);
  } catch (err) {
    add('payload', 'error', 'malformed_tlv', `the payload is not a list of id-length-value fields: ${(err as Error).message}`);
    return finish(findings, null, []);
  }
  checkOrderAndDuplicates(fields, add);
  checkCrc(body, fields, add);
  const get = (id: string) => fields.find((f) => f.id === id)?.value;

  if (fields[0]?.id !== '00') add('00', 'error', 'format_indicator_not_first', 'field 00 (payload format indicator) must be the first field');
  if (get('00') === undefined) add('00', 'error', 'missing', 'field 00 (payload format indicator) is missing');
  else if (get('00') !== '01') add('00', 'error', 'invalid_value', `field 00 must be "01", not "${get('00')}"`);
  const initiation = get('01');
  if (initiation !== undefined && initiation !== '11' && initiation !== '12') add('01', 'error', 'invalid_value', `field 01 (point of initiation) must be "11" (reusable) or "12" (single use), not "${initiation}"`);

  const kind = checkAccount(get('26'), options, add);
  if (get('52') === undefined) add('52', 'error', 'missing', 'field 52 (merchant category code) is missing; use "0000"');
  else if (!/^\d{4}$/.test(get('52')!)) add('52', 'error', 'invalid_value', 'field 52 (merchant category code) must be 4 digits');
  if (get('53') === undefined) add('53', 'error', 'missing', 'field 53 (currency) is missing; use "986" (BRL)');
  else if (get('53') !== '986') add('53', 'error', 'invalid_value', `field 53 (currency) must be "986" (BRL), not "${get('53')}"`);
  checkAmount(get('54'), add);
  if (get('58') === undefined) add('58', 'error', 'missing', 'field 58 (country) is missing; use "BR"');
  else if (get('58') !== 'BR') add('58', 'error', 'invalid_value', `field 58 (country) must be "BR", not "${get('58')}"`);
  checkText('59', 'merchant name', get('59'), NAME_MAX, add);
  checkText('60', 'merchant city', get('60'), CITY_MAX, add);
  checkTxid(get('62'), kind, add);
  return finish(findings, kind, fields);
}

type Add = (field: string, severity: FindingSeverity, code: string, message: string) => void;

function finish(findings: BrCodeFinding[], kind: BrCodeExplanation['kind'], fields: TlvField[]): BrCodeExplanation {
  return {
    readable: !findings.some((f) => f.severity === 'error'),
    interoperable: findings.length === 0,
    kind,
    fields: fields.map((f) => ({ id: f.id, length: [...f.value].length, value: f.value })),
    findings,
  };
}

function checkOrderAndDuplicates(fields: TlvField[], add: Add) {
  const seen = new Set<string>();
  for (const f of fields) {
    if (seen.has(f.id)) add(f.id, 'error', 'duplicate', `field ${f.id} appears more than once`);
    seen.add(f.id);
  }
}

function checkCrc(body: string, fields: TlvField[], add: Add) {
  const last = fields[fields.length - 1];
  if (!fields.some((f) => f.id === '63')) return add('63', 'error', 'missing', 'field 63 (CRC16) is missing; it closes every BR Code');
  if (last?.id !== '63') return add('63', 'error', 'not_last', 'field 63 (CRC16) must be the last field');
  if ([...last.value].length !== 4) return add('63', 'error', 'wrong_length', `field 63 must be 4 hex digits (length 04, zero-padded: "0A1F", never "A1F"), not ${[...last.value].length} characters`);
  if (!/^[0-9A-Fa-f]{4}$/.test(last.value)) return add('63', 'error', 'not_hex', 'field 63 must be 4 hexadecimal digits');
  const expected = crc16(body.slice(0, body.length - 4));
  if (last.value.toUpperCase() !== expected) return add('63', 'error', 'mismatch', `the CRC16-CCITT of the payload up to "6304" is ${expected}, the code says ${last.value}`);
  if (last.value !== expected) add('63', 'interop', 'lower_case', `write the CRC in upper case (${expected}): banks compare it as text`);
}

function checkAccount(value: string | undefined, options: ExplainOptions, add: Add): BrCodeExplanation['kind'] {
  if (value === undefined) {
    add('26', 'error', 'missing', 'field 26 (merchant account information, the PIX template) is missing');
    return null;
  }
  let sub: TlvField[];
  try {
    sub = parseTlv(value);
  } catch (err) {
    add('26', 'error', 'malformed_tlv', `field 26 is not a list of id-length-value fields: ${(err as Error).message}`);
    return null;
  }
  const get = (id: string) => sub.find((f) => f.id === id)?.value;
  const gui = get('00');
  if (gui === undefined) add('26.00', 'error', 'missing', `field 26.00 (GUI) is missing; it must be "${PIX_GUI}"`);
  else if (gui.toLowerCase() !== PIX_GUI) add('26.00', 'error', 'wrong_gui', `field 26.00 (GUI) must be "${PIX_GUI}", not "${gui}"`);
  else if (gui !== PIX_GUI) add('26.00', 'interop', 'gui_case', `write the GUI in lower case: "${PIX_GUI}"`);
  const key = get('01');
  const url = get('25');
  if (key !== undefined && url !== undefined) add('26', 'error', 'key_and_url', 'field 26 holds both a key (01) and a location URL (25): a code is static (key) or dynamic (URL), not both');
  if (key === undefined && url === undefined) {
    add('26', 'error', 'no_key_or_url', 'field 26 holds neither a PIX key (26.01, static code) nor a location URL (26.25, dynamic code)');
    return null;
  }
  if (key !== undefined) {
    const problem = options.keyProblem?.(key) ?? null;
    if (problem) add('26.01', 'error', 'invalid_key', problem);
  }
  if (url !== undefined) {
    if (/^https?:\/\//i.test(url)) add('26.25', 'error', 'url_scheme', 'field 26.25 (location URL) is written without "https://": the reader adds it');
    if (url.length > 77) add('26.25', 'error', 'too_long', 'field 26.25 (location URL) is longer than 77 characters');
  }
  const description = get('02');
  if (description !== undefined && key !== undefined && [...key].length + [...description].length > 72) add('26.02', 'interop', 'too_long', 'the key and the description (26.02) together exceed 72 characters; many apps cut or refuse it');
  return url !== undefined ? 'dynamic' : 'static';
}

function checkAmount(value: string | undefined, add: Add) {
  if (value === undefined) return;
  if (/^\d{1,10}\.\d{2}$/.test(value)) {
    if (/^0+\.00$/.test(value)) add('54', 'error', 'zero', 'field 54 (amount) is zero; leave it out to let the payer choose');
    return;
  }
  if (/^\d{1,10}(\.\d)?$/.test(value) && !/^0+(\.0)?$/.test(value)) return add('54', 'interop', 'decimals', `write the amount with a point and two decimals ("${value.includes('.') ? value + '0' : value + '.00'}")`);
  if (/,/.test(value)) return add('54', 'error', 'comma', 'field 54 (amount) uses a comma; the decimal separator is a point ("15.90")');
  add('54', 'error', 'invalid_value', `field 54 (amount) must be digits, a point and two decimals ("15.90"), not "${value}"`);
}

function checkText(id: string, what: string, value: string | undefined, max: number, add: Add) {
  if (value === undefined || value.trim() === '') return add(id, 'error', 'missing', `field ${id} (${what}) is missing or blank`);
  if (!ASCII_PRINTABLE.test(value)) add(id, 'interop', 'accents', `field ${id} (${what}) holds accents or other non-ASCII characters; write "${value.normalize('NFD').replace(/[\u0300-\u036f]/g, '')}"`);
  if ([...value].length > max) add(id, 'interop', 'too_long', `field ${id} (${what}) has ${[...value].length} characters; the limit is ${max}`);
}

function checkTxid(value: string | undefined, kind: BrCodeExplanation['kind'], add: Add) {
  if (value === undefined) return add('62', 'error', 'missing', 'field 62 (additional data) is missing; it carries the txid (62.05), "***" when there is none');
  let sub: TlvField[];
  try {
    sub = parseTlv(value);
  } catch (err) {
    return add('62', 'error', 'malformed_tlv', `field 62 is not a list of id-length-value fields: ${(err as Error).message}`);
  }
  const txid = sub.find((f) => f.id === '05')?.value;
  if (txid === undefined) return add('62.05', 'error', 'missing', 'field 62.05 (txid) is missing; write "***" when there is none');
  if (kind === 'dynamic' && txid !== '***') return add('62.05', 'error', 'dynamic_txid', 'a dynamic code carries "***" in 62.05: its txid is in the payload the location URL serves');
  if (txid !== '***' && !/^[A-Za-z0-9]{1,25}$/.test(txid)) add('62.05', 'error', 'invalid_txid', 'field 62.05 (txid) must be "***" or 1 to 25 letters and digits (no spaces, dashes or accents)');
}
