import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INSTITUTION_BOOK, post } from '../src/ledger/ledger.js';
import { merchantWithKey } from './helpers/client.js';
import { BACKENDS } from './helpers/db.js';
import { validCnpj } from './helpers/fixtures.js';
import { received, reportInfraction } from './helpers/med.js';
import { balances, expectLedgerConsistent, foreignKey, outbox, SIM_FAST, waitFor } from './helpers/pix.js';
import { startTestServer, TEST_ADMIN_TOKEN, type TestServer } from './helpers/server.js';

/**
 * Issue 10, defects 3, 5 and 6: operator deposits are idempotent, audited and evented; amounts and
 * balances are bounded in the database (a clear 4xx, never a bricked account); the MED top-up of
 * short blocks is part of the ledger's credit primitive.
 */
const PAYER = { payer_name: 'Carlos Pagador', payer_document: '52998224725', payer_ispb: '60746948' };

describe.each(BACKENDS)('bounds, deposits and audit on %s', (backend) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST });
  });
  afterAll(async () => {
    if (s) await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  async function account() {
    const res = await s.admin('POST', '/merchants', { name: 'Padaria Central', document: validCnpj() });
    expect(res.status).toBe(201);
    return res.body as { merchant_id: number; account_id: number };
  }

  async function deposit(accountId: number, body: unknown, key?: string) {
    const res = await fetch(`${s.url}/api/admin/accounts/${accountId}/deposits`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
  }

  describe('defect 5: bounded amounts and balances', () => {
    it('two of the largest deposits the old edge accepted: refused with a clear 4xx, balance reads stay 200', async () => {
      const { account_id } = await account();
      const largest = Math.floor(Number.MAX_SAFE_INTEGER / 100);
      for (let i = 0; i < 2; i++) {
        const res = await deposit(account_id, { amount: largest });
        expect(res.status).toBeGreaterThanOrEqual(400);
        expect(res.status).toBeLessThan(500);
      }
      const read = await s.admin('GET', `/accounts/${account_id}`);
      expect(read.status).toBe(200);
      expect(read.body.balance).toBe(0);
    });

    it('a deposit that would take a balance past MAX_BALANCE_BASE_UNITS is 422 amount_too_large; the balance stays readable', async () => {
      const { MAX_AMOUNT_CENTS, MAX_BALANCE_BASE_UNITS } = await import('../src/lib/money.js');
      const { account_id } = await account();
      const near = MAX_BALANCE_BASE_UNITS - 100; // one cent below the cap
      await s.ctx.db.transaction((tx) =>
        post(tx, {
          kind: 'deposit',
          reference: `seed-${account_id}`,
          postings: [
            { book: INSTITUTION_BOOK.funding, amount: -near },
            { book: { accountId: account_id, book: 'available' }, amount: near },
          ],
        }),
      );
      expect((await deposit(account_id, { amount: 1 })).status).toBe(201);
      const refused = await deposit(account_id, { amount: MAX_AMOUNT_CENTS });
      expect(refused.status).toBe(422);
      expect(refused.body).toEqual({ errors: { amount_too_large: expect.stringContaining('balance') } });
      const read = await s.admin('GET', `/accounts/${account_id}`);
      expect(read.status).toBe(200);
      expect(read.body.balance).toBe(MAX_BALANCE_BASE_UNITS);
    });

    it('the database refuses an entry above the bound even when the code forgets (CHECK)', async () => {
      const { MAX_BALANCE_BASE_UNITS } = await import('../src/lib/money.js');
      const { account_id } = await account();
      const big = MAX_BALANCE_BASE_UNITS + 1;
      const err = await s.ctx.db
        .transaction(async (tx) => {
          const [t] = await tx.query<{ id: number }>(`INSERT INTO ledger_transactions (kind, reference) VALUES ('deposit', 'raw') RETURNING id`);
          await tx.query(
            `INSERT INTO ledger_entries (ledger_transaction_id, ledger_account_id, amount)
             SELECT $1, id, CASE WHEN code = $2 THEN $3::bigint ELSE -$3::bigint END FROM ledger_accounts WHERE code IN ($2, $4)`,
            [t!.id, `account:${account_id}:available`, big, INSTITUTION_BOOK.funding],
          );
        })
        .catch((e: unknown) => e);
      expect(err).toMatchObject({ code: '23514', constraint: expect.stringMatching(/^ledger_(entries_amount|accounts_balance)_max$/) });
      expect((await s.admin('GET', `/accounts/${account_id}`)).status).toBe(200);
    });
  });

  describe('defect 3: operator deposits', () => {
    it('a retried deposit with the same Idempotency-Key credits once and answers the original', async () => {
      const { account_id } = await account();
      const first = await deposit(account_id, { amount: 5000, description: 'Aporte' }, 'dep-1');
      expect(first.status).toBe(201);
      const again = await deposit(account_id, { amount: 5000, description: 'Aporte' }, 'dep-1');
      expect(again.status).toBe(201);
      expect(again.body).toEqual(first.body);
      expect((await s.admin('GET', `/accounts/${account_id}`)).body.balance).toBe(500_000);
      // The same key on another account is another deposit.
      const other = await account();
      expect((await deposit(other.account_id, { amount: 5000, description: 'Aporte' }, 'dep-1')).body.transaction_id).not.toBe(first.body.transaction_id);
    });

    it('the same key with a different body is 409 in the business shape and credits nothing', async () => {
      const { account_id } = await account();
      expect((await deposit(account_id, { amount: 100 }, 'dep-2')).status).toBe(201);
      const res = await deposit(account_id, { amount: 200 }, 'dep-2');
      expect(res.status).toBe(409);
      expect(res.body).toEqual({ errors: { conflict: expect.stringContaining('Idempotency-Key') } });
      expect((await s.admin('GET', `/accounts/${account_id}`)).body.balance).toBe(10_000);
    });

    it('concurrent retries with one key credit once', async () => {
      const { account_id } = await account();
      const answers = await Promise.all(Array.from({ length: 6 }, () => deposit(account_id, { amount: 700 }, 'dep-race')));
      expect(answers.map((a) => a.status)).toEqual(Array(6).fill(201));
      expect(new Set(answers.map((a) => a.body.transaction_id)).size).toBe(1);
      expect((await s.admin('GET', `/accounts/${account_id}`)).body.balance).toBe(70_000);
    });

    it('a bad Idempotency-Key is 400', async () => {
      const { account_id } = await account();
      const res = await deposit(account_id, { amount: 100 }, 'x'.repeat(257));
      expect(res.status).toBe(400);
      expect((await s.admin('GET', `/accounts/${account_id}`)).body.balance).toBe(0);
    });

    it('a deposit writes an event to the outbox (not offered to webhooks)', async () => {
      const { account_id } = await account();
      const res = await deposit(account_id, { amount: 1234 }, 'dep-event');
      const events = await outbox(s.ctx.db, res.body.transaction_id);
      expect(events.map((e) => e.event)).toEqual(['account.deposit.completed']);
      expect(events[0]!.payload).toMatchObject({ transaction_id: res.body.transaction_id, account_id, amount: 123_400, status: 'completed' });
    });

    it('every operator write (admin and sandbox) is in the audit log: actor, address, route, targets, request id, outcome; never the token', async () => {
      const { account_id, merchant_id } = await account();
      const dep = await deposit(account_id, { amount: 300 }, 'dep-audit');
      const missing = await deposit(999_999_999, { amount: 300 });
      expect(missing.status).toBe(404);
      const sandboxRes = await fetch(`${s.url}/api/sandbox/pix/inbound`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json', 'x-request-id': 'audit-req-1' },
        body: JSON.stringify({ account_id, amount: 100 }),
      });
      expect(sandboxRes.status).toBe(201);
      // Reads are not audited.
      await s.admin('GET', `/accounts/${account_id}`);

      const log = await s.admin('GET', '/audit-log?limit=100');
      expect(log.status).toBe(200);
      expect(JSON.stringify(log.body)).not.toContain(TEST_ADMIN_TOKEN);
      const entries = log.body.entries as any[];
      const ofDeposit = entries.find((e) => e.route === '/api/admin/accounts/:account_id/deposits' && e.status === 201 && e.target.transaction_id === dep.body.transaction_id);
      expect(ofDeposit).toMatchObject({
        id: expect.any(Number),
        at: expect.stringMatching(/Z$/),
        actor: expect.stringMatching(/^admin-token:[0-9a-f]{12}$/),
        client_ip: expect.stringMatching(/127\.0\.0\.1|::1/),
        method: 'POST',
        request_id: expect.any(String),
        target: { account_id: String(account_id), transaction_id: dep.body.transaction_id },
      });
      expect(entries.some((e) => e.status === 404 && e.target.account_id === '999999999')).toBe(true);
      expect(entries.some((e) => e.route === '/api/sandbox/pix/inbound' && e.request_id === 'audit-req-1' && e.status === 201)).toBe(true);
      expect(entries.some((e) => e.route === '/api/admin/merchants' && e.target.merchant_id === merchant_id)).toBe(true);
      expect(entries.some((e) => e.method === 'GET')).toBe(false);
      // Newest first, with a cursor.
      const ids = entries.map((e) => e.id);
      expect(ids).toEqual([...ids].sort((a, b) => b - a));
      const page = await s.admin('GET', '/audit-log?limit=2');
      expect(page.body.entries).toHaveLength(2);
      const next = await s.admin('GET', `/audit-log?limit=2&before=${page.body.next_before}`);
      expect(next.body.entries[0].id).toBeLessThan(page.body.entries[1].id);
    });

    it('whole-number query parameters of the operator lists take plain digits only (queryInt)', async () => {
      // z.coerce.number() took these while the document said integer (the HTTP fuzzer: limit=1.0 -> 200).
      for (const path of ['/audit-log', '/webhooks']) {
        for (const bad of ['1.0', '1e1', '%201', '0x10', '-1', '0']) {
          const res = await s.admin('GET', `${path}?limit=${bad}`);
          expect(res.status, `${path}?limit=${bad}`).toBe(400);
        }
        expect((await s.admin('GET', `${path}?limit=2`)).status).toBe(200);
      }
      // The messages of the page parameters (QueryReader.int), in the operator API's field map.
      for (const [query, message] of [
        ['limit=1.0', 'must be an integer'],
        ['limit=0', 'must be greater than or equal to 1'],
        ['limit=201', 'must be less than or equal to 200'],
      ]) {
        const res = await s.admin('GET', `/audit-log?${query}`);
        expect(res.body, query).toEqual({ errors: { bad_request: { limit: [message] } } });
      }
      expect((await s.admin('GET', '/audit-log?before=1.5')).status).toBe(400);
      expect((await s.admin('GET', '/webhooks?merchant_id=1.0')).status).toBe(400);
      expect((await s.admin('GET', '/webhooks?merchant_id=1')).status).toBe(200);
    });
  });

  describe('defect 6: the credit primitive tops up short MED blocks', () => {
    it('a new credit path (a bare ledger credit to available) tops up a short block without calling coverShortBlocks', async () => {
      const m = await merchantWithKey(s, { depositCents: 0 });
      const original = await received(s, m, 4000, PAYER);
      const out = await m.client.post('/pix/cash-out', { amount: 3000, pix_key: await foreignKey(s) });
      expect(out.status).toBe(200);
      await waitFor(() => balances(s.ctx.db, m.accountId), (b) => b.pending === 0);
      const infraction = (await reportInfraction(s, { end_to_end_id: original.end_to_end_id })).body;
      expect(infraction).toMatchObject({ amount: 400_000, blocked_amount: 100_000 });
      // A credit path that knows nothing about MED: only the ledger primitive.
      await s.ctx.db.transaction((tx) =>
        post(tx, {
          kind: 'tef_in',
          reference: `tef-${m.accountId}`,
          postings: [
            { book: INSTITUTION_BOOK.funding, amount: -250_000 },
            { book: { accountId: m.accountId, book: 'available' }, amount: 250_000 },
          ],
        }),
      );
      expect((await m.client.get(`/med/${infraction.id}`)).body.blocked_amount).toBe(350_000);
      expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 0, blocked: 350_000, pending: 0 });
    });
  });
});
