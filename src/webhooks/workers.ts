import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Database } from '../db/db.js';
import type { Metrics } from '../metrics/metrics.js';
import type { BackgroundWorker } from '../lib/worker.js';
import { parseAllowedHosts } from './destination.js';
import { HttpDeliverer, type Resolver } from './http.js';
import { EVENT_ALIASES } from './registration.js';
import * as repo from './repository.js';
import { Waker, wakeOn } from '../lib/wakeable.js';
import { monotonicNow } from '../lib/clock.js';
import { CLOCK_CHANNEL } from '../lib/sandboxClock.js';
import { WAKE } from './repository.js';

/**
 * The delivery engine: two background workers per process (with WEB_CONCURRENCY > 1 the dispatcher
 * runs in the cluster's background worker only, src/lib/clusterWakes.ts; the sender everywhere).
 *
 *   webhook-dispatcher  fans new outbox events out to one delivery per matching webhook
 *                       (one statement per batch, taken out of outbox_pending with SKIP LOCKED);
 *                       every few seconds it also repairs subject queues whose head finished
 *                       unnoticed
 *   webhook-sender      claims due deliveries (SKIP LOCKED + a lease), POSTs them, records every
 *                       attempt and schedules retries
 *
 * Any number of processes may run them side by side on one PostgreSQL: a row is only ever held by
 * one of them, and a lease that runs out (process killed mid-delivery) makes the delivery due again.
 */
export interface WebhookWorkerOptions {
  /**
   * How soon the sender looks again when due deliveries are left that it could not claim (held by
   * another worker, or their webhook has no room in this process).
   */
  pollMs?: number;
  /** Longest idle sleep of both loops: the safety net for missed wake-ups (see DEFAULTS). */
  safetyNetMs?: number;
  /** Deliveries in flight per process. */
  concurrency?: number;
  /** Deliveries of one webhook in flight in this process at most. */
  perWebhook?: number;
  /** Outbox events fanned out per statement. */
  dispatchBatch?: number;
  /** Waits before each retry (default: config WEBHOOK_RETRY_SCHEDULE). */
  retryScheduleMs?: readonly number[];
  /** Per-attempt deadline (default: config WEBHOOK_TIMEOUT_MS). */
  timeoutMs?: number;
  /** How long a claimed delivery is held before another worker may take it (default 2 × timeout + 1 s). */
  leaseMs?: number;
  /** On stop, how long in-flight attempts may finish before they are aborted and released. */
  stopGraceMs?: number;
  /** How often the dispatcher repairs subject queues whose head finished unnoticed. */
  repairEveryMs?: number;
  /**
   * Work the dispatcher does before each fan-out, returning how many deliveries it wrote (the API
   * Pix webhooks turn their notices into deliveries here: src/apiPix/pixWebhookBatches.ts).
   */
  beforeDispatch?: () => Promise<number>;
  /** Name resolution for the DNS-rebinding check (tests inject one). */
  resolver?: Resolver;
  /** Random source in [0, 1) for the jitter. */
  random?: () => number;
  workerId?: string;
}

/** What the delivery engine uses (AppContext satisfies it; metrics are optional). */
export interface WorkerDeps {
  db: Database;
  config: Pick<Config, 'webhookTimeoutMs' | 'webhookRetryScheduleMs' | 'webhookAllowedHosts'>;
  log: Logger;
  metrics?: Pick<Metrics, 'eventsDispatched' | 'webhookAttempt'>;
}

export const DEFAULTS = {
  pollMs: 100,
  /**
   * Both loops sleep until woken: the dispatcher by an outbox event written in this process
   * (wakeLocal, after commit) or a notification, the sender by its dispatcher, a notification on
   * `webhook_delivery` or the earliest next_attempt_at it read. This poll only catches what no
   * wake-up announced (an event written by a process without workers, a lost notification).
   */
  safetyNetMs: 10_000,
  concurrency: 64,
  perWebhook: 16,
  dispatchBatch: 200,
  stopGraceMs: 2_000,
  /** A batch that wrote followers (deliveries not ready) is followed by a repair this soon. */
  followerRepairMs: 250,
  /** Least time between two fan-out statements (a wake-up per committed event is gathered). */
  dispatchSpacingMs: 10,
  /** How long a result waits for others to be written with it. */
  recordBatchMs: 2,
  /** How often the dispatcher repairs subject queues whose head finished unnoticed. */
  repairEveryMs: 5_000,
  /** Spread of a retry wait: ±20 %. */
  jitter: 0.2,
} as const;

/** The wait before retry number `step` (1-based), with ±20 % jitter; null when the schedule is exhausted. */
export function retryDelayMs(schedule: readonly number[], step: number, random: () => number = Math.random): number | null {
  const base = schedule[step - 1];
  if (base === undefined) return null;
  return Math.round(base * (1 - DEFAULTS.jitter + 2 * DEFAULTS.jitter * random()));
}

export function webhookWorkers(ctx: WorkerDeps, options: WebhookWorkerOptions = {}): BackgroundWorker[] {
  const sender = new DeliverySender(ctx, options);
  const dispatcher = new OutboxDispatcher(ctx, options, () => sender.wake());
  return [dispatcher, sender];
}

/**
 * A sender alone, for a cluster worker that does not run the dispatcher (src/lib/clusterWakes.ts):
 * the fan-out's NOTIFY wakes it like any other process's, and deliveries go out from every worker
 * (each sender keeps `concurrency` of them in flight).
 */
export function webhookSender(ctx: WorkerDeps, options: WebhookWorkerOptions = {}): BackgroundWorker {
  return new DeliverySender(ctx, options);
}

class OutboxDispatcher implements BackgroundWorker {
  readonly name = 'webhook-dispatcher';
  private stopped = true;
  private loop: Promise<void> | undefined;
  private readonly waker = new Waker();
  private readonly safetyNetMs: number;
  private readonly batch: number;
  private readonly repairEveryMs: number;
  private readonly beforeDispatch: (() => Promise<number>) | undefined;

  constructor(
    private readonly ctx: WorkerDeps,
    options: WebhookWorkerOptions,
    private readonly onDispatched: () => void,
  ) {
    this.beforeDispatch = options.beforeDispatch;
    this.safetyNetMs = options.safetyNetMs ?? DEFAULTS.safetyNetMs;
    this.batch = options.dispatchBatch ?? DEFAULTS.dispatchBatch;
    this.repairEveryMs = options.repairEveryMs ?? DEFAULTS.repairEveryMs;
  }

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.loop = this.run();
  }

  async stop() {
    this.stopped = true;
    this.waker.wake();
    await this.loop;
  }

  private async run() {
    // Woken by events written in this process (wakeLocal) and by notifications on `outbox`;
    // `null` (the listening connection was lost) wakes it too.
    const unsubscribe = await wakeOn(this.ctx.db, [WAKE.outbox], () => this.waker.wake(), this.ctx.log);
    try {
      await this.loop_();
    } finally {
      await unsubscribe();
    }
  }

  private async loop_() {
    // Monotonic: a wall-clock step back made the next tick as far away as the step (issue 24).
    let lastTick = -Infinity;
    // Repairs: on the first tick; soon after a batch that wrote followers (a delivery not ready:
    // its head may have finished in a transaction that could not see it); every repairEveryMs
    // while events flow; and on safety-net ticks when idle.
    let lastRepair = -Infinity;
    let repairAt = 0;
    while (!this.stopped) {
      // Under load every committed event wakes the loop: ticks at most every dispatchSpacingMs
      // gather them in batches (one statement per batch, not per event).
      const wait = lastTick + DEFAULTS.dispatchSpacingMs - monotonicNow();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      lastTick = monotonicNow();
      let more = false;
      try {
        if (this.beforeDispatch && (await this.beforeDispatch()) > 0) this.onDispatched();
        const r = await repo.dispatchOutbox(this.ctx.db, this.batch, EVENT_ALIASES);
        const now = monotonicNow();
        if (r.events > 0) {
          this.ctx.metrics?.eventsDispatched(r.names);
          // The sender has work only if deliveries were written (events no webhook takes make none).
          if (r.deliveries > 0) this.onDispatched();
          repairAt = Math.min(repairAt, now + (r.followers > 0 ? DEFAULTS.followerRepairMs : this.repairEveryMs));
        }
        more = r.events === this.batch;
        if (now >= repairAt || now - lastRepair >= this.repairEveryMs) {
          lastRepair = now;
          repairAt = Infinity;
          if ((await repo.promoteStrandedHeads(this.ctx.db)) > 0) this.onDispatched();
        }
      } catch (err) {
        this.ctx.log.error({ err, worker: this.name }, 'webhook fan-out failed');
        await this.waker.sleep(1_000);
        continue;
      }
      if (!more) await this.waker.sleep(Math.max(0, Math.min(this.safetyNetMs, repairAt - monotonicNow())));
    }
  }
}

class DeliverySender implements BackgroundWorker {
  readonly name = 'webhook-sender';
  private stopped = true;
  private loop: Promise<void> | undefined;
  private readonly waker = new Waker();
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly perWebhookInFlight = new Map<string, number>();
  private stopController = new AbortController();
  private readonly http: HttpDeliverer;
  private readonly recorder: AttemptRecorder;
  private readonly schedule: readonly number[];
  private readonly leaseMs: number;
  private readonly workerId: string;
  private readonly o: Required<Pick<WebhookWorkerOptions, 'pollMs' | 'safetyNetMs' | 'concurrency' | 'perWebhook' | 'stopGraceMs' | 'random'>>;

  constructor(
    private readonly ctx: WorkerDeps,
    options: WebhookWorkerOptions,
  ) {
    const timeoutMs = options.timeoutMs ?? ctx.config.webhookTimeoutMs;
    this.schedule = options.retryScheduleMs ?? ctx.config.webhookRetryScheduleMs;
    this.leaseMs = options.leaseMs ?? 2 * timeoutMs + 1_000;
    this.workerId = options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.o = {
      pollMs: options.pollMs ?? DEFAULTS.pollMs,
      safetyNetMs: options.safetyNetMs ?? DEFAULTS.safetyNetMs,
      concurrency: options.concurrency ?? DEFAULTS.concurrency,
      perWebhook: options.perWebhook ?? DEFAULTS.perWebhook,
      stopGraceMs: options.stopGraceMs ?? DEFAULTS.stopGraceMs,
      random: options.random ?? Math.random,
    };
    this.recorder = new AttemptRecorder(ctx.db);
    this.http = new HttpDeliverer({
      allowed: parseAllowedHosts(ctx.config.webhookAllowedHosts),
      timeoutMs,
      ...(options.resolver ? { resolver: options.resolver } : {}),
    });
  }

  wake() {
    this.waker.wake();
  }

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.stopController = new AbortController();
    this.loop = this.run();
  }

  async stop() {
    this.stopped = true;
    this.waker.wake();
    await this.loop;
    if (this.inFlight.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.o.stopGraceMs)));
      await Promise.race([Promise.allSettled([...this.inFlight.values()]), grace]);
      clearTimeout(timer);
      this.stopController.abort(); // the rest are released, due again at once for another worker
      await Promise.allSettled([...this.inFlight.values()]);
    }
    await this.http.close();
  }

  private async run() {
    // Woken by this process's dispatcher, by finished deliveries, by notifications on
    // `webhook_delivery` (deliveries made due now in any process) and by an advance of the sandbox
    // clock (retries due in simulated time run at once); `null` wakes it too.
    const unsubscribe = await wakeOn(this.ctx.db, [WAKE.delivery, CLOCK_CHANNEL], () => this.waker.wake(), this.ctx.log);
    try {
      await this.loop_();
    } finally {
      await unsubscribe();
    }
  }

  private async loop_() {
    while (!this.stopped) {
      const free = this.o.concurrency - this.inFlight.size;
      let claimed = 0;
      let sleepMs = this.o.safetyNetMs;
      if (free > 0) {
        try {
          const room = new Map([...this.perWebhookInFlight].map(([id, n]) => [id, this.o.perWebhook - n]));
          const jobs = await repo.claimDeliveries(this.ctx.db, {
            limit: free,
            perWebhook: this.o.perWebhook,
            leaseMs: this.leaseMs,
            room,
            claimToken: randomUUID(),
          });
          claimed = jobs.length;
          for (const job of jobs) this.launch(job);
          if (claimed < free) {
            // Nothing more is due now: sleep until the earliest delivery that will be (a retry's
            // backoff, a lease running out), read once, unless a wake-up comes first. Webhooks
            // without room here are left out: one of their deliveries finishing wakes the loop.
            const full = [...this.perWebhookInFlight].filter(([, n]) => n >= this.o.perWebhook).map(([id]) => id);
            const dueInMs = await repo.nextDueInMs(this.ctx.db, full);
            // Due already but not claimed: held by another worker's claim in progress; look again soon.
            if (dueInMs !== null) sleepMs = dueInMs <= 0 ? this.o.pollMs : Math.min(dueInMs + 5, this.o.safetyNetMs);
          }
        } catch (err) {
          this.ctx.log.error({ err, worker: this.name }, 'webhook claim failed');
          await this.waker.sleep(1_000);
          continue;
        }
      }
      if (free > 0 && claimed === free) continue;
      await this.waker.sleep(sleepMs);
    }
  }

  private launch(job: repo.DeliveryJob) {
    this.perWebhookInFlight.set(job.webhook_id, (this.perWebhookInFlight.get(job.webhook_id) ?? 0) + 1);
    const done = this.deliver(job)
      .catch((err) => this.ctx.log.error({ err, delivery_id: job.id }, 'webhook delivery could not be recorded; it is retried when its lease ends'))
      .finally(() => {
        this.inFlight.delete(job.id);
        const n = (this.perWebhookInFlight.get(job.webhook_id) ?? 1) - 1;
        if (n <= 0) this.perWebhookInFlight.delete(job.webhook_id);
        else this.perWebhookInFlight.set(job.webhook_id, n);
        // Refill a webhook in chunks (once half its slots are free) rather than one claim per
        // finished delivery; a subject chain (one in flight) still moves on at once.
        if (n <= this.o.perWebhook / 2) this.waker.wake();
      });
    this.inFlight.set(job.id, done);
  }

  private async deliver(job: repo.DeliveryJob) {
    const startedAt = new Date();
    const r = await this.http.send(
      { url: job.url, secret: job.secret, body: JSON.stringify(job.payload), event: job.event, deliveryId: job.id, attempt: job.attempts },
      this.stopController.signal,
    );
    let outcome: repo.AttemptOutcome;
    if (r.aborted) outcome = { kind: 'release' };
    else if (r.ok) outcome = { kind: 'delivered' };
    else {
      const delayMs = retryDelayMs(this.schedule, job.retry_step + 1, this.o.random);
      outcome = delayMs === null ? { kind: 'failed' } : { kind: 'retry', delayMs };
    }
    const attempt: repo.AttemptRecord = {
      deliveryId: job.id,
      claimToken: job.claim_token,
      attempt: job.attempts,
      worker: this.workerId,
      startedAt,
      durationMs: r.durationMs,
      statusCode: r.statusCode,
      error: r.error,
      responseBody: r.responseBody,
      partitionKey: job.partition_key,
    };
    this.ctx.metrics?.webhookAttempt(r.ok, outcome.kind, r.durationMs / 1000);
    const applied = await this.recorder.record({ attempt, outcome });
    if (!applied) this.ctx.log.warn({ delivery_id: job.id }, 'webhook delivery lease had ended; result recorded as an attempt only');
    if (outcome.kind === 'failed') this.ctx.log.warn({ delivery_id: job.id, webhook_id: job.webhook_id, event: job.event }, 'webhook delivery failed for good');
  }
}

type Recorded = { attempt: repo.AttemptRecord; outcome: repo.AttemptOutcome };

/**
 * Writes attempt results in batches, one statement each: a write waits a couple of milliseconds for
 * other results to join it, and whatever finishes while a write runs goes in the next. A write that
 * fails is tried three times; after that the deliveries stay leased and are retried when the lease
 * ends.
 */
class AttemptRecorder {
  private queue: Array<Recorded & { settle: (applied: boolean) => void; fail: (err: unknown) => void }> = [];
  private writing = false;

  constructor(private readonly db: WorkerDeps['db']) {}

  record(r: Recorded): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.queue.push({ ...r, settle: resolve, fail: reject });
      void this.drain();
    });
  }

  private async drain() {
    if (this.writing) return;
    this.writing = true;
    try {
      await new Promise((resolve) => setTimeout(resolve, DEFAULTS.recordBatchMs));
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, 500);
        for (let i = 1; ; i++) {
          try {
            const applied = await repo.recordAttempts(this.db, batch);
            for (const b of batch) b.settle(applied.has(b.attempt.deliveryId));
            break;
          } catch (err) {
            if (i >= 3) {
              for (const b of batch) b.fail(err);
              break;
            }
            await new Promise((resolve) => setTimeout(resolve, 200 * i));
          }
        }
      }
    } finally {
      this.writing = false;
    }
  }
}
