import { randomBytes } from 'node:crypto';
import { catalogEntry } from '../events/catalog.js';
import { Pixgate, PixgateError, type FeedEvent } from '@pixgate/sdk';
import { signDelivery, USER_AGENT } from '../webhooks/http.js';
import { standardWebhookHeaders } from '../webhooks/standardWebhooks.js';
import { loadCredentials, requireKey } from './credentials.js';
import { EXIT, paint, str, UsageError, type Args, type CliIo } from './io.js';

export const FORWARD_TIMEOUT_MS = 10_000;

/** The headers of a real delivery of `e` (src/webhooks/http.ts), so the local receiver verifies it as in production. */
export function deliveryHeaders(secret: string, e: Pick<FeedEvent, 'id' | 'event' | 'body'>, nowMs = Date.now()): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': USER_AGENT,
    'x-service-signature': signDelivery(secret, e.body),
    'x-service-event': e.event,
    'x-service-delivery': e.id,
    'x-service-attempt': '1',
    ...standardWebhookHeaders(secret, e.id, Math.floor(nowMs / 1000), e.body),
  };
}

/**
 * pixgate listen --forward-to URL [--events a,b] [--webhook-secret S] [--after N] [--json]
 * Reads the merchant's live events feed (GET /api/external/events/stream) and POSTs each event to
 * URL signed as a real delivery; one line per event with the local answer. Runs until Ctrl-C.
 */
export async function listenCommand(args: Args, io: CliIo): Promise<number> {
  const target = str(args, 'forward-to');
  if (!target) throw new UsageError('usage: pixgate listen --forward-to URL [--events a,b]');
  try {
    new URL(target);
  } catch {
    throw new UsageError(`--forward-to is not a URL: ${target}`);
  }
  const creds = loadCredentials(args, io);
  const key = requireKey(creds);
  const events = (str(args, 'events') ?? '').split(',').map((e) => e.trim()).filter(Boolean);
  const unknown = events.filter((e) => !catalogEntry(e));
  if (unknown.length) throw new UsageError(`unknown events: ${unknown.join(', ')} (pixgate help listen)`);
  const after = str(args, 'after');
  if (after !== undefined && !/^\d+$/.test(after)) throw new UsageError('--after must be a sequence number');
  const secret = creds.webhookSecret ?? `whsec_${randomBytes(32).toString('base64')}`;
  const json = args.flags.has('json');
  const p = paint(io);
  const client = new Pixgate({ baseUrl: creds.url, ...key, breaker: false, maxRetries: 1_000_000 });

  const ready = `Ready. Forwarding ${events.length ? events.join(', ') : 'every event'} of ${creds.url} to ${target}`;
  let announced = false;
  const onOpen = () => {
    if (announced) return;
    announced = true;
    if (json) io.stdout(JSON.stringify({ ready: true, forward_to: target, events, webhook_secret: secret }) + '\n');
    else {
      io.stdout(`${p.green(ready)}\n`);
      io.stdout(`Signing with webhook secret ${p.bold(secret)}${creds.webhookSecret ? '' : p.dim(' (generated; pass --webhook-secret to keep one)')}\n`);
      io.stdout(p.dim('Ctrl-C to stop.\n'));
    }
  };

  let failures = 0;
  try {
    for await (const e of client.events.stream({ ...(after ? { after: Number(after) } : {}), ...(events.length ? { type: events } : {}), signal: io.signal, onOpen })) {
      const started = performance.now();
      let status: number | null = null;
      let error: string | null = null;
      try {
        const res = await fetch(target, { method: 'POST', headers: deliveryHeaders(secret, e), body: e.body, signal: AbortSignal.any([AbortSignal.timeout(FORWARD_TIMEOUT_MS), io.signal]) });
        status = res.status;
        await res.arrayBuffer();
      } catch (err) {
        if (io.signal.aborted) break;
        const c = (err as { cause?: { code?: string } }).cause?.code;
        error = c ?? (err as Error).message;
      }
      const ms = Math.round(performance.now() - started);
      const ok = status !== null && status >= 200 && status < 300;
      if (!ok) failures++;
      if (json) io.stdout(JSON.stringify({ sequence: e.sequence, id: e.id, event: e.event, status, error, ms }) + '\n');
      else {
        const answer = status !== null ? (ok ? p.green : p.red)(`[${status}]`) : p.red(`[${error}]`);
        io.stdout(`${e.created_at}  ${p.bold(e.event.padEnd(28))} ${answer} POST ${target} ${p.dim(`(${ms} ms, ${e.id})`)}\n`);
      }
    }
  } catch (err) {
    if (io.signal.aborted) return EXIT.ok;
    if (err instanceof PixgateError && err.status !== null) {
      io.stderr(`pixgate: the events stream was refused: HTTP ${err.status} ${err.message}\n`);
      return EXIT.apiError;
    }
    io.stderr(`pixgate: could not reach ${creds.url}: ${(err as Error).message}\n`);
    return EXIT.unreachable;
  }
  return EXIT.ok;
}
