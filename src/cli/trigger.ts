import { randomBytes } from 'node:crypto';
import { Pixgate, PixgateError } from '@pixgate/sdk';
import { loadCredentials, requireAdmin, requireKey } from './credentials.js';
import { EXIT, paint, UsageError, type Args, type CliIo } from './io.js';

/** A receiver at another institution (the simulator's directory); a valid CPF. */
const RECEIVER = { name: 'Maria Recebedora', document: '52998224725', ispb: '18236120' };

interface Ctx {
  sdk: Pixgate;
  sandbox: (method: string, path: string, body?: unknown) => Promise<any>;
  admin: (method: string, path: string, body?: unknown) => Promise<any>;
  accountId: number;
  note: (text: string) => void;
}

type Scenario = { events: string[]; describe: string; run: (c: Ctx) => Promise<Record<string, unknown>> };

async function foreignKey(c: Ctx, behavior: string, fraudFlagged = false): Promise<string> {
  const key = `cli-${randomBytes(5).toString('hex')}@example.com`;
  await c.sandbox('POST', '/dict/keys', { key, type: 'email', ...RECEIVER, behavior, ...(fraudFlagged ? { fraud_flagged: true } : {}) });
  return key;
}

async function cashOut(c: Ctx, behavior: string, fraudFlagged = false) {
  const key = await foreignKey(c, behavior, fraudFlagged);
  return c.sdk.pix.cashOut({ amount: 1234, pix_key: key, pix_key_type: 'email', description: 'pixgate trigger' });
}

async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, what: string, ms = 30_000): Promise<T> {
  const deadline = performance.now() + ms;
  for (;;) {
    const v = await read();
    if (done(v)) return v;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function inbound(c: Ctx, cents = 5000) {
  return c.sandbox('POST', '/pix/inbound', { account_id: c.accountId, amount: cents, payer_name: 'Carlos Pagador' });
}

async function charge(c: Ctx, expiresIn?: number) {
  const keys = await c.sdk.pix.keys();
  if (!keys.data.some((k) => k.status === 'active')) await c.admin('POST', '/pix-keys', { account_id: c.accountId, type: 'evp' });
  return c.sdk.pix.createCharge({ amount: 1590, description: 'pixgate trigger', ...(expiresIn ? { expires_in: expiresIn } : {}) });
}

export const SCENARIOS: Record<string, Scenario> = {
  'payout.confirmed': {
    events: ['pix.payout.processing', 'pix.payout.confirmed'],
    describe: 'a cash-out of R$ 12,34 to a key that settles',
    run: async (c) => ({ transaction_id: (await cashOut(c, 'settle')).transaction_id }),
  },
  'payout.failed': {
    events: ['pix.payout.processing', 'pix.payout.failed'],
    describe: 'a cash-out to a key whose bank rejects it',
    run: async (c) => ({ transaction_id: (await cashOut(c, 'reject')).transaction_id }),
  },
  'payout.held': {
    events: ['pix.payout.processing', 'pix.payout.held'],
    describe: 'a cash-out the receiving side holds without an outcome',
    run: async (c) => ({ transaction_id: (await cashOut(c, 'hold')).transaction_id }),
  },
  'payout.queued': {
    events: ['pix.payout.queued', 'pix.payout.processing', 'pix.payout.confirmed'],
    describe: 'a cash-out to a fraud-flagged key: queued by protection, then released',
    run: async (c) => ({ transaction_id: (await cashOut(c, 'settle', true)).transaction_id }),
  },
  'payout.returned': {
    events: ['pix.payout.confirmed', 'pix.payout.returned'],
    describe: 'a settled cash-out that the receiver returns',
    run: async (c) => {
      const out = await cashOut(c, 'settle');
      await until(() => c.sdk.transaction(out.transaction_id), (t) => t.status === 'completed', 'the cash-out to settle');
      await c.sandbox('POST', `/payouts/${out.transaction_id}/return`, {});
      return { transaction_id: out.transaction_id };
    },
  },
  'pix.inbound': {
    events: ['pix.charge.paid'],
    describe: 'a PIX of R$ 50,00 received from another bank',
    run: async (c) => inbound(c),
  },
  'refund.completed': {
    events: ['pix.charge.paid', 'pix.refund.completed'],
    describe: 'a PIX received, then refunded in part',
    run: async (c) => {
      const inb = await inbound(c);
      const refund = await c.sdk.pix.refund({ original_transaction_id: inb.transaction_id, amount: 1000 });
      return { original_transaction_id: inb.transaction_id, refund_transaction_id: refund.transaction_id };
    },
  },
  'refund.failed': {
    events: ['pix.charge.paid', 'pix.refund.failed'],
    describe: 'a refund with a reason code the central bank refuses',
    run: async (c) => {
      const inb = await inbound(c);
      const refund = await c.sdk.pix.refund({ original_transaction_id: inb.transaction_id, amount: 1000, reason: 'ZZ99' });
      return { original_transaction_id: inb.transaction_id, refund_transaction_id: refund.transaction_id };
    },
  },
  'charge.paid': {
    events: ['pix.charge.created', 'pix.charge.paid'],
    describe: 'a charge (BR Code) created and paid by the sandbox payer',
    run: async (c) => {
      const ch = await charge(c);
      await c.sandbox('POST', '/pix/pay', { emv: ch.emv });
      return { transaction_id: ch.transaction_id };
    },
  },
  'charge.expired': {
    events: ['pix.charge.created', 'pix.charge.expired'],
    describe: 'a charge of 60 s (the shortest expiry), then the sandbox clock advanced 60 s: it expires now',
    run: async (c) => {
      const ch = await charge(c, 60);
      const clock = await c.sandbox('POST', '/clock/advance', { seconds: 60 });
      c.note(`the sandbox clock moved 60 s for the whole installation (now ${clock.now}); pix.charge.expired fires at once`);
      return { transaction_id: ch.transaction_id, expires_at: ch.expires_at };
    },
  },
  'infraction.created': {
    events: ['pix.charge.paid', 'pix.infraction.created', 'pix.refund.requested'],
    describe: 'a PIX received, then disputed through MED (amount blocked)',
    run: async (c) => {
      const inb = await inbound(c);
      const inf = await c.sandbox('POST', '/infractions', { end_to_end_id: inb.end_to_end_id });
      return { infraction_id: inf.id, transaction_id: inb.transaction_id };
    },
  },
  'infraction.resolved': {
    events: ['pix.charge.paid', 'pix.infraction.created', 'pix.refund.requested', 'pix.infraction.resolved', 'pix.refund.completed'],
    describe: 'a MED dispute decided against the payer (the block is released)',
    run: async (c) => {
      const inb = await inbound(c);
      const inf = await c.sandbox('POST', '/infractions', { end_to_end_id: inb.end_to_end_id });
      await c.sandbox('POST', `/infractions/${inf.id}/resolve`, { decision: 'rejected' });
      return { infraction_id: inf.id, transaction_id: inb.transaction_id };
    },
  },
  'webhook.test': {
    events: ['webhook.test'],
    describe: 'a test event to each webhook of the key (register one first)',
    run: async (c) => {
      const hooks = await c.sdk.webhooks.list();
      if (hooks.length === 0) throw new UsageError('webhook.test is fired for registered webhooks and this key has none (pixgate api POST /webhooks -d \'{"url": …}\')');
      for (const h of hooks) await c.admin('POST', `/webhooks/${h.id}/test`);
      return { webhooks: hooks.map((h) => h.id) };
    },
  },
};

export function scenarioNames(): string[] {
  return Object.keys(SCENARIOS);
}

/** pixgate trigger <scenario> [--json] — drives the sandbox so that the scenario's events fire. */
export async function triggerCommand(args: Args, io: CliIo): Promise<number> {
  const name = (args.positional[0] ?? '').replace(/^pix\.(?=payout|refund|charge|infraction)/, '');
  const scenario = SCENARIOS[name];
  if (!scenario) throw new UsageError(`usage: pixgate trigger <scenario>; scenarios: ${scenarioNames().join(', ')}`);
  const creds = loadCredentials(args, io);
  const key = requireKey(creds);
  const token = requireAdmin(creds);
  const call = (prefix: string) => async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${creds.url}${prefix}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    const parsed = text ? JSON.parse(text) : null;
    if (res.status >= 300) throw new PixgateError(`${method} ${prefix}${path}: HTTP ${res.status} ${text}`, res.status, 'sandbox_error', res.headers.get('x-request-id'), parsed);
    return parsed;
  };
  const sdk = new Pixgate({ baseUrl: creds.url, ...key, breaker: false });
  const notes: string[] = [];
  const p = paint(io);
  try {
    const accountId = (await sdk.balance()).account_id;
    const result = await scenario.run({ sdk, sandbox: call('/api/sandbox'), admin: call('/api/admin'), accountId, note: (t) => notes.push(t) });
    if (args.flags.has('json')) io.stdout(JSON.stringify({ scenario: name, events: scenario.events, ...result, notes }) + '\n');
    else {
      io.stdout(`${p.green('Triggered')} ${p.bold(name)}: ${scenario.describe}\n`);
      io.stdout(`  events: ${scenario.events.join(' → ')}\n`);
      for (const [k, v] of Object.entries(result)) io.stdout(`  ${k}: ${Array.isArray(v) ? v.join(', ') : v}\n`);
      for (const n of notes) io.stdout(`  ${p.dim(n)}\n`);
    }
    return EXIT.ok;
  } catch (err) {
    if (err instanceof UsageError) throw err;
    if (err instanceof PixgateError && err.status !== null) {
      io.stderr(`pixgate: ${name} failed: ${err.message}${err.requestId ? ` (request ${err.requestId})` : ''}\n`);
      return EXIT.apiError;
    }
    io.stderr(`pixgate: could not reach ${creds.url}: ${(err as Error).message}\n`);
    return EXIT.unreachable;
  }
}
