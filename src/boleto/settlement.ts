import type { Sql } from '../db/db.js';
import { INSTITUTION_BOOK, post, type BookRef } from '../ledger/ledger.js';
import { newTransactionId, newUuid, TX_PREFIX } from '../lib/ids.js';
import { centsToBaseUnits, safeSum } from '../lib/money.js';
import { DomainError } from '../errors/catalog.js';
import { insertTransaction, TX_STATUS } from '../transactions/records.js';
import * as repo from './repository.js';
import type { BoletoDeps, CentralCaller } from './service.js';

type Deps = Pick<BoletoDeps, 'db' | 'clock'>;

/** Most boletos one trigger settles; the answer says when more are left for the next call. */
export const MAX_BOLETOS_PER_TRIGGER = 5000;

export interface TriggerResult {
  settlements: repo.SettlementRow[];
  /** More paid boletos were waiting than one trigger settles. */
  hasMore: boolean;
}

/**
 * Settles the caller's paid, unsettled boletos, in one database transaction: one settlement per
 * beneficiary (its ISPB and, for this institution, its account), each a ledger transaction out of
 * the clearing book:
 *   - beneficiary is one of our accounts: credited to its available book, with a BOLSET statement
 *     record (type internal, inbound);
 *   - beneficiary of another institution: paid out through the central-bank book.
 * Each boleto is settled exactly once: its row is locked (SKIP LOCKED, so a concurrent trigger
 * takes the others or nothing), its status moves paid → settled in the same transaction as the
 * posting, and the ledger refuses a second posting with the same settlement reference.
 */
export async function triggerSettlement(deps: Deps, caller: CentralCaller): Promise<TriggerResult> {
  return deps.db.transaction(async (tx) => {
    const rows = await repo.lockUnsettled(tx, caller.id, MAX_BOLETOS_PER_TRIGGER + 1);
    const batch = rows.slice(0, MAX_BOLETOS_PER_TRIGGER);
    const now = deps.clock.now();
    const settlements: repo.SettlementRow[] = [];
    for (const group of groupByBeneficiary(batch)) {
      settlements.push(await settleGroup(tx, caller, group, now));
    }
    return { settlements, hasMore: rows.length > batch.length };
  });
}

function groupByBeneficiary(boletos: repo.UnsettledBoleto[]): repo.UnsettledBoleto[][] {
  const groups = new Map<string, repo.UnsettledBoleto[]>();
  for (const b of boletos) {
    const key = `${b.beneficiary_ispb}:${b.beneficiary_account_id ?? ''}`;
    const group = groups.get(key);
    if (group) group.push(b);
    else groups.set(key, [b]);
  }
  return [...groups.values()];
}

async function settleGroup(tx: Sql, caller: CentralCaller, boletos: repo.UnsettledBoleto[], now: Date): Promise<repo.SettlementRow> {
  const first = boletos[0]!;
  const id = newUuid();
  const amountCents = safeSum(boletos.map((b) => b.amount_cents));
  const amount = centsToBaseUnits(amountCents);
  const accountId = first.beneficiary_account_id;
  let transactionId: string | null = null;
  let destination: BookRef = INSTITUTION_BOOK.centralBank;
  if (accountId !== null) {
    destination = { accountId, book: 'available' };
    const record = await insertTransaction(tx, {
      transaction_id: newTransactionId(TX_PREFIX.boletoSettlement, now),
      account_id: accountId,
      kind: 'boleto_settlement',
      type: 'internal',
      direction: 'inbound',
      status: TX_STATUS.completed,
      stage: 3,
      amount,
      description: `Boleto settlement: ${boletos.length} boleto${boletos.length === 1 ? '' : 's'}`,
      counterparty_name: 'Boleto settlement',
      created_at: now,
      completed_at: now,
    });
    transactionId = record.transaction_id;
  }
  const ledgerTransactionId = await post(tx, {
    kind: 'boleto_settlement',
    reference: id,
    now,
    postings: [
      { book: INSTITUTION_BOOK.boletoClearing, amount: -amount },
      { book: destination, amount },
    ],
  });
  const settlement = await repo.insertSettlement(tx, {
    id,
    central_key_id: caller.id,
    beneficiary_ispb: first.beneficiary_ispb,
    account_id: accountId,
    boleto_count: boletos.length,
    amount_cents: amountCents,
    transaction_id: transactionId,
    ledger_transaction_id: ledgerTransactionId,
    settled_at: now,
  });
  const ids = boletos.map((b) => b.id);
  const changed = await repo.markSettled(tx, ids, id, now);
  // The rows are locked by this transaction, so this cannot happen; if it did, roll everything back.
  if (changed !== ids.length) throw new Error(`settlement ${id}: ${ids.length - changed} boletos were no longer paid`);
  return settlement;
}

export function listSettlements(deps: Deps, caller: CentralCaller, f: { beforeSeq?: number; limit: number }) {
  return repo.listSettlements(deps.db, caller.id, f);
}

export async function getSettlement(deps: Deps, caller: CentralCaller, id: string) {
  const settlement = await repo.findSettlement(deps.db, caller.id, id);
  if (!settlement) throw new DomainError('not_found', { message: 'Settlement not found' });
  return { settlement, nossoNumeros: await repo.settlementNossoNumeros(deps.db, id) };
}

/** A settlement as the API shows it; `nosso_numeros` only when read by id. */
export function settlementView(s: repo.SettlementRow, nossoNumeros?: string[]) {
  return {
    id: s.id,
    status: 'settled' as const,
    beneficiary_ispb: s.beneficiary_ispb,
    account_id: s.account_id,
    boleto_count: s.boleto_count,
    amount_cents: s.amount_cents,
    transaction_id: s.transaction_id,
    settled_at: s.settled_at.toISOString(),
    ...(nossoNumeros ? { nosso_numeros: nossoNumeros } : {}),
  };
}
