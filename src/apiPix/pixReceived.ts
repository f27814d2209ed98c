import type { Sql } from '../db/db.js';
import { pixProblem, type Violacao } from './pixProblems.js';
import * as store from './pixStore.js';
import type { ReceiverScope } from './pixStore.js';
import { pixView, type PixView } from './pixViews.js';

/**
 * GET /pix and GET /pix/{e2eid}: the Pix the receiver got, from pixgate's own records of received
 * PIX (src/transactions), each with its returns.
 */

export const END_TO_END = /^[a-zA-Z0-9]{32}$/;
const TXID = /^[a-zA-Z0-9]{1,35}$/;
/** The standard's page size: 100 unless asked, at most 1000. */
export const PER_PAGE = { default: 100, max: 1000 } as const;

/** A Pix received by the scope, with its returns; 404 PixNaoEncontrado otherwise. */
export async function getReceivedPix(sql: Sql, scope: ReceiverScope, e2eid: string): Promise<PixView> {
  const row = END_TO_END.test(e2eid) ? await store.findReceived(sql, scope, e2eid) : undefined;
  if (!row) throw pixProblem('not_found', 'PixNaoEncontrado', `Pix ${e2eid} não encontrado.`);
  const returns = await store.returnsOf(sql, [row.id]);
  return pixView(row, returns.get(row.id) ?? []);
}

/** The query of GET /pix as it arrives (strings, `paginacao.*` flattened by name). */
export type PixQuery = Record<string, unknown>;

/** Readers of a query's parameters, each problem a violation (GET /pix, GET /webhook). */
export function queryReader(q: PixQuery) {
  const violacoes: Violacao[] = [];
  const bad = (propriedade: string, razao: string) => violacoes.push({ razao, propriedade });
  const str = (name: string): string | undefined => {
    const v = q[name];
    if (v === undefined) return undefined;
    if (typeof v !== 'string') {
      bad(name, 'O parâmetro deve ser informado uma única vez.');
      return undefined;
    }
    return v;
  };
  const instant = (name: string, required: boolean): Date | undefined => {
    const v = str(name);
    if (v === undefined) {
      if (required) bad(name, 'O parâmetro é obrigatório.');
      return undefined;
    }
    const ok = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i.test(v) && !Number.isNaN(Date.parse(v));
    if (!ok) bad(name, 'O parâmetro deve ser um timestamp RFC 3339.');
    return ok ? new Date(v) : undefined;
  };
  const bool = (name: string): boolean | undefined => {
    const v = str(name);
    if (v === undefined) return undefined;
    if (v !== 'true' && v !== 'false') bad(name, 'O parâmetro deve ser true ou false.');
    return v === 'true' ? true : v === 'false' ? false : undefined;
  };
  const int = (name: string, min: number, max: number, fallback: number): number => {
    const v = str(name);
    if (v === undefined) return fallback;
    if (!/^-?\d{1,9}$/.test(v)) {
      bad(name, 'O parâmetro deve ser um número inteiro.');
      return fallback;
    }
    const n = Number(v);
    if (n < min) bad(name, n < 0 ? 'O parâmetro é negativo.' : `O parâmetro deve ser maior ou igual a ${min}.`);
    else if (n > max) bad(name, `O parâmetro deve ser menor ou igual a ${max}.`);
    return n;
  };
  /** inicio, fim (fim not before inicio) and the page. */
  const window = (required: boolean) => {
    const inicio = instant('inicio', required);
    const fim = instant('fim', required);
    if (inicio && fim && fim < inicio) bad('fim', 'O timestamp representado pelo parâmetro fim é anterior ao timestamp representado pelo parâmetro inicio.');
    const page = int('paginacao.paginaAtual', 0, 1_000_000, 0);
    const perPage = int('paginacao.itensPorPagina', 1, PER_PAGE.max, PER_PAGE.default);
    return { inicio, fim, page, perPage };
  };
  return { violacoes, bad, str, bool, window };
}

/** Validates GET /pix's query: 400 PixConsultaInvalida with one violation per problem. */
export function parsePixQuery(q: PixQuery): store.ReceivedFilter {
  const { violacoes, bad, str, bool, window } = queryReader(q);
  const { inicio, fim, page, perPage } = window(true);
  const txid = str('txid');
  if (txid !== undefined && !TXID.test(txid)) bad('txid', 'O parâmetro deve ter de 1 a 35 caracteres alfanuméricos.');
  const txIdPresente = bool('txIdPresente');
  const devolucaoPresente = bool('devolucaoPresente');
  const cpf = str('cpf');
  const cnpj = str('cnpj');
  if (cpf !== undefined && cnpj !== undefined) bad('cpf', 'Os parâmetros cpf e cnpj não podem ser informados ao mesmo tempo.');
  if (cpf !== undefined && !/^\d{11}$/.test(cpf)) bad('cpf', 'O parâmetro deve ter 11 dígitos.');
  if (cnpj !== undefined && !/^[0-9A-Z]{14}$/.test(cnpj)) bad('cnpj', 'O parâmetro deve ter 14 caracteres, dígitos ou letras maiúsculas.');
  if (violacoes.length > 0) {
    throw pixProblem('bad_request', 'PixConsultaInvalida', 'Os parâmetros de consulta à lista de Pix recebidos não respeitam o schema ou não fazem sentido semanticamente.', violacoes);
  }
  return { inicio: inicio!, fim: fim!, txid, txIdPresente, devolucaoPresente, document: cpf ?? cnpj, page, perPage };
}

/** GET /pix: a page of the Pix received in [inicio, fim], with the parameters echoed and the page counts. */
export async function listReceivedPix(sql: Sql, scope: ReceiverScope, f: store.ReceivedFilter) {
  const { rows, total } = await store.listReceived(sql, scope, f);
  const returns = await store.returnsOf(sql, rows.map((r) => r.id));
  return {
    parametros: {
      inicio: f.inicio.toISOString(),
      fim: f.fim.toISOString(),
      ...(f.txid !== undefined ? { txid: f.txid } : {}),
      ...(f.txIdPresente !== undefined ? { txIdPresente: f.txIdPresente } : {}),
      ...(f.devolucaoPresente !== undefined ? { devolucaoPresente: f.devolucaoPresente } : {}),
      ...(f.document !== undefined ? (f.document.length === 11 ? { cpf: f.document } : { cnpj: f.document }) : {}),
      paginacao: {
        paginaAtual: f.page,
        itensPorPagina: f.perPage,
        quantidadeDePaginas: Math.max(1, Math.ceil(total / f.perPage)),
        quantidadeTotalDeItens: total,
      },
    },
    pix: rows.map((r) => pixView(r, returns.get(r.id) ?? [])),
  };
}
