import { sqlState, UNIQUE_VIOLATION } from '../db/db.js';
import { DomainError } from '../errors/catalog.js';
import type { PixDeps } from '../pix/deps.js';
import { refund } from '../pix/refund.js';
import { pixProblem, type Violacao } from './pixProblems.js';
import * as store from './pixStore.js';
import type { ReceiverScope } from './pixStore.js';
import { END_TO_END } from './pixReceived.js';
import { centsOfValor, devolucaoView, NATUREZA_CODE, type DevolucaoView, type Natureza } from './pixViews.js';

/**
 * PUT and GET /pix/{e2eid}/devolucao/{id}: a return of a received Pix, named by the client, made
 * by pixgate's refund (src/pix/refund.ts) so that its ledger entries, statement record, events,
 * MED guard and the rail apply unchanged. What this adds:
 *  - the client's id, bound to the refund record in the refund's own transaction (api_pix_returns):
 *    the same id with the same request answers the same return; with another request, 400;
 *  - the nature (ORIGINAL → MD06; RETIRADA → SL02, only for a Pix Saque or Troco, which pixgate
 *    does not receive) and the 90-day window from the Pix's settlement;
 *  - the sum of returns never above the Pix: the refund's own check, under the account's lock.
 */

const RETURN_ID = /^[a-zA-Z0-9]{1,35}$/;
/** Days after a Pix's settlement during which its receiver may return it (MD06). */
export const RETURN_WINDOW_DAYS = 90;
const DAY_MS = 86_400_000;
const DESCRICAO_MAX = 140;
const INVALID = 'A presente requisição de devolução não respeita o schema ou não faz sentido semanticamente.';

export interface ReturnRequest {
  cents: number;
  natureza: Natureza;
  descricao: string | undefined;
}

/** Validates the body of PUT /pix/{e2eid}/devolucao/{id}: 400 PixDevolucaoInvalida with its violations. */
export function parseReturnRequest(body: unknown): ReturnRequest {
  const violacoes: Violacao[] = [];
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw invalid([{ razao: 'O corpo deve ser um objeto JSON.', propriedade: 'devolucao' }]);
  const b = body as Record<string, unknown>;
  const cents = centsOfValor(b.valor);
  if (cents === null) violacoes.push({ razao: 'O campo devolucao.valor não respeita o schema.', propriedade: 'devolucao.valor' });
  else if (cents <= 0) violacoes.push({ razao: 'O campo devolucao.valor deve ser maior que zero.', propriedade: 'devolucao.valor' });
  const natureza = b.natureza ?? 'ORIGINAL';
  if (natureza !== 'ORIGINAL' && natureza !== 'RETIRADA') {
    violacoes.push({ razao: 'O campo devolucao.natureza deve ser ORIGINAL ou RETIRADA.', propriedade: 'devolucao.natureza' });
  }
  if (b.descricao !== undefined && (typeof b.descricao !== 'string' || [...b.descricao].length > DESCRICAO_MAX)) {
    violacoes.push({ razao: `O campo devolucao.descricao deve ser um texto de até ${DESCRICAO_MAX} caracteres.`, propriedade: 'devolucao.descricao' });
  }
  if (violacoes.length > 0) throw invalid(violacoes);
  return { cents: cents!, natureza: natureza as Natureza, descricao: b.descricao === undefined || (b.descricao as string).trim() === '' ? undefined : (b.descricao as string) };
}

function invalid(violacoes: Violacao[], detail = INVALID): DomainError {
  return pixProblem('bad_request', 'PixDevolucaoInvalida', detail, violacoes);
}

function fingerprintOf(r: ReturnRequest): string {
  return JSON.stringify([r.cents, r.natureza, r.descricao ?? null]);
}

export interface ReturnAnswer {
  /** 201: the return as it stands (a repeat of the same request answers the same return). */
  statusCode: 201;
  body: DevolucaoView;
}

/** PUT /pix/{e2eid}/devolucao/{id}. */
export async function requestReturn(ctx: PixDeps, scope: ReceiverScope, e2eid: string, id: string, req: ReturnRequest): Promise<ReturnAnswer> {
  if (!RETURN_ID.test(id)) throw invalid([{ razao: 'O id da devolução deve ter de 1 a 35 caracteres alfanuméricos.', propriedade: 'id' }]);
  const original = END_TO_END.test(e2eid) ? await store.findReceived(ctx.db, scope, e2eid) : undefined;
  if (!original) throw pixProblem('not_found', 'NaoEncontrado', `Pix ${e2eid} não encontrado.`);
  const fingerprint = fingerprintOf(req);

  const repeat = await answerRepeat(ctx, original.id, id, fingerprint);
  if (repeat) return repeat;

  const settledAt = original.completed_at ?? original.created_at;
  if (ctx.clock.now().getTime() - settledAt.getTime() > RETURN_WINDOW_DAYS * DAY_MS) {
    throw invalid([{ razao: `A devolução viola a janela de ${RETURN_WINDOW_DAYS} dias desde a liquidação do Pix original.`, propriedade: 'e2eid' }]);
  }
  if (req.natureza === 'RETIRADA') {
    // The standard limits a RETIRADA to the Pix's withdrawal or change (Pix Saque, Pix Troco);
    // a Pix that pixgate received has neither, so nothing of it can be returned as RETIRADA.
    throw invalid([{ razao: 'A natureza RETIRADA só se aplica a um Pix Saque ou Pix Troco, e este Pix não tem saque nem troco.', propriedade: 'devolucao.natureza' }]);
  }

  let refundId: string | null = null;
  try {
    await refund(
      ctx,
      scope.merchantId,
      {
        originalId: original.transaction_id,
        originalIdField: 'original_transaction_id',
        amountCents: req.cents,
        returnCode: NATUREZA_CODE[req.natureza],
        description: req.descricao ?? '',
      },
      {
        resumes: null,
        bind: async (tx, recordId) => {
          refundId = recordId;
          await store.bindReturn(tx, { originalId: original.id, returnId: id, refundId: recordId, natureza: req.natureza, fingerprint });
        },
        record: async () => {},
      },
    );
  } catch (err) {
    // A concurrent request with this id won: answer as a repeat of it (or refuse another request).
    const raced = await answerRepeat(ctx, original.id, id, fingerprint);
    if (raced) return raced;
    if (sqlState(err) === UNIQUE_VIOLATION) throw err;
    if (err instanceof DomainError) throw refusal(err);
    throw err;
  }
  if (refundId === null) throw new Error('refund made no record');
  const made = (await store.findReturn(ctx.db, original.id, id))!;
  return { statusCode: 201, body: devolucaoView(made) };
}

/** A return already asked under this id: the same request answers it; another is refused. */
async function answerRepeat(ctx: PixDeps, originalId: string, id: string, fingerprint: string): Promise<ReturnAnswer | null> {
  const existing = await store.findReturn(ctx.db, originalId, id);
  if (!existing) return null;
  if (existing.fingerprint !== fingerprint) {
    throw invalid([{ razao: 'O id da devolução já foi utilizado por outra requisição de devolução deste Pix.', propriedade: 'id', valor: id }]);
  }
  return { statusCode: 201, body: devolucaoView(existing) };
}

/** The refund's refusals in the standard's words. */
function refusal(err: DomainError): DomainError {
  if (err.code === 'not_found') return pixProblem('not_found', 'NaoEncontrado', err.detail);
  if (/exceeds/.test(err.message)) {
    return invalid([{ razao: 'A devolução, somada às devoluções anteriores, excederia o valor do Pix original.', propriedade: 'devolucao.valor' }]);
  }
  if (/insufficient balance/.test(err.message)) return invalid([{ razao: 'Saldo insuficiente para a devolução.', propriedade: 'devolucao.valor' }], 'Saldo insuficiente para a devolução.');
  if (err.code === 'unprocessable_entity') return invalid([{ razao: err.message, propriedade: 'devolucao' }], err.message);
  return err;
}

/** GET /pix/{e2eid}/devolucao/{id}. */
export async function getReturn(ctx: Pick<PixDeps, 'db'>, scope: ReceiverScope, e2eid: string, id: string): Promise<DevolucaoView> {
  const original = END_TO_END.test(e2eid) ? await store.findReceived(ctx.db, scope, e2eid) : undefined;
  const found = original && RETURN_ID.test(id) ? await store.findReturn(ctx.db, original.id, id) : undefined;
  if (!found) throw pixProblem('not_found', 'PixDevolucaoNaoEncontrada', `Devolução ${id} não encontrada para o Pix ${e2eid}.`);
  return devolucaoView(found);
}
