import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Database, Sql } from '../../src/db/db.js';
import { emitEvent } from '../../src/events/outbox.js';
import { createMerchant } from '../../src/merchants/service.js';
import { insertWebhook, type WebhookRow } from '../../src/webhooks/repository.js';

/** One request a receiver got. */
export interface Received {
  headers: IncomingHttpHeaders;
  /** The raw body bytes as received (what the signature covers). */
  raw: Buffer;
  body: any;
  path: string;
  at: number;
}

export type Handler = (req: IncomingMessage, res: ServerResponse, received: Received) => void;

export interface Receiver {
  url: string;
  port: number;
  /** host:port, for WEBHOOK_ALLOWED_HOSTS. */
  hostPort: string;
  received: Received[];
  handler: Handler;
  /** Polls until `predicate` holds (default deadline 15 s). */
  waitFor(predicate: (received: Received[]) => boolean, ms?: number): Promise<void>;
  close(): Promise<void>;
}

export const ok: Handler = (_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
};

/** A real HTTP server on 127.0.0.1 recording every request; `handler` may be swapped at any time. */
export async function startReceiver(handler: Handler = ok): Promise<Receiver> {
  const received: Received[] = [];
  const sockets = new Set<import('node:net').Socket>();
  const r = { handler } as Receiver;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let body: unknown = null;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = raw.toString('utf8');
      }
      const rec: Received = { headers: req.headers, raw, body, path: req.url ?? '', at: Date.now() };
      received.push(rec);
      r.handler(req, res, rec);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  Object.assign(r, {
    url: `http://127.0.0.1:${port}`,
    port,
    hostPort: `127.0.0.1:${port}`,
    received,
    waitFor: (predicate: (received: Received[]) => boolean, ms = 15_000) => waitUntil(() => predicate(received), ms),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
  return r;
}

/** Polls `check` every 25 ms until it returns true, or throws after `ms`. */
export async function waitUntil(check: () => boolean | Promise<boolean>, ms = 15_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * Writes one event to the outbox, as a domain does in the transaction of its state change, so each
 * delivery rule can be tested without the rail simulator (e2e.test.ts uses the real PIX events).
 */
export async function emit(
  db: { transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T> },
  e: { merchantId: number; accountId: number | null; subject: string; event?: string; extra?: Record<string, unknown> },
): Promise<string> {
  return db.transaction((tx) =>
    emitEvent(tx, {
      event: e.event ?? 'pix.charge.paid',
      merchantId: e.merchantId,
      accountId: e.accountId,
      subject: e.subject,
      payload: { status: 'paid', transaction_id: e.subject, amount: 1_000_000, paid_at: '2026-01-02T03:04:05.000Z', ...e.extra },
    }),
  );
}

/**
 * A webhook row written directly (URLs registration would refuse, merchants without API keys):
 * active, HTTP allowed, a fixed secret.
 */
export async function insertTestWebhook(
  db: Database,
  w: { merchantId: number; accountId: number | null; url: string; events?: string[]; clientId?: string | null },
): Promise<WebhookRow> {
  return db.transaction((tx) =>
    insertWebhook(tx, {
      id: crypto.randomUUID(),
      merchantId: w.merchantId,
      accountId: w.accountId,
      clientId: w.clientId ?? null,
      url: w.url,
      events: w.events ?? ['pix.charge.paid'],
      secret: 'test-webhook-secret-0123456789',
      description: null,
      allowInsecure: true,
    }),
  );
}

/** A merchant (and its account) with one webhook to `url` for pix.charge.paid, written directly. */
export async function merchantWithWebhook(db: Database, url: string): Promise<{ merchantId: number; accountId: number }> {
  const { merchant, account } = await createMerchant(db, { name: 'Webhook Test', document: '11444777000161' });
  await insertTestWebhook(db, { merchantId: merchant.id, accountId: account.id, url });
  return { merchantId: merchant.id, accountId: account.id };
}
