import { DomainError, invalidFields } from '../../errors/catalog.js';
import { putCobv, reviseCobv, type CobvDeps, type CobvOwner } from './cobvs.js';
import * as store from './loteStore.js';
import type { LoteItemRow, LoteRow } from './loteStore.js';
import type { CobvCommand, CobvPatch } from './types.js';

/**
 * Batches of due-date charges (the standard's `lotecobv`). `PUT /lotecobv/{id}` creates a batch
 * (its txids new to the account) or re-sends it (exactly the same txids); `PATCH` re-sends some of
 * them. Each request of the batch runs as its own `PUT /cobv/{txid}` (or `PATCH`), in its own
 * transaction, in the order sent, before the answer (202): its item is then `CRIADA` or `NEGADA`
 * with the problem (RFC 7807 body) that operation would have answered. A batch holds at most
 * LOTE.maxItems requests (pixgate's bound; the standard sets none).
 */
export const LOTE = { maxItems: 1000 } as const;

/** The problem body of a refused request (the edge's shape of a DomainError), stored with its item. */
export type DescribeProblem = (err: DomainError) => Record<string, unknown>;

export interface LoteRequest<T> {
  txid: string;
  command: T;
}

async function runItem(deps: CobvDeps, owner: CobvOwner, loteId: number, txid: string, run: () => Promise<unknown>, describe: DescribeProblem): Promise<void> {
  const now = () => deps.clock.now();
  try {
    await run();
    await store.markItem(deps.db, owner.accountId, loteId, txid, { status: 'CRIADA', problema: null, createdAt: now() }, now());
  } catch (err) {
    if (!(err instanceof DomainError)) throw err;
    await store.markItem(deps.db, owner.accountId, loteId, txid, { status: 'NEGADA', problema: describe(err), createdAt: null }, now());
  }
}

/** PUT /lotecobv/{id}. */
export async function putLote(deps: CobvDeps, owner: CobvOwner, id: number, descricao: string, requests: LoteRequest<CobvCommand>[], describe: DescribeProblem): Promise<void> {
  if (requests.length > LOTE.maxItems) throw invalidFields({ cobsv: [`no máximo ${LOTE.maxItems} cobranças por lote`] });
  const txids = requests.map((r) => r.txid);
  if (new Set(txids).size !== txids.length) throw invalidFields({ cobsv: ['um txid aparece mais de uma vez'] });
  await deps.db.transaction(async (tx) => {
    const now = deps.clock.now();
    const lote = await store.lockLote(tx, owner.accountId, id);
    if (lote) {
      const known = (await store.items(tx, owner.accountId, id)).map((i) => i.txid).sort();
      if (JSON.stringify(known) !== JSON.stringify([...txids].sort())) {
        throw invalidFields({ cobsv: ['um lote já criado só pode ser reenviado com exatamente as mesmas cobranças'] });
      }
      await store.setDescricao(tx, owner.accountId, id, descricao);
      for (const txid of txids) await store.markItem(tx, owner.accountId, id, txid, { status: 'EM_PROCESSAMENTO', problema: null, createdAt: null }, now);
      return;
    }
    for (const txid of txids) {
      const item = await store.itemOfTxid(tx, owner.accountId, txid);
      const exists = (await tx.query('SELECT 1 FROM api_pix_cobvs WHERE account_id = $1 AND txid = $2', [owner.accountId, txid])).length > 0;
      if (item || exists) throw invalidFields({ cobsv: [`a cobrança ${txid} já existe ou já pertence a um lote`] });
    }
    if (!(await store.insertLote(tx, owner.accountId, id, descricao, now))) throw invalidFields({ id: ['já está em uso'] });
    await store.insertItems(tx, owner.accountId, id, txids, now);
  });
  for (const r of requests) await runItem(deps, owner, id, r.txid, () => putCobv(deps, owner, r.txid, r.command, id), describe);
}

/** PATCH /lotecobv/{id}: some of the batch's requests again, as revisions. */
export async function patchLote(deps: CobvDeps, owner: CobvOwner, id: number, descricao: string | undefined, requests: LoteRequest<CobvPatch>[], describe: DescribeProblem): Promise<void> {
  if (requests.length > LOTE.maxItems) throw invalidFields({ cobsv: [`no máximo ${LOTE.maxItems} cobranças por lote`] });
  await deps.db.transaction(async (tx) => {
    const lote = await store.lockLote(tx, owner.accountId, id);
    if (!lote) throw new DomainError('not_found', { message: `Lote ${id} não encontrado` });
    const txids = new Set((await store.items(tx, owner.accountId, id)).map((i) => i.txid));
    for (const r of requests) if (!txids.has(r.txid)) throw invalidFields({ cobsv: [`a cobrança ${r.txid} não consta do lote`] });
    if (descricao !== undefined) await store.setDescricao(tx, owner.accountId, id, descricao);
  });
  for (const r of requests) await runItem(deps, owner, id, r.txid, () => reviseCobv(deps, owner, r.txid, r.command), describe);
}

export async function getLote(deps: CobvDeps, accountId: number, id: number): Promise<{ lote: LoteRow; items: LoteItemRow[] }> {
  const lote = await store.findLote(deps.db, accountId, id);
  if (!lote) throw new DomainError('not_found', { message: `Lote ${id} não encontrado` });
  return { lote, items: await store.items(deps.db, accountId, id) };
}

export async function listLotes(deps: CobvDeps, accountId: number, from: Date, to: Date, offset: number, limit: number) {
  const { rows, total } = await store.listLotes(deps.db, accountId, from, to, offset, limit);
  const out = [];
  for (const lote of rows) out.push({ lote, items: await store.items(deps.db, accountId, lote.id) });
  return { lotes: out, total };
}
