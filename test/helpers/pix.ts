import { randomBytes, randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import type { Sql } from '../../src/db/db.js';
import { requestHash, type IdempotencyClaim } from '../../src/external/idempotency.js';
import type { CashOutKey } from '../../src/pix/cashOut.js';
import { validCpf } from './fixtures.js';
import { TEST_ADMIN_TOKEN, type TestServer } from './server.js';

/** A call to the sandbox API (contract section 4) with the admin bearer token. */
export async function sandbox(s: TestServer, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${s.url}/api/sandbox${path}`, {
    method,
    headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

export type Behavior = 'settle' | 'reject' | 'hold' | 'timeout';

/** Registers a fresh e-mail key of another institution (Nubank's ISPB) with the given behaviour. */
export async function foreignKey(s: TestServer, options: { behavior?: Behavior; fraudFlagged?: boolean; name?: string } = {}): Promise<string> {
  const key = `rcv-${randomBytes(5).toString('hex')}@example.com`;
  const res = await sandbox(s, 'POST', '/dict/keys', {
    key,
    type: 'email',
    name: options.name ?? 'Maria Recebedora',
    document: validCpf(),
    ispb: '18236120',
    ...(options.behavior ? { behavior: options.behavior } : {}),
    ...(options.fraudFlagged ? { fraud_flagged: true } : {}),
  });
  if (res.status !== 201) throw new Error(`dict key: ${JSON.stringify(res.body)}`);
  return key;
}

/** Polls `read` until `done` holds for its value, or fails after `ms`. */
export async function waitFor<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: T;
  for (;;) {
    last = await read();
    if (done(last)) return last;
    if (Date.now() > deadline) throw new Error(`condition not reached within ${ms} ms; last value: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface OutboxRow {
  event: string;
  subject: string;
  merchant_id: number;
  account_id: number;
  payload: Record<string, any>;
}

export async function outbox(sql: Sql, subject: string): Promise<OutboxRow[]> {
  return sql.query<OutboxRow>('SELECT event, subject, merchant_id, account_id, payload FROM outbox_events WHERE subject = $1 ORDER BY id', [subject]);
}

export async function eventNames(sql: Sql, subject: string): Promise<string[]> {
  return (await outbox(sql, subject)).map((r) => r.event);
}

/** A transaction record straight from the database. */
export async function txRow(sql: Sql, transactionId: string): Promise<Record<string, any>> {
  const [row] = await sql.query('SELECT * FROM transactions WHERE transaction_id = $1', [transactionId]);
  return row as Record<string, any>;
}

/**
 * The ledger's invariants: every book's running balance equals the sum of its entries, no merchant
 * book is negative, and all balances sum to zero.
 */
export async function expectLedgerConsistent(sql: Sql): Promise<void> {
  const drift = await sql.query(
    `SELECT la.code, la.balance, COALESCE(sum(e.amount), 0)::bigint AS entries
       FROM ledger_accounts la LEFT JOIN ledger_entries e ON e.ledger_account_id = la.id
      WHERE la.tracks_balance GROUP BY la.id HAVING la.balance <> COALESCE(sum(e.amount), 0)`,
  );
  expect(drift).toEqual([]);
  const [negative] = await sql.query<{ n: number }>(`SELECT count(*)::bigint AS n FROM ledger_accounts WHERE tracks_balance AND balance < 0`);
  expect(negative!.n).toBe(0);
  const [sum] = await sql.query<{ total: number }>('SELECT COALESCE(sum(balance), 0)::bigint AS total FROM ledger_balances');
  expect(sum!.total).toBe(0);
}

export async function balances(sql: Sql, accountId: number): Promise<{ available: number; blocked: number; pending: number }> {
  const rows = await sql.query<{ book: string; balance: number }>('SELECT book, balance FROM ledger_accounts WHERE account_id = $1', [accountId]);
  const get = (b: string) => rows.find((r) => r.book === b)?.balance ?? 0;
  return { available: get('available'), blocked: get('blocked'), pending: get('pending') };
}

export const SIM_FAST = { SIM_SETTLEMENT_MS: '30', SIM_PROTECTION_MS: '150', SIM_SEED: '7' };

/**
 * A fresh Idempotency-Key claimed for POST /pix/cash-out of `merchantId`, and the CashOutKey a
 * request holding it passes to cashOut() (as the pipeline's keyBinding builds it, JSON answers).
 */
export async function claimedCashOutKey(s: TestServer, merchantId: number, body = '{}'): Promise<{ claim: IdempotencyClaim; key: CashOutKey }> {
  const claimed = await s.ctx.idempotency.claim({ merchantId, method: 'POST', path: '/pix/cash-out', key: randomUUID() }, requestHash(body));
  if (claimed.kind !== 'claimed') throw new Error('no claim');
  const claim = claimed.claim;
  const key: CashOutKey = {
    resumes: null,
    bind: (tx, id) => claim.bind(tx, id),
    record: (tx, statusCode, answer) => claim.record(tx, statusCode, JSON.stringify(answer)),
    claim: { id: claim.id, token: claim.token },
    prepare: (statusCode, answer) => claim.prepare(statusCode, JSON.stringify(answer)),
  };
  return { claim, key };
}
