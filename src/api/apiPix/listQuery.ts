import { z } from 'zod';
import { invalidFields } from '../../errors/catalog.js';
import { fieldMap } from '../../errors/fields.js';

/**
 * The query every list of the standard shares: `inicio` and `fim` (required, RFC 3339 instants,
 * `fim` not before `inicio`) and `paginacao.paginaAtual` (from 0) / `paginacao.itensPorPagina`
 * (1 to 1000, default 100); and the `parametros.paginacao` block of the answer.
 */
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i;
export const instant = z.string().refine((s) => INSTANT.test(s) && !Number.isNaN(Date.parse(s)), 'deve ser um instante RFC 3339 com fuso (2020-04-01T00:00:00Z)');
const wholeNumber = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,7}$/, 'deve ser um número inteiro não negativo')
    .transform(Number)
    .refine((n) => n >= min && n <= max, `deve estar entre ${min} e ${max}`);
export const booleanText = z.enum(['true', 'false']).transform((v) => v === 'true');

export const listQueryShape = {
  inicio: instant,
  fim: instant,
  'paginacao.paginaAtual': wholeNumber(0, 1_000_000).optional(),
  'paginacao.itensPorPagina': wholeNumber(1, 1000).optional(),
};

export interface Page {
  from: Date;
  to: Date;
  page: number;
  perPage: number;
  offset: number;
}

/** Parses a list's query with `schema` (built on listQueryShape); a refusal is a 400 with violations. */
export function parseListQuery<S extends z.ZodType<{ inicio: string; fim: string; 'paginacao.paginaAtual'?: number; 'paginacao.itensPorPagina'?: number }>>(
  schema: S,
  raw: unknown,
): { query: z.output<S>; page: Page } {
  const result = schema.safeParse(raw ?? {});
  if (!result.success) throw invalidFields(fieldMap(result.error, raw));
  const q = result.data;
  const from = new Date(q.inicio);
  const to = new Date(q.fim);
  if (to.getTime() < from.getTime()) throw invalidFields({ fim: ['é anterior a inicio'] });
  const page = q['paginacao.paginaAtual'] ?? 0;
  const perPage = q['paginacao.itensPorPagina'] ?? 100;
  return { query: q, page: { from, to, page, perPage, offset: page * perPage } };
}

/** The answer's `paginacao`. */
export function paginacao(page: Page, total: number) {
  return {
    paginaAtual: page.page,
    itensPorPagina: page.perPage,
    quantidadeDePaginas: Math.max(1, Math.ceil(total / page.perPage)),
    quantidadeTotalDeItens: total,
  };
}

/**
 * A request body that is a JSON object (the parser gives objects without a prototype; a number
 * too long for a double arrives as a JsonDecimal instance, which a schema of optional fields
 * would take for an empty object), or a 400 on `body`.
 */
export function jsonObjectBody(raw: unknown): Record<string, unknown> {
  const proto = raw !== null && typeof raw === 'object' && !Array.isArray(raw) ? Object.getPrototypeOf(raw) : undefined;
  if (proto !== null && proto !== Object.prototype) throw invalidFields({ body: ['deve ser um objeto JSON'] });
  return raw as Record<string, unknown>;
}
