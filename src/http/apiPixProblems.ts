import { DomainError, type FieldMap } from '../errors/catalog.js';
import { ERROR_STATUS } from './errorMap.js';
import { HttpError } from './errors.js';

/**
 * The error answers of the API Pix façade (/api/pix/v2): RFC 7807 problem details whose `type` is
 * the standard's `https://pix.bcb.gov.br/api/v2/error/<Tipo>`, with `title`, `status`, `detail`
 * and, for a malformed request, `violacoes` ({razao, propriedade, valor?}). The façade's routes
 * declare `errorShape: 'api_pix'` and, in `config.pixProblems`, the standard's names of their own
 * refusals (`CobOperacaoInvalida`, `CobNaoEncontrado`…); pixgate's one catalog
 * (src/errors/catalog.ts) is mapped here, at the edge: 404 for `not_found`, 503 for what pixgate
 * answers 503, and 400 for every other refusal (the standard documents no 409 or 422).
 */
export const PIX_ERROR_TYPE_BASE = 'https://pix.bcb.gov.br/api/v2/error/';
export const PROBLEM_CONTENT_TYPE = 'application/problem+json; charset=utf-8';

/** The general kinds of the standard, with pixgate's titles for them. */
const TITLES: Record<string, string> = {
  RequisicaoInvalida: 'Requisição inválida',
  AcessoNegado: 'Acesso negado',
  NaoEncontrado: 'Não encontrado',
  ErroInternoDoServidor: 'Erro interno do servidor',
  ServicoIndisponivel: 'Serviço indisponível',
};

export interface Violation {
  razao: string;
  propriedade: string;
  valor?: string;
}

/** What a façade route names its refusals (RouteSpec.config.pixProblems). */
export interface PixProblems {
  /** The request is malformed or the operation not allowed now: `CobOperacaoInvalida`, `CobConsultaInvalida`… */
  invalid: string;
  /** What the path names does not exist: `CobNaoEncontrado`… */
  notFound?: string;
  /** Prefix of `propriedade` in violations (`cob` gives `cob.valor.original`). */
  subject?: string;
}

function titleOf(tipo: string, status: number): string {
  if (TITLES[tipo]) return TITLES[tipo]!;
  if (status === 404) return 'Recurso não encontrado';
  if (tipo.endsWith('ConsultaInvalida')) return 'Consulta inválida';
  return 'Operação inválida';
}

/** One problem answer. */
export function pixProblem(status: number, tipo: string, detail: string, options: { violacoes?: Violation[]; headers?: Record<string, string>; title?: string } = {}): HttpError {
  const body: Record<string, unknown> = { type: `${PIX_ERROR_TYPE_BASE}${tipo}`, title: options.title ?? titleOf(tipo, status), status, detail };
  if (options.violacoes && options.violacoes.length > 0) body.violacoes = options.violacoes;
  return new HttpError(status, body, { 'content-type': PROBLEM_CONTENT_TYPE, ...options.headers });
}

/**
 * 401 of a call without a usable bearer token. The standard documents no 401 (authentication is
 * the OAuth2 layer's), so the body is a plain RFC 7807 problem (`about:blank`) and the header is
 * RFC 6750's `WWW-Authenticate: Bearer`.
 */
export function pixUnauthorized(detail: string, invalidToken: boolean): HttpError {
  const challenge = invalidToken ? `Bearer realm="api-pix", error="invalid_token", error_description="${detail}"` : 'Bearer realm="api-pix"';
  return new HttpError(401, { type: 'about:blank', title: 'Não autorizado', status: 401, detail }, { 'content-type': PROBLEM_CONTENT_TYPE, 'www-authenticate': challenge });
}

/** 403 AcessoNegado: authenticated, but the token lacks the operation's scope (or the key may not act). */
export function pixAccessDenied(detail: string): HttpError {
  return pixProblem(403, 'AcessoNegado', detail, { title: TITLES.AcessoNegado });
}

/** Violations of a field map (`{'valor.original': ['is required']}`), one per message. */
export function violationsOf(fields: FieldMap, subject: string | undefined, input?: unknown): Violation[] {
  const out: Violation[] = [];
  for (const [field, messages] of Object.entries(fields)) {
    const propriedade = subject ? (field === 'body' ? subject : `${subject}.${field}`) : field;
    const value = valueAt(input, field);
    for (const razao of messages) out.push({ razao, propriedade, ...(value !== undefined ? { valor: value } : {}) });
  }
  return out;
}

function valueAt(input: unknown, path: string): string | undefined {
  let v = input;
  for (const part of path.split('.')) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, part)) return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  if (typeof v === 'string') return v.slice(0, 200);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return undefined;
}

/**
 * The façade's answer of any error raised under one of its routes: a DomainError mapped from the
 * catalog; an HttpError that already is a problem as it is; any other HttpError (pixgate's generic
 * answers: malformed JSON, body too large, 503, 500) re-written as a problem of its status.
 */
export function toPixProblem(err: unknown, generic: HttpError, problems: PixProblems | undefined, input?: unknown): HttpError {
  const invalid = problems?.invalid ?? 'RequisicaoInvalida';
  if (err instanceof DomainError) {
    const status = ERROR_STATUS[err.code];
    if (status === 404) return pixProblem(404, problems?.notFound ?? 'NaoEncontrado', err.detail);
    if (status === 401) return pixUnauthorized(err.detail, true);
    if (err.code === 'provider_timeout') return pixProblem(503, 'ServicoIndisponivel', err.detail, { headers: { 'retry-after': '5' } });
    return pixProblem(400, invalid, err.detail, { violacoes: err.fields ? violationsOf(err.fields, problems?.subject, input) : [] });
  }
  const body = generic.body as Record<string, unknown> | null;
  if (body && typeof body === 'object' && typeof body.type === 'string') return generic;
  const status = generic.statusCode;
  const detail = genericDetail(body) ?? 'A requisição não pôde ser atendida';
  if (status === 503) return pixProblem(503, 'ServicoIndisponivel', detail, { headers: generic.headers });
  if (status >= 500) return pixProblem(500, 'ErroInternoDoServidor', detail);
  if (status === 404) return pixProblem(404, problems?.notFound ?? 'NaoEncontrado', detail);
  if (status === 401) return pixUnauthorized(detail, true);
  if (status === 403) return pixAccessDenied(detail);
  // 400, 413, 415 and the rest: the standard's one answer to a request it cannot take is 400.
  return pixProblem(400, invalid, detail);
}

/** The text of one of pixgate's generic bodies ({errors: {<atom>: message}}, {detail}). */
function genericDetail(body: Record<string, unknown> | null): string | undefined {
  if (!body || typeof body !== 'object') return undefined;
  if (typeof body.detail === 'string') return body.detail;
  const errors = body.errors as Record<string, unknown> | undefined;
  if (errors && typeof errors === 'object') {
    const first = Object.values(errors)[0];
    if (typeof first === 'string') return first;
    if (first && typeof first === 'object') return Object.entries(first as Record<string, string[]>).map(([k, v]) => `${k} ${[v].flat().join(', ')}`).join('; ');
  }
  return undefined;
}
