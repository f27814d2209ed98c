import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyRequest } from 'fastify';
import { checkOperatorPassword, checkOperatorTotp, countOperators, createOperator, disableOperator, OPERATOR_CAPABILITIES, operatorMay } from '../../src/auth/operators.js';
import { totpCode } from '../../src/auth/totp.js';
import { auditedWrite } from '../../src/console/audit.js';
import type { AppContext } from '../../src/context.js';
import { createMerchant, deposit } from '../../src/merchants/service.js';
import { BACKENDS, openTestDatabase, type TestDatabase } from '../helpers/db.js';
import { validCnpj } from '../helpers/fixtures.js';

const PASSWORD = 'uma senha bem comprida';

describe('console roles (docs/console.md)', () => {
  it('gives each role the table of capabilities', () => {
    expect(OPERATOR_CAPABILITIES.owner).toEqual(['read', 'deposit', 'limits', 'keys', 'med:act', 'webhooks:act', 'audit:read', 'operators:manage', 'rail:simulate']);
    expect(operatorMay('operations', 'rail:simulate')).toBe(true);
    for (const role of ['support', 'compliance'] as const) expect(operatorMay(role, 'rail:simulate')).toBe(false);
    expect(operatorMay('support', 'med:act')).toBe(false);
    expect(operatorMay('compliance', 'med:act')).toBe(false);
    expect(operatorMay('support', 'limits')).toBe(false);
    expect(operatorMay('compliance', 'limits')).toBe(false);
    expect(operatorMay('operations', 'keys')).toBe(true);
    for (const role of ['support', 'compliance'] as const) expect(operatorMay(role, 'keys')).toBe(false);
    expect(operatorMay('operations', 'deposit')).toBe(true);
    expect(operatorMay('operations', 'audit:read')).toBe(false);
    expect(operatorMay('support', 'deposit')).toBe(false);
    expect(operatorMay('support', 'webhooks:act')).toBe(true);
    expect(operatorMay('compliance', 'webhooks:act')).toBe(false);
    expect(operatorMay('compliance', 'audit:read')).toBe(true);
    for (const role of ['operations', 'support', 'compliance'] as const) expect(operatorMay(role, 'operators:manage')).toBe(false);
  });
});

describe.each(BACKENDS)('console operators on %s', (backend) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(backend);
  }, 60_000);
  afterAll(async () => t?.close());

  it('bootstraps one owner even when two bootstraps race, and refuses a second', async () => {
    const results = await Promise.allSettled([
      createOperator(t.db, { username: 'alice', password: PASSWORD, role: 'owner', createdBy: 'admin-token:x', onlyFirst: true }),
      createOperator(t.db, { username: 'bob', password: PASSWORD, role: 'owner', createdBy: 'admin-token:x', onlyFirst: true }),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(await countOperators(t.db)).toBe(1);
    await expect(createOperator(t.db, { username: 'carol', password: PASSWORD, role: 'owner', createdBy: 'x', onlyFirst: true })).rejects.toMatchObject({ code: 'conflict' });
  });

  it('refuses a short password, a bad username and a taken one', async () => {
    await expect(createOperator(t.db, { username: 'dave', password: 'short', role: 'support', createdBy: 'x' })).rejects.toMatchObject({ code: 'bad_request', fields: { password: [expect.stringContaining('12')] } });
    await expect(createOperator(t.db, { username: 'Dave <b>', password: PASSWORD, role: 'support', createdBy: 'x' })).rejects.toMatchObject({ code: 'bad_request' });
    await createOperator(t.db, { username: 'erin', password: PASSWORD, role: 'support', createdBy: 'x' });
    await expect(createOperator(t.db, { username: 'erin', password: PASSWORD, role: 'support', createdBy: 'x' })).rejects.toMatchObject({ code: 'conflict' });
  });

  it('checks the password (scrypt, stored hashed) and accepts a TOTP code once', async () => {
    const { operator, totpSecret } = await createOperator(t.db, { username: 'frank', password: PASSWORD, role: 'compliance', createdBy: 'x' });
    expect(operator.password_hash).toMatch(/^scrypt\$/);
    expect(await checkOperatorPassword(t.db, 'frank', 'wrong password here')).toBeUndefined();
    expect(await checkOperatorPassword(t.db, 'nobody', PASSWORD)).toBeUndefined();
    const row = (await checkOperatorPassword(t.db, 'frank', PASSWORD))!;
    expect(row.totp_enabled).toBe(false);
    const now = new Date();
    const code = totpCode(totpSecret, now);
    expect(await checkOperatorTotp(t.db, row, '000000', now)).toBe(code === '000000');
    expect(await checkOperatorTotp(t.db, row, code, now)).toBe(true);
    // The same code again (a replay, even by a reader of the old row) is refused.
    expect(await checkOperatorTotp(t.db, row, code, now)).toBe(false);
    const after = (await checkOperatorPassword(t.db, 'frank', PASSWORD))!;
    expect(after.totp_enabled).toBe(true);
    expect(await checkOperatorTotp(t.db, after, code, now)).toBe(false);
  });

  it('disables an operator and ends their sessions; never oneself nor the last owner', async () => {
    const owner = (await checkOperatorPassword(t.db, (await t.db.query<{ username: string }>(`SELECT username FROM console_operators WHERE role = 'owner'`))[0]!.username, PASSWORD))!;
    const { operator } = await createOperator(t.db, { username: 'gina', password: PASSWORD, role: 'operations', createdBy: 'x' });
    await t.db.query(`INSERT INTO console_sessions (token_hash, operator_id, csrf_token, created_at, expires_at) VALUES ('h', $1, 'c', now(), now() + interval '1 hour')`, [operator.id]);
    await expect(disableOperator(t.db, owner.id, owner.id)).rejects.toMatchObject({ code: 'conflict' });
    const { operator: second } = await createOperator(t.db, { username: 'hugo', password: PASSWORD, role: 'owner', createdBy: 'x' });
    await disableOperator(t.db, second.id, owner.id);
    await expect(disableOperator(t.db, owner.id, operator.id)).rejects.toMatchObject({ code: 'conflict', message: expect.stringContaining('last active owner') });
    expect((await disableOperator(t.db, operator.id, owner.id)).status).toBe('disabled');
    expect(await t.db.query('SELECT 1 FROM console_sessions WHERE operator_id = $1', [operator.id])).toHaveLength(0);
    expect(await checkOperatorPassword(t.db, 'gina', PASSWORD)).toBeUndefined();
  });

  it("writes the operator's audit row in the deposit's own transaction: no row, no deposit", async () => {
    const { account } = await createMerchant(t.db, { name: 'Loja', document: validCnpj() });
    const clock = { now: () => new Date() };
    const ctx = { db: t.db, clock, wallClock: clock, config: { trustedProxies: [] } } as unknown as AppContext;
    const req = { socket: { remoteAddress: '127.0.0.1' }, headers: {}, method: 'POST', routeOptions: { url: '/console/accounts/:id/deposit' }, url: '/x', id: 'req-1', log: { error() {} } } as unknown as FastifyRequest;
    const run = (key: string) => () => deposit(t.db, clock, { accountId: account.id, amountCents: 500, description: 'reason', idempotencyKey: key });
    const deposits = async () => (await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM transactions WHERE account_id = $1`, [account.id]))[0]!.n;

    const done = await auditedWrite(ctx, req, 'operator:alice', { account_id: account.id }, run('k1'), (d) => ({ transaction_id: d.transactionId }));
    const [row] = await t.db.query<{ actor: string; status: number; target: Record<string, unknown> }>(`SELECT actor, status, target FROM admin_audit_log WHERE request_id = 'req-1'`);
    expect(row).toMatchObject({ actor: 'operator:alice', status: 200, target: { account_id: account.id, transaction_id: done.transactionId } });
    expect(await deposits()).toBe(1);

    // An audit row that cannot be written (a target JSON cannot hold) rolls the deposit back.
    const req2 = { ...req, id: 'req-2' } as unknown as FastifyRequest;
    await expect(auditedWrite(ctx, req2, 'operator:alice', { bad: 1n }, run('k2'))).rejects.toThrow();
    expect(await deposits()).toBe(1);

    // A refused write is audited with its status, and changed nothing.
    const req3 = { ...req, id: 'req-3' } as unknown as FastifyRequest;
    await expect(auditedWrite(ctx, req3, 'operator:alice', {}, () => deposit(t.db, clock, { accountId: 999_999, amountCents: 1 }))).rejects.toMatchObject({ code: 'not_found' });
    const [refused] = await t.db.query<{ status: number }>(`SELECT status FROM admin_audit_log WHERE request_id = 'req-3'`);
    expect(refused!.status).toBe(404);
  });
});
