import client from 'prom-client';
import type { Database } from '../db/db.js';
import type { BatchObserver } from '../lib/batcher.js';
import { monotonicNow } from '../lib/clock.js';

/**
 * Operational metrics of one pixgate process (docs/metrics.md). The only module that knows
 * prom-client: the shared mechanisms call its small hooks —
 *
 *   HTTP         an onResponse hook (app.ts): requests and latency by route pattern and status,
 *                rate-limit rejections (429) and idempotency replays (x-idempotent-replay)
 *   rail         `railCall`, called by the rail's decorator (src/rail/instrumented.ts): latency
 *                and outcome of every call
 *   outbox       the webhook dispatcher reports each event it fans out (once, after commit):
 *                cash-outs, refunds, TEFs, charges and MED by outcome come from the event names
 *   webhooks     the delivery sender reports each attempt (outcome, latency)
 *   batches      each group-commit Batcher reports its batches (items, wait, run) by name
 *   database     pool in use / idle / waiting and statements sent by source, read at scrape time
 *   backlogs     webhook backlog, age of the oldest undelivered event and outbox lag, read from the
 *                database at scrape time (indexed queries)
 *   process      prom-client's default metrics (memory, CPU, event-loop lag, GC)
 *
 * Each server gets its own Registry (tests run several in one process). With WEB_CONCURRENCY > 1
 * the registry is handed to prom-client's cluster aggregator, and the primary answers the scrape on
 * METRICS_PORT with the sum over workers (gauges read from the shared database use `max`).
 */
export const PREFIX = 'pixgate_';

/** Business families counted from outbox events: event prefix → family name. */
const FAMILIES: ReadonlyArray<readonly [string, string]> = [
  ['pix.payout.', 'cash_outs'],
  ['pix.refund.', 'refunds'],
  ['tef.transfer.', 'tef_transfers'],
  ['pix.charge.', 'charges'],
  ['pix.infraction.', 'infractions'],
];

export class Metrics {
  readonly registry: client.Registry;
  private readonly httpRequests: client.Counter<'method' | 'route' | 'status'>;
  private readonly httpDuration: client.Histogram<'method' | 'route' | 'status'>;
  private readonly rateLimited: client.Counter<'route'>;
  private readonly replays: client.Counter<'route'>;
  private readonly events: client.Counter<'event'>;
  private readonly business: Map<string, client.Counter<'outcome'>>;
  private readonly railDuration: client.Histogram<'operation' | 'outcome'>;
  private readonly webhookAttempts: client.Counter<'outcome'>;
  private readonly webhookDeliveries: client.Counter<'outcome'>;
  private readonly webhookDuration: client.Histogram<'outcome'>;
  private readonly batchItems: client.Histogram<'batcher'>;
  private readonly batchSeconds: client.Histogram<'batcher' | 'phase'>;
  private db: Database | undefined;
  private redis: { status: string } | undefined;

  // Longer than 70 lines because it is the flat list of every metric this process exports, one declaration after another.
  constructor(options: { defaultMetrics?: boolean } = {}) {
    const registry = (this.registry = new client.Registry());
    if (options.defaultMetrics !== false) client.collectDefaultMetrics({ register: registry, prefix: PREFIX, eventLoopMonitoringPrecision: 20 });
    const registers = [registry];
    this.httpRequests = new client.Counter({
      name: `${PREFIX}http_requests_total`,
      help: 'HTTP requests answered, by method, route pattern and status',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.httpDuration = new client.Histogram({
      name: `${PREFIX}http_request_duration_seconds`,
      help: 'HTTP request latency, by method, route pattern and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.rateLimited = new client.Counter({ name: `${PREFIX}rate_limit_rejections_total`, help: 'Requests refused with 429 by a rate limiter, by route pattern', labelNames: ['route'], registers });
    this.replays = new client.Counter({ name: `${PREFIX}idempotency_replays_total`, help: 'Stored answers replayed for a repeated Idempotency-Key, by route pattern', labelNames: ['route'], registers });
    this.events = new client.Counter({ name: `${PREFIX}events_total`, help: 'Events written to the outbox (counted when fanned out, after commit), by event', labelNames: ['event'], registers });
    this.business = new Map(
      FAMILIES.map(([prefix, family]) => [
        prefix,
        new client.Counter({ name: `${PREFIX}${family}_total`, help: `${family.replace('_', ' ')} by outcome (the last part of their ${prefix}* event)`, labelNames: ['outcome'], registers }),
      ]),
    );
    this.railDuration = new client.Histogram({
      name: `${PREFIX}rail_request_duration_seconds`,
      help: 'Latency of calls to the PIX rail, by operation and outcome',
      labelNames: ['operation', 'outcome'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.webhookAttempts = new client.Counter({ name: `${PREFIX}webhook_attempts_total`, help: 'Webhook delivery attempts, by result (ok, error)', labelNames: ['outcome'], registers });
    this.webhookDeliveries = new client.Counter({
      name: `${PREFIX}webhook_deliveries_total`,
      help: 'Webhook delivery attempts by what followed: delivered, retry (scheduled again), failed (retries exhausted), released (stopped mid-attempt)',
      labelNames: ['outcome'],
      registers,
    });
    this.webhookDuration = new client.Histogram({
      name: `${PREFIX}webhook_attempt_duration_seconds`,
      help: 'Latency of webhook delivery attempts',
      labelNames: ['outcome'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.batchItems = new client.Histogram({
      name: `${PREFIX}batch_items`,
      help: 'Items per group-commit batch (src/lib/batcher.ts), by batcher',
      labelNames: ['batcher'],
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 500],
      registers,
    });
    this.batchSeconds = new client.Histogram({
      name: `${PREFIX}batch_duration_seconds`,
      help: 'Group-commit batches, by batcher and phase: wait (its first item queued behind running batches) and run (the statement or transaction)',
      labelNames: ['batcher', 'phase'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    });

    // Read at scrape time.
    const self = this;
    new client.Gauge({
      name: `${PREFIX}db_pool_connections`,
      help: 'Database pool connections by state (in_use, idle, waiting = callers queued for a connection)',
      labelNames: ['state'],
      registers,
      collect() {
        const s = self.db?.poolStats?.();
        if (!s) return;
        this.set({ state: 'in_use' }, s.total - s.idle);
        this.set({ state: 'idle' }, s.idle);
        this.set({ state: 'waiting' }, s.waiting);
      },
    });
    new client.Gauge({
      name: `${PREFIX}redis_up`,
      help: 'Whether the Redis connection is ready (1) or down, hung or reconnecting (0): requests still work, with the rate limiter open and signature v2 answered 503; absent without REDIS_URL or REDIS_SENTINELS',
      registers,
      aggregator: 'min', // a cluster reports 0 when any worker has lost its Redis
      collect() {
        if (self.redis) this.set(self.redis.status === 'ready' ? 1 : 0);
      },
    });
    // The database layer counts statements in plain integers (src/db); the counter catches up with
    // them at scrape time, so counting costs the query path one increment and no label lookup.
    const seen = new Map<string, number>();
    new client.Counter({
      name: `${PREFIX}db_statements_total`,
      help: 'Database statements sent, by source: request (HTTP requests), background (workers), rail (the simulated rail), listen (LISTEN bookkeeping); BEGIN/COMMIT count',
      labelNames: ['pool'],
      registers,
      collect() {
        for (const [pool, n] of Object.entries(self.db?.statements() ?? {})) {
          const delta = n - (seen.get(pool) ?? 0);
          seen.set(pool, n);
          this.inc({ pool }, Math.max(0, delta)); // 0 still shows the series
        }
      },
    });
    const backlog = { pending: 0, oldestAge: 0, outboxLag: 0, outboxPending: 0 };
    // The gauges below share one read per scrape (prom-client collects them concurrently).
    let reading: { at: number; done: Promise<void> } | undefined;
    const readBacklog = () => {
      if (!self.db) return Promise.resolve();
      if (reading && monotonicNow() - reading.at < 250) return reading.done;
      const db = self.db;
      const done = (async () => {
        const [d] = await db.query<{ pending: number; oldest: Date | null }>(
          `SELECT count(*)::bigint AS pending, min(created_at) AS oldest FROM webhook_deliveries WHERE status = 'pending'`,
        );
        const [o] = await db.query<{ oldest: Date | null; pending: number }>(
          `SELECT (SELECT o.created_at FROM outbox_pending p JOIN outbox_events o ON o.id = p.id ORDER BY p.id LIMIT 1) AS oldest,
                  (SELECT count(*)::bigint FROM outbox_pending) AS pending`,
        );
        const now = Date.now();
        backlog.pending = d?.pending ?? 0;
        backlog.oldestAge = d?.oldest ? Math.max(0, (now - d.oldest.getTime()) / 1000) : 0;
        backlog.outboxLag = o?.oldest ? Math.max(0, (now - o.oldest.getTime()) / 1000) : 0;
        backlog.outboxPending = o?.pending ?? 0;
      })();
      reading = { at: monotonicNow(), done };
      return done;
    };
    const dbGauge = (name: string, help: string, value: () => number) =>
      new client.Gauge({
        name: `${PREFIX}${name}`,
        help,
        registers,
        aggregator: 'max', // every worker reads the same database
        async collect() {
          await readBacklog();
          this.set(value());
        },
      });
    dbGauge('webhook_backlog', 'Webhook deliveries not yet delivered or failed for good (pending)', () => backlog.pending);
    dbGauge('webhook_oldest_undelivered_age_seconds', 'Age of the oldest pending webhook delivery', () => backlog.oldestAge);
    dbGauge('outbox_lag_seconds', 'Age of the oldest event not yet fanned out to webhooks', () => backlog.outboxLag);
    dbGauge('outbox_pending', 'Events not yet fanned out to webhooks', () => backlog.outboxPending);
  }

  /** The database the scrape-time gauges read. */
  attachDatabase(db: Database) {
    this.db = db;
  }

  /** The Redis connection whose state `pixgate_redis_up` reports. */
  attachRedis(redis: { status: string }) {
    this.redis = redis;
  }

  // ---- hooks ----

  /** The `observe` hook of a Batcher named `batcher` (a label: cash_out_reserve, balance_read…). */
  batchObserver(batcher: string): BatchObserver {
    const items = this.batchItems.labels({ batcher });
    const waited = this.batchSeconds.labels({ batcher, phase: 'wait' });
    const ran = this.batchSeconds.labels({ batcher, phase: 'run' });
    return (b) => {
      items.observe(b.items);
      waited.observe(b.waitedMs / 1000);
      ran.observe(b.ranMs / 1000);
    };
  }

  /** One answered HTTP request (`route`: the route pattern, never the raw URL). */
  httpRequest(method: string, route: string, status: number, seconds: number, replayed: boolean) {
    const labels = { method, route, status: String(status) };
    this.httpRequests.inc(labels);
    this.httpDuration.observe(labels, seconds);
    if (status === 429) this.rateLimited.inc({ route });
    if (replayed) this.replays.inc({ route });
  }

  /** Events fanned out by the outbox dispatcher (each exactly once, after its transaction committed). */
  eventsDispatched(events: readonly string[]) {
    for (const event of events) {
      this.events.inc({ event });
      for (const [prefix, counter] of this.business) {
        if (event.startsWith(prefix)) counter.inc({ outcome: event.slice(prefix.length) });
      }
    }
  }

  /** One webhook delivery attempt and what followed it. */
  webhookAttempt(ok: boolean, next: 'delivered' | 'retry' | 'failed' | 'release', seconds: number) {
    const outcome = ok ? 'ok' : 'error';
    this.webhookAttempts.inc({ outcome });
    this.webhookDeliveries.inc({ outcome: next === 'release' ? 'released' : next });
    this.webhookDuration.observe({ outcome }, seconds);
  }

  railCall(operation: string, outcome: string, seconds: number) {
    this.railDuration.observe({ operation, outcome }, seconds);
  }

  async text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
