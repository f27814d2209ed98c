import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validCnpj } from '../helpers/fixtures.js';
import { BACKENDS } from '../helpers/db.js';
import { startTestServer, TEST_ADMIN_TOKEN, type TestServer } from '../helpers/server.js';

/**
 * Issue 24, item 18: the operator audit row commits with the operation, never after it (it used to
 * be written after the answer, best effort: an operation could commit without its row). Every
 * operator write — admin and sandbox — has exactly one row with the status answered; an operation
 * whose row cannot be written rolls back and is answered as failed.
 */
async function operator(server: TestServer, api: 'admin' | 'sandbox', method: string, path: string, body?: unknown) {
  const requestId = `audit-${randomBytes(6).toString('hex')}`;
  const res = await fetch(`${server.url}/api/${api}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${TEST_ADMIN_TOKEN}`,
      'x-request-id': requestId,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, requestId };
}

interface Row {
  status: number | null;
  route: string;
  method: string;
  target: Record<string, unknown>;
}

async function rowsOf(server: TestServer, requestId: string): Promise<Row[]> {
  return server.ctx.db.query<Row>('SELECT status, route, method, target FROM admin_audit_log WHERE request_id = $1', [requestId]);
}

describe.each(BACKENDS)('operator audit rows on %s', (backend) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({ backend });
  });
  afterAll(async () => server?.close());

  it('every operator write, admin and sandbox, succeeded or refused, has exactly one row with its answered status', async () => {
    const merchant = await operator(server, 'admin', 'POST', '/merchants', { name: 'Loja Auditada', document: validCnpj() });
    expect(merchant.status).toBe(201);
    const accountId = merchant.body.account_id as number;
    const writes = [
      merchant,
      await operator(server, 'admin', 'POST', '/api-keys', { merchant_id: merchant.body.merchant_id, account_id: accountId, permissions: ['account:read'], ip_whitelist: ['127.0.0.1'] }),
      await operator(server, 'admin', 'POST', `/accounts/${accountId}/deposits`, { amount: 10_000 }),
      await operator(server, 'admin', 'PATCH', `/accounts/${accountId}`, { cash_out_fee_cents: 10 }),
      await operator(server, 'admin', 'POST', '/central-keys', { name: 'ERP' }),
      await operator(server, 'sandbox', 'POST', '/dict/keys', { key: `k${randomBytes(4).toString('hex')}@example.com`, type: 'email', name: 'Maria', document: '52998224725', ispb: '18236120' }),
      await operator(server, 'sandbox', 'POST', '/pix/inbound', { account_id: accountId, amount: 500, payer_name: 'Carlos' }),
      // Refused writes: nothing committed, the row still says who tried what.
      await operator(server, 'admin', 'POST', `/accounts/${accountId}/deposits`, { amount: -1 }),
      await operator(server, 'admin', 'POST', '/accounts/999999/deposits', { amount: 100 }),
    ];
    const key = writes[1]!;
    expect(key.status).toBe(201);
    writes.push(await operator(server, 'admin', 'PATCH', `/api-keys/${key.body.client_id}`, { permissions: ['account:read', 'statement:read'] }));
    writes.push(await operator(server, 'admin', 'DELETE', `/api-keys/${key.body.client_id}`));
    for (const w of writes) {
      const rows = await rowsOf(server, w.requestId);
      expect(rows.map((r) => r.status)).toEqual([w.status]);
    }
    expect(writes.map((w) => w.status).filter((s) => s >= 500)).toEqual([]);
    // The ids of the answer are in the row of the write that created them.
    expect((await rowsOf(server, merchant.requestId))[0]!.target).toMatchObject({ merchant_id: merchant.body.merchant_id, account_id: accountId });
    expect((await rowsOf(server, writes[2]!.requestId))[0]!.target).toMatchObject({ account_id: String(accountId), transaction_id: writes[2]!.body.transaction_id });
  });

  it('an operation whose audit row cannot be written rolls back and is answered as failed', async () => {
    const merchant = await operator(server, 'admin', 'POST', '/merchants', { name: 'Loja Sem Auditoria', document: validCnpj() });
    const accountId = merchant.body.account_id as number;
    const balance = async () => (await operator(server, 'admin', 'GET', `/accounts/${accountId}`)).body.balance as number;
    const before = await balance();
    const merchantsBefore = (await server.ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM merchants'))[0]!.n;
    // The audit store refuses every row (as a full disk or a broken constraint would).
    await server.ctx.db.exec(`
      CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit store refuses'; END $$;
      CREATE TRIGGER refuse_audit BEFORE INSERT ON admin_audit_log FOR EACH ROW EXECUTE FUNCTION refuse_audit();`);
    try {
      const deposit = await operator(server, 'admin', 'POST', `/accounts/${accountId}/deposits`, { amount: 10_000 });
      expect(deposit.status).toBe(500);
      const created = await operator(server, 'admin', 'POST', '/merchants', { name: 'Loja Fantasma', document: validCnpj() });
      expect(created.status).toBe(500);
      const patched = await operator(server, 'admin', 'PATCH', `/accounts/${accountId}`, { cash_out_fee_cents: 77 });
      expect(patched.status).toBe(500);
    } finally {
      await server.ctx.db.exec('DROP TRIGGER refuse_audit ON admin_audit_log; DROP FUNCTION refuse_audit()');
    }
    expect(await balance()).toBe(before);
    expect((await server.ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM merchants'))[0]!.n).toBe(merchantsBefore);
    expect((await operator(server, 'admin', 'GET', `/accounts/${accountId}`)).body.cash_out_fee_cents).not.toBe(77);
    // And once the store takes rows again, so do operations.
    const deposit = await operator(server, 'admin', 'POST', `/accounts/${accountId}/deposits`, { amount: 10_000 });
    expect(deposit.status).toBe(201);
    expect((await rowsOf(server, deposit.requestId)).map((r) => r.status)).toEqual([201]);
  });
  it('completing the row names it by id, request id and time: a row that took its id after a failover stays as it is', async () => {
    // The failover, between the operation's commit and its answer: its row is lost (asynchronous
    // replication, or a standby that never confirmed) and the new primary gave the id to another
    // operation's row, not answered yet.
    const db = server.ctx.db as { query: (text: string, params?: unknown[]) => Promise<unknown[]> };
    const query = db.query;
    let other: { id: number; requestId: string } | undefined;
    db.query = async (text: string, params?: unknown[]) => {
      if (other === undefined && text.startsWith('UPDATE admin_audit_log')) {
        other = { id: Number(params![0]), requestId: `other-${randomBytes(6).toString('hex')}` };
        await query.call(db, 'DELETE FROM admin_audit_log WHERE id = $1', [other.id]);
        await query.call(
          db,
          `INSERT INTO admin_audit_log (id, at, actor, client_ip, method, route, target, request_id, status)
           OVERRIDING SYSTEM VALUE VALUES ($1, now(), 'admin', '127.0.0.1', 'POST', '/api/admin/merchants', '{}'::jsonb, $2, NULL)`,
          [other.id, other.requestId],
        );
      }
      return query.call(db, text, params);
    };
    try {
      const merchant = await operator(server, 'admin', 'POST', '/merchants', { name: 'Loja Depois da Falha', document: validCnpj() });
      expect(merchant.status).toBe(201);
    } finally {
      db.query = query;
    }
    expect(other).toBeDefined();
    expect(await rowsOf(server, other!.requestId)).toEqual([{ status: null, route: '/api/admin/merchants', method: 'POST', target: {} }]);
  });
});
