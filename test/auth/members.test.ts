import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acceptInvitation, changeMember, checkPassword, checkTotp, enableTotp, findInvitation, findMember, inviteMember, setRequireTotp } from '../../src/auth/members.js';
import type { Actor } from '../../src/auth/merchantAudit.js';
import { hashPassword, verifyPassword } from '../../src/auth/passwords.js';
import { mayManage, ROLE_CAPABILITIES, ROLES } from '../../src/auth/roles.js';
import { totpCode, verifyTotp } from '../../src/auth/totp.js';
import { createMerchant } from '../../src/merchants/service.js';
import { BACKENDS, openTestDatabase, type TestDatabase } from '../helpers/db.js';
import { validCnpj } from '../helpers/fixtures.js';

// RFC 6238, appendix B: the SHA-1 seed "12345678901234567890" (base32 below); its 8-digit codes' last 6 digits.
const RFC_SECRET = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ';

describe('TOTP (src/auth/totp.ts) with a fixed secret and time', () => {
  it('gives the RFC 6238 codes', () => {
    expect(totpCode(RFC_SECRET, new Date(59_000))).toBe('287082');
    expect(totpCode(RFC_SECRET, new Date(1_111_111_109_000))).toBe('081804');
    expect(totpCode(RFC_SECRET, new Date(2_000_000_000_000))).toBe('279037');
  });

  it('accepts a code one step either side, refuses two steps off, malformed codes and a replay', () => {
    const at = new Date(1_111_111_109_000); // step 37037036
    expect(verifyTotp(RFC_SECRET, '081804', at, null)).toBe(37_037_036);
    expect(verifyTotp(RFC_SECRET, '081 804', at, null)).toBe(37_037_036);
    expect(verifyTotp(RFC_SECRET, totpCode(RFC_SECRET, new Date(at.getTime() + 30_000)), at, null)).toBe(37_037_037);
    expect(verifyTotp(RFC_SECRET, totpCode(RFC_SECRET, new Date(at.getTime() - 30_000)), at, null)).toBe(37_037_035);
    expect(verifyTotp(RFC_SECRET, totpCode(RFC_SECRET, new Date(at.getTime() + 60_000)), at, null)).toBeNull();
    expect(verifyTotp(RFC_SECRET, '08180', at, null)).toBeNull();
    expect(verifyTotp(RFC_SECRET, 'abcdef', at, null)).toBeNull();
    expect(verifyTotp(RFC_SECRET, '081804', at, 37_037_036)).toBeNull(); // that step was used
    expect(verifyTotp(RFC_SECRET, '081805', at, null)).toBeNull();
  });
});

describe('roles (src/auth/roles.ts)', () => {
  it('gives each role its capabilities (the table of docs/portal.md)', () => {
    expect(ROLE_CAPABILITIES.viewer).not.toContain('transfer:write');
    expect(ROLE_CAPABILITIES.viewer).not.toContain('keys:read');
    expect(ROLE_CAPABILITIES.finance).toContain('transfer:write');
    expect(ROLE_CAPABILITIES.finance).not.toContain('keys:write');
    expect(ROLE_CAPABILITIES.developer).toEqual(expect.arrayContaining(['keys:read', 'keys:write', 'account:write']));
    expect(ROLE_CAPABILITIES.developer).not.toContain('transfer:write');
    expect(ROLE_CAPABILITIES.support).toContain('payment:write');
    expect(ROLE_CAPABILITIES.support).not.toContain('pix:write');
    expect(ROLE_CAPABILITIES.admin).not.toContain('team:settings');
    expect(ROLE_CAPABILITIES.owner).toContain('team:settings');
    for (const r of ROLES) expect(ROLE_CAPABILITIES[r]).toContain('account:read');
  });

  it('lets only an owner grant, change or remove an owner or an admin', () => {
    expect(mayManage('owner', 'admin', 'owner')).toBe(true);
    expect(mayManage('admin', 'viewer', 'finance')).toBe(true);
    expect(mayManage('admin', null, 'admin')).toBe(false);
    expect(mayManage('admin', 'admin', null)).toBe(false);
    expect(mayManage('admin', 'owner', 'viewer')).toBe(false);
    expect(mayManage('finance', 'viewer', 'viewer')).toBe(false);
    expect(mayManage('developer', null, 'viewer')).toBe(false);
  });
});

describe('passwords (scrypt)', () => {
  it('verifies the right password only, and refuses a malformed hash', async () => {
    const h = await hashPassword('correct horse battery');
    expect(h).toMatch(/^scrypt\$16384\$8\$1\$/);
    expect(await verifyPassword('correct horse battery', h)).toBe(true);
    expect(await verifyPassword('correct horse batterY', h)).toBe(false);
    expect(await verifyPassword('x', 'sha1$abc')).toBe(false);
  });
});

describe.each(BACKENDS)('team members on %s', (backend) => {
  let t: TestDatabase;
  let now = new Date('2026-11-27T12:00:00Z');
  const clock = { now: () => now };
  const deps = () => ({ db: t.db, clock });
  const keyActor: Actor = { type: 'api_key', id: 'cli_x', ip: '127.0.0.1' };
  let merchantId: number;

  beforeAll(async () => {
    t = await openTestDatabase(backend);
    merchantId = Number((await createMerchant(t.db, { name: 'Loja', document: validCnpj() })).merchant.id);
  });
  afterAll(async () => t?.close());

  const activate = async (email: string, role: string, by: Parameters<typeof inviteMember>[2]) => {
    const inv = await inviteMember(deps(), keyActor, by, merchantId, { email, name: email.split('@')[0]!, role });
    return acceptInvitation(deps(), inv.token, 'a long enough password', '127.0.0.1');
  };

  it('the key creates the first owner once; the owner invites; the link works once; the password is checked', async () => {
    const inv = await inviteMember(deps(), keyActor, null, merchantId, { email: 'Dona@Example.com', name: 'Dona', role: 'owner' });
    expect(inv.member).toMatchObject({ email: 'dona@example.com', role: 'owner', status: 'invited' });
    await expect(inviteMember(deps(), keyActor, null, merchantId, { email: 'other@example.com', name: '', role: 'owner' })).rejects.toMatchObject({ code: 'conflict' });
    expect(await findInvitation(t.db, inv.token, now)).toBeDefined();
    await expect(acceptInvitation(deps(), inv.token, 'short', null)).rejects.toMatchObject({ fields: { password: [expect.stringContaining('12')] } });
    const owner = await acceptInvitation(deps(), inv.token, 'a long enough password', null);
    expect(owner.status).toBe('active');
    await expect(acceptInvitation(deps(), inv.token, 'another long password', null)).rejects.toMatchObject({ code: 'not_found' });
    expect(await checkPassword(t.db, 'DONA@example.com', 'a long enough password')).toMatchObject({ id: owner.id });
    expect(await checkPassword(t.db, 'dona@example.com', 'a wrong password!!')).toBeUndefined();
    expect(await checkPassword(t.db, 'nobody@example.com', 'a long enough password')).toBeUndefined();
    await expect(inviteMember(deps(), keyActor, 'owner', merchantId, { email: 'dona@example.com', name: '', role: 'viewer' })).rejects.toMatchObject({ fields: { email: ['is already a member'] } });
    await expect(inviteMember(deps(), keyActor, 'owner', merchantId, { email: 'not-an-email', name: '', role: 'chief' })).rejects.toMatchObject({ fields: { email: expect.any(Array), role: expect.any(Array) } });
  });

  it('an expired invitation does not work', async () => {
    const inv = await inviteMember(deps(), keyActor, 'owner', merchantId, { email: 'late@example.com', name: '', role: 'viewer' });
    const start = now;
    now = new Date(start.getTime() + 8 * 86400_000);
    try {
      expect(await findInvitation(t.db, inv.token, now)).toBeUndefined();
      await expect(acceptInvitation(deps(), inv.token, 'a long enough password', null)).rejects.toMatchObject({ code: 'not_found' });
    } finally {
      now = start;
    }
  });

  it('applies the role rules and keeps the last owner', async () => {
    const [owner] = await t.db.query<{ id: number }>(`SELECT id FROM merchant_members WHERE email = 'dona@example.com'`);
    const admin = await activate('admin@example.com', 'admin', 'owner');
    const viewer = await activate('viewer@example.com', 'viewer', 'admin');
    await expect(inviteMember(deps(), keyActor, 'admin', merchantId, { email: 'a2@example.com', name: '', role: 'admin' })).rejects.toMatchObject({ code: 'conflict' });
    await expect(changeMember(deps(), keyActor, 'admin', merchantId, Number(owner!.id), 'viewer')).rejects.toMatchObject({ code: 'conflict' });
    await expect(changeMember(deps(), keyActor, 'finance', merchantId, viewer.id, 'finance')).rejects.toMatchObject({ code: 'conflict' });
    expect(await changeMember(deps(), keyActor, 'admin', merchantId, viewer.id, 'finance')).toMatchObject({ role: 'finance' });
    await expect(changeMember(deps(), keyActor, 'owner', merchantId, Number(owner!.id), 'admin')).rejects.toMatchObject({ message: expect.stringContaining('last owner') });
    await expect(changeMember(deps(), keyActor, 'owner', merchantId + 1000, viewer.id, null)).rejects.toMatchObject({ code: 'not_found' });
    expect(await changeMember(deps(), keyActor, 'owner', merchantId, admin.id, null)).toMatchObject({ status: 'removed' });
    expect(await checkPassword(t.db, 'admin@example.com', 'a long enough password')).toBeUndefined(); // removed: no sign-in
    const actions = await t.db.query<{ action: string }>('SELECT action FROM merchant_audit_log WHERE merchant_id = $1 ORDER BY id', [merchantId]);
    expect(actions.map((a) => a.action)).toEqual(expect.arrayContaining(['member.invited', 'member.activated', 'member.role_changed', 'member.removed']));
  });

  it('sets up TOTP only with a valid code, checks codes once, and records the owner’s requirement', async () => {
    const m = await activate('totp@example.com', 'viewer', 'owner');
    const at = now;
    expect(await enableTotp(deps(), m, RFC_SECRET, '000000', null)).toBe(false);
    expect(await enableTotp(deps(), m, RFC_SECRET, totpCode(RFC_SECRET, at), null)).toBe(true);
    expect((await findMember(t.db, m.id))!.totp_secret).toBe(RFC_SECRET);
    now = new Date(at.getTime() + 30_000);
    const code = totpCode(RFC_SECRET, now);
    expect(await checkTotp(deps(), m.id, code)).toBe(true);
    expect(await checkTotp(deps(), m.id, code)).toBe(false); // replay
    expect(await checkTotp(deps(), m.id, totpCode(RFC_SECRET, at))).toBe(false); // older than the last used step
    await setRequireTotp(deps(), { type: 'member', id: '1', ip: null }, merchantId, true);
    const [merchant] = await t.db.query<{ require_totp: boolean }>('SELECT require_totp FROM merchants WHERE id = $1', [merchantId]);
    expect(merchant!.require_totp).toBe(true);
    now = at;
  });
});
