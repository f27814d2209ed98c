import { addField, DomainError, invalidFields, newFieldMap, type FieldMap } from '../errors/catalog.js';
import { parseReais } from './html.js';
import type { Form } from './formBody.js';
import { one } from './formBody.js';
import type { Locale, PortalLocale } from './i18n.js';
import { common } from './messages.js';
import { portalRefusal } from './refusal.js';

/**
 * What a refusal says to a person (docs/portal.md, "Field errors"): the messages of a field map by
 * field name (never an array index), a refusal code's message in the page's language, and the
 * fields a code is about (an unknown PIX key is the `pix_key` field's error). The page shows the
 * field errors next to their inputs and, with their labels, in the summary above the form.
 */
export interface Refusal {
  /** The summary (the flash message). */
  text: string;
  /** Field name → messages, in the page's language. */
  fields: FieldMap;
  status: number;
}

/** The form field a refusal code is about (the portal's forms use the API's field names). */
const CODE_FIELD: Record<string, string> = {
  invalid_amount: 'amount',
  amount_limit_exceeded: 'amount',
  insufficient_balance: 'amount',
  amount_too_large: 'amount',
  destination_not_found: 'pix_key',
  pix_key_ambiguous: 'pix_key',
  self_transfer: 'pix_key',
  same_institution_transfer: 'pix_key',
  same_account: 'account_id',
  external_id_conflict: 'external_id',
  webhook_url_refused: 'url',
};

/** The refusal codes in Portuguese (the catalog's English is the API's own text). */
const CODE_PT: Record<string, string> = {
  bad_request: 'A solicitação tem campos inválidos',
  unauthorized: 'Não autorizado',
  not_found: 'Não encontrado',
  conflict: 'A solicitação conflita com o estado atual',
  unprocessable_entity: 'A solicitação não pode ser processada',
  amount_too_large: 'O valor passa do máximo de uma operação ou de um saldo',
  invalid_amount: 'Digite um valor em reais maior que zero, como 25,00',
  pix_key_ambiguous: 'Uma chave de 11 dígitos pode ser CPF ou telefone: informe o tipo',
  destination_not_found: 'Chave não cadastrada no diretório',
  self_transfer: 'Chave da própria conta (use a TEF)',
  same_institution_transfer: 'Destinatário nesta instituição (use a TEF)',
  same_account: 'Origem e destino são a mesma conta',
  amount_limit_exceeded: 'Valor acima do limite por operação',
  nighttime_limit_exceeded: 'Fora do horário permitido',
  daily_limit_exceeded: 'Limite diário atingido',
  insufficient_balance: 'Saldo menor que o valor mais a tarifa',
  provider_timeout: 'Tempo esgotado com o Banco Central; reenvie em 5 segundos',
  external_id_conflict: 'Este id externo já foi usado com outros dados',
  account_inactive: 'A conta não está ativa',
  destination_inactive: 'A conta de destino não está ativa; a transferência falhou',
  destination_cannot_receive: 'A conta de destino não pode receber esta transferência; a transferência falhou',
  webhook_url_refused: 'A URL do webhook foi recusada',
  invalid_events: 'Eventos inválidos',
};

/** A field message of the API (src/errors/fields.ts) in Portuguese; unknown ones stay as they are. */
const FIELD_PT: [RegExp, (...m: string[]) => string][] = [
  [/^is required$/, () => 'é obrigatório'],
  [/^or pix_key is required$/, () => 'ou a chave PIX é obrigatória'],
  [/^can't be blank$/, () => 'não pode ficar em branco'],
  [/^must be an integer$/, () => 'deve ser um número inteiro'],
  [/^must be a positive integer$/, () => 'deve ser um número inteiro positivo'],
  [/^must be an? (\w+)$/, () => 'tem um formato inválido'],
  [/^is too long \(maximum is (\d+) characters\)$/, (_, n) => `é longo demais (máximo de ${n} caracteres)`],
  [/^is too short \(minimum is (\d+) characters\)$/, (_, n) => `é curto demais (mínimo de ${n} caracteres)`],
  [/^must be greater than or equal to (.+)$/, (_, n) => `deve ser maior ou igual a ${n}`],
  [/^must be greater than (.+)$/, (_, n) => `deve ser maior que ${n}`],
  [/^must be less than or equal to (.+)$/, (_, n) => `deve ser menor ou igual a ${n}`],
  [/^must be less than (.+)$/, (_, n) => `deve ser menor que ${n}`],
  [/^must be one of: (.+)$/, (_, v) => `deve ser um de: ${v}`],
  [/^is not a permitted field$/, () => 'não é um campo permitido'],
  [/^must not be sent together with (\w+)$/, (_, f) => `não pode ser enviado junto com ${f}`],
  [/^is not a valid URL$/, () => 'não é uma URL válida'],
  [/^must be within the last (\d+) days$/, (_, n) => `deve estar nos últimos ${n} dias`],
  [/^must be a date and time$/, () => 'deve ser uma data e hora'],
  [/^must be an amount in reais, like 25,00$/, () => 'deve ser um valor em reais, como 25,00'],
];

export function translateFieldMessage(message: string, locale: Locale): string {
  if (locale === 'en') return message;
  for (const [re, to] of FIELD_PT) {
    const m = re.exec(message);
    if (m) return to(...m);
  }
  return message;
}

const isFieldList = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

/** The field map and the coded messages inside an error body of any of the API's shapes. */
function readBody(body: unknown): { fields: FieldMap; codes: [string, string][]; detail: string | undefined } {
  const fields = newFieldMap();
  const codes: [string, string][] = [];
  if (typeof body === 'string') return { fields, codes, detail: body };
  const b = (body ?? {}) as Record<string, unknown>;
  const errors = b.errors;
  if (errors && typeof errors === 'object' && !Array.isArray(errors)) {
    for (const [k, v] of Object.entries(errors as Record<string, unknown>)) {
      if (typeof v === 'string') codes.push([k, v]);
      else if (isFieldList(v)) for (const m of v) addField(fields, k, m); // {events: ["can't be blank"]}
      else if (v && typeof v === 'object') {
        for (const [f, ms] of Object.entries(v as Record<string, unknown>)) {
          for (const m of isFieldList(ms) ? ms : [String(ms)]) addField(fields, f, m);
        }
      }
    }
  }
  const code = typeof b.code === 'string' ? b.code : undefined;
  const e = b.error as { message?: string } | string | undefined;
  const detail =
    typeof b.detail === 'string' ? b.detail : typeof e === 'object' && e?.message ? e.message : typeof b.message === 'string' ? b.message : undefined;
  if (code && !codes.some(([c]) => c === code) && Object.keys(fields).length === 0) codes.push([code, detail ?? code]);
  return { fields, codes, detail };
}

/**
 * A refusal for a person in `where`'s language, `labels` naming the form's fields; undefined for a
 * fault (not a refusal).
 */
export function describeRefusal(error: unknown, where: PortalLocale, labels: Record<string, string> = {}): Refusal | undefined {
  const err = portalRefusal(error);
  if (!err) return undefined;
  // A domain refusal is read at its source (its code, its field map); an HTTP one from its body.
  const { fields: raw, codes, detail } =
    error instanceof DomainError
      ? error.fields
        ? { fields: error.fields, codes: [], detail: error.detail }
        : error.code === 'invalid_events'
          ? { fields: { events: [error.message] }, codes: [], detail: error.detail }
          : { fields: {}, codes: [[error.code, error.detail] as [string, string]], detail: error.detail }
      : readBody(err.body);
  const fields = newFieldMap();
  for (const [f, ms] of Object.entries(raw)) for (const m of ms) addField(fields, f, translateFieldMessage(m, where.locale));
  const texts: string[] = [];
  for (const [code, message] of codes) {
    const said = where.locale === 'pt-BR' ? (CODE_PT[code] ?? message) : code === 'bad_request' ? message : (detail ?? message);
    const field = CODE_FIELD[code];
    if (field && Object.hasOwn(labels, field)) addField(fields, field, said);
    else texts.push(said);
  }
  const named = Object.entries(fields).map(([f, ms]) => `${labels[f] ?? f}: ${ms.join(', ')}`);
  if (named.length) texts.unshift(`${common(where).fixFields} ${named.join('; ')}.`);
  if (texts.length === 0) texts.push(detail ?? common(where).refusedHttp(err.statusCode));
  return { text: texts.join(' '), fields, status: err.statusCode };
}

/** What an error says for a person (the summary only). */
export function errorText(error: unknown, where: PortalLocale): string {
  return describeRefusal(error, where)?.text ?? common(where).somethingWrong;
}

/**
 * Integer cents of a reais field (`25,00`, `1.234,56`, `25.00`), or the form's field error
 * (400, `{name: ['must be an amount in reais, like 25,00']}`). An empty optional field is undefined.
 */
export function reaisField(f: Form, name: string, optional: true): number | undefined;
export function reaisField(f: Form, name: string, optional?: false): number;
export function reaisField(f: Form, name: string, optional = false): number | undefined {
  const text = one(f, name)?.trim() ?? '';
  if (text === '' && optional) return undefined;
  const cents = parseReais(text);
  if (cents === null) {
    const fields = newFieldMap();
    addField(fields, name, text === '' ? 'is required' : 'must be an amount in reais, like 25,00');
    throw invalidFields(fields);
  }
  return cents;
}
