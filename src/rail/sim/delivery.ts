import type { Sql } from '../../db/db.js';
import type { BatchOutcome } from '../../lib/batcher.js';
import { monotonicNow } from '../../lib/clock.js';
import type { NotificationAnswer, NotificationHandler, RailNotification } from '../rail.js';
import type { SimulatorOptions } from './options.js';
import * as store from './store.js';

export const DELIVERY_LEASE_MS = 30_000;
/** Longest wait before a failed delivery is tried again. */
export const MAX_DELIVERY_BACKOFF_MS = 30_000;
/** Most notifications one claim leases. */
export const DELIVERY_BATCH = 50;

/** A notification as the simulator writes it: the rail stamps `id` and `at`. */
export type NotificationBody = DistributiveOmit<RailNotification, 'id' | 'at'>;
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/**
 * The simulator's notifications to this institution (table `sim_notifications`): queued in the
 * simulator's transactions (`notify`), leased by a claim, handed to the service's handler, deleted
 * once applied or deferred with backoff when the handler failed. The engine (engine.ts) decides
 * when to claim; this part keeps what tells it to: `claimDue` and the deferred deliveries' due times.
 */
export class SimDelivery {
  private handler: NotificationHandler | undefined;
  /**
   * Unleased notifications may wait in the queue (queued by this process other than by a
   * settlement it delivers itself, or before the handler was set; and on start): the next tick
   * claims. Otherwise a tick only delivers what it settled itself, and claims when a deferred
   * delivery falls due (`claimAt`) or on the safety net — a notification of another process that
   * died waits at most that long, as before.
   */
  claimDue = true;
  /** When deliveries this process deferred after a failure fall due (monotonicNow ms). */
  private readonly claimAt: number[] = [];

  /** `wake`: asks the engine for a tick at a monotonicNow ms (a deferred delivery's due time). */
  constructor(
    private readonly options: SimulatorOptions,
    private readonly wake: (at: number) => void,
  ) {}

  /** Registers the service's handler (one handler; set before workers start). */
  setHandler(handler: NotificationHandler): void {
    this.handler = handler;
  }

  /** The lease of notifications queued now: none without a handler yet (the claim delivers once there is one). */
  leaseFrom(now: Date): Date | null {
    return this.handler ? new Date(now.getTime() + DELIVERY_LEASE_MS) : null;
  }

  /** Whether a deferred delivery fell due by `now` (monotonicNow ms); those due are forgotten. */
  deferredDue(now: number): boolean {
    if (!this.claimAt.some((at) => at <= now)) return false;
    for (let i = this.claimAt.length - 1; i >= 0; i--) if (this.claimAt[i]! <= now) this.claimAt.splice(i, 1);
    return true;
  }

  /** Queues a notification in the simulator's transaction; its id is derived from what it reports. */
  async notify(tx: Sql, now: Date, subject: string, body: NotificationBody): Promise<string> {
    const discriminator =
      body.kind === 'payment.returned'
        ? body.returnEndToEndId
        : body.kind === 'payment.return_rejected'
          ? body.attemptId
          : 'infractionId' in body
            ? body.infractionId
            : subject;
    const notificationId = `${body.kind}:${discriminator}`;
    await store.enqueueNotification(tx, { notificationId, subject, kind: body.kind, payload: body as Record<string, unknown>, createdAt: now });
    this.claimDue = true;
    return notificationId;
  }

  /**
   * Claims queued notifications and delivers them to the handler — all of them in one call when it
   * takes batches (the service applies the settlements of the batch in one transaction), else one
   * call each, concurrently; the lease gives at most one notification per subject, so their order
   * does not matter between them. A failure is retried later with backoff.
   */
  async claim(): Promise<number> {
    if (!this.handler) {
      this.claimDue = true;
      return 0;
    }
    const { db, clock } = this.options;
    const now = clock.now();
    const rows = await store.claimNotifications(db, now, new Date(now.getTime() + DELIVERY_LEASE_MS), DELIVERY_BATCH);
    if (rows.length === 0) return 0;
    await this.deliverRows(rows);
    return rows.length;
  }

  /** Hands leased notifications to the handler (see `claim`); deletes the applied ones, defers the others. */
  async deliverRows(rows: store.SimNotificationRow[]): Promise<void> {
    const handler = this.handler;
    const { db, clock, log } = this.options;
    if (!handler) return; // (callers lease only with a handler)
    const notifications = rows.map(toNotification);
    const outcomes: BatchOutcome<NotificationAnswer>[] = handler.batch
      ? await handler.batch(notifications).catch((error: unknown) => notifications.map(() => ({ ok: false as const, error })))
      : await Promise.all(
          notifications.map((n) =>
            handler(n).then(
              (answer): BatchOutcome<NotificationAnswer> => ({ ok: true, value: answer }),
              (error: unknown): BatchOutcome<NotificationAnswer> => ({ ok: false, error }),
            ),
          ),
        );
    const delivered: store.LeasedNotification[] = [];
    await Promise.all(
      rows.map(async (row, i) => {
        const outcome = outcomes[i] ?? { ok: false, error: new Error('the handler did not answer this notification') };
        if (outcome.ok) {
          // The receiving institution refused the money: the payment (or return) is rejected, the
          // payer keeps it; the notification is done with.
          if (outcome.value) await store.refuseIncoming(db, refusedPayment(notifications[i]!), outcome.value.refused.code, clock.now());
          delivered.push(row);
          return;
        }
        const err = outcome.error;
        const backoff = Math.min(MAX_DELIVERY_BACKOFF_MS, 100 * 2 ** Math.min(row.attempts, 9));
        log.warn({ err, notification: row.notification_id, attempts: row.attempts }, 'rail notification handler failed; will retry');
        await store.deferNotification(db, row, new Date(clock.now().getTime() + backoff), (err as Error)?.message ?? String(err));
        this.claimAt.push(monotonicNow() + backoff);
        this.wake(monotonicNow() + backoff);
      }),
    );
    // Applied notifications are deleted together (a crash before this redelivers them: the
    // service's inbox makes that a no-op), each named by its id and notification id: after a
    // failover the id alone may name another one (store.LeasedNotification).
    await store.deleteNotifications(db, delivered);
  }
}

/** The end-to-end id of what a refused notification brought: the inbound payment, or the return. */
function refusedPayment(n: RailNotification): string {
  if (n.kind === 'inbound.payment') return n.endToEndId;
  if (n.kind === 'payment.returned') return n.returnEndToEndId;
  throw new Error(`a ${n.kind} notification cannot be refused`);
}

const DATE_FIELDS = new Set(['settledAt', 'returnedAt', 'receivedAt', 'reportedAt', 'resolvedAt']);

function toNotification(row: store.SimNotificationRow): RailNotification {
  const body: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row.payload)) body[k] = DATE_FIELDS.has(k) && typeof v === 'string' ? new Date(v) : v;
  return { ...body, id: row.notification_id, at: row.created_at } as RailNotification;
}
