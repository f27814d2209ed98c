import { secretDigest } from '../../src/auth/secrets.js';
import { addDays } from '../../src/boleto/barcode.js';
import { brasiliaToday } from '../../src/boleto/service.js';
import type { Clock } from '../../src/lib/clock.js';
import { validCnpj, validCpf } from '../helpers/fixtures.js';
import type { TestServer } from '../helpers/server.js';

/** A clock the test moves by hand (rate-limit windows, "today" of due dates). */
export class ManualClock implements Clock {
  constructor(public ms: number) {}
  now() {
    return new Date(this.ms);
  }
  advance(ms: number) {
    this.ms += ms;
  }
}

/** 2026-03-10 12:00:30 Brasília: mid-window, so no test straddles a minute boundary. */
export const T0 = Date.UTC(2026, 2, 10, 15, 0, 30);

export interface Answer {
  status: number;
  body: any;
  headers: Headers;
}

export interface CentralClient {
  apiKey: string;
  keyId: number;
  accountId: number | null;
  call(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Answer>;
}

/** Sends one request to the boleto central API. `body` is JSON-encoded unless it is a string. */
export async function centralRequest(s: TestServer, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${s.url}/api/v1/central${path}`, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
}

/** A new central key (with a beneficiary account when `accountId` is given) and a client for it. */
export async function centralClient(s: TestServer, options: { accountId?: number; name?: string } = {}): Promise<CentralClient> {
  const res = await s.admin('POST', '/central-keys', { name: options.name ?? 'Test ERP', ...(options.accountId ? { account_id: options.accountId } : {}) });
  if (res.status !== 201) throw new Error(`central key: ${res.status} ${JSON.stringify(res.body)}`);
  const apiKey: string = res.body.api_key;
  const [row] = await s.ctx.db.query<{ id: number }>('SELECT id FROM central_api_keys WHERE key_hash = $1', [secretDigest(apiKey)]);
  return {
    apiKey,
    keyId: row!.id,
    accountId: options.accountId ?? null,
    call: (method, path, body, headers = {}) => centralRequest(s, method, path, body, { 'x-api-key': apiKey, ...headers }),
  };
}

/** A merchant account (through the admin API). */
export async function newAccount(s: TestServer): Promise<number> {
  const res = await s.admin('POST', '/merchants', { name: 'Colégio Horizonte', document: validCnpj() });
  if (res.status !== 201) throw new Error(`merchant: ${res.status}`);
  return res.body.account_id;
}

let sequence = 0;

/** A unique nosso_numero for this test process. */
export function nextNossoNumero(): string {
  sequence++;
  return `${process.pid % 10_000}${String(sequence).padStart(6, '0')}`;
}

/** A valid `boleto` object for POST /boletos, due 30 days after the server's today. */
export function boletoInput(clock: Clock, overrides: Record<string, unknown> = {}) {
  return {
    nosso_numero: nextNossoNumero(),
    amount_cents: 15_990,
    due_date: addDays(brasiliaToday(clock.now()), 30),
    payer_document: validCpf(),
    payer_name: 'Maria da Silva',
    beneficiary_ispb: '60746948',
    beneficiary_name: 'Escola Horizonte Ltda',
    ...overrides,
  };
}

/** Sum of every ledger book (always 0) and the balance of one book by code. */
export async function ledgerSum(s: TestServer): Promise<number> {
  const [row] = await s.ctx.db.query<{ total: number }>('SELECT COALESCE(sum(balance), 0)::bigint AS total FROM ledger_balances');
  return row!.total;
}

export async function bookBalance(s: TestServer, code: string): Promise<number> {
  const [row] = await s.ctx.db.query<{ balance: number }>('SELECT balance FROM ledger_balances WHERE code = $1', [code]);
  return row!.balance;
}

/** Runs `count` calls of `fn`, at most `concurrency` at a time, in order of start. */
export async function inBatches<T>(count: number, concurrency: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  for (let start = 0; start < count; start += concurrency) {
    const batch = Array.from({ length: Math.min(concurrency, count - start) }, (_, j) => fn(start + j));
    results.push(...(await Promise.all(batch)));
  }
  return results;
}
