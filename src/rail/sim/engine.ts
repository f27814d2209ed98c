import type { Sql } from '../../db/db.js';
import { BackwardSteps, monotonicNow, runsInRealTime } from '../../lib/clock.js';
import type { BackgroundWorker } from '../../lib/worker.js';
import { DELIVERY_BATCH, DELIVERY_LEASE_MS, MAX_DELIVERY_BACKOFF_MS, type SimDelivery } from './delivery.js';
import type { SimulatorOptions } from './options.js';
import { REJECTION } from './returnRules.js';
import * as store from './store.js';

const DUE_BATCH = 200;
const FLUSH_TIMEOUT_MS = 10_000;
/** Safety-net poll: 5 s on the system clock (idle cost 0.4 statements/s a process), 1 s on a test clock. */
const SAFETY_POLL_MS = 5_000;
const TEST_CLOCK_POLL_MS = 1_000;
const MIN_POLL_MS = 1_000;
const WAKE_STEP_MS = 20;

/**
 * The simulator's engine: pending work is a row with a due time (`sim_payments.due_at`), claimed
 * with FOR UPDATE SKIP LOCKED, so it survives restarts and any number of processes can run the
 * engine. A tick advances due payments and returns (settle, reject, hold, leave the protection
 * queue) and has the delivery part (delivery.ts) claim and deliver notifications, until idle.
 */
export class SimEngine {
  /** Wake-ups asked for (monotonicNow ms, src/lib/clock.ts): work this process queued, deliveries it deferred. */
  private readonly wakes: number[] = [];
  private wakeEngine: (at: number) => void = () => {};
  /** When this process last claimed (monotonicNow ms): a busy engine still claims every safetyMs. */
  private lastClaim = 0;
  /** Sees the wall clock step back (the first tick counts: a step may predate this process). */
  private backwardSteps: BackwardSteps | undefined;
  /**
   * Look for deadlines a clock step left in the future on the next tick: when the engine starts (a
   * step may predate this process, whose deadlines another process wrote) and when a step back was
   * seen outside a tick.
   */
  private clampPending = false;

  constructor(
    private readonly options: SimulatorOptions,
    private readonly delivery: SimDelivery,
  ) {}

  /** Asks for a tick at `at` (monotonicNow ms): work this process queued falls due then. */
  wakeAt(at: number): void {
    this.wakeEngine(at);
  }

  /**
   * For a process that does not run the engine (a cluster worker other than the background one,
   * src/lib/clusterWakes.ts): the wake-ups for work it queues go to `forward` (in WAKE_STEP_MS
   * steps), for the engine of the process that runs it.
   */
  forwardWakes(forward: (at: number) => void): void {
    this.wakeEngine = (when) => forward(Math.ceil(when / WAKE_STEP_MS) * WAKE_STEP_MS);
  }

  /**
   * The engine's loop: runs `tick` when work this process queued is due — a payment or return it
   * took, a protection wait it ended, a delivery it deferred after a failure (`wakeEngine`, no
   * statement: the rail runs in the process that sends the order) — and otherwise only every
   * SAFETY_POLL_MS (1 s on a test clock) as a safety net (work of a process that died,
   * notifications whose lease ran out), so that idle it costs 0.4 statements a second. No NOTIFY:
   * every notifying commit of the cluster waits for one global lock, which would serialize the
   * money path.
   */
  worker(): BackgroundWorker {
    const { log } = this.options;
    const safetyMs = this.safetyMs;
    let stopped = true;
    let timer: NodeJS.Timeout | undefined;
    let timerAt = Infinity;
    let running: Promise<void> | undefined;
    const arm = () => {
      if (stopped || running) return;
      const at = Math.min(monotonicNow() + safetyMs, ...this.wakes);
      if (timer && timerAt <= at) return;
      if (timer) clearTimeout(timer);
      timerAt = at;
      timer = setTimeout(run, Math.max(0, at - monotonicNow()));
    };
    const run = () => {
      timer = undefined;
      timerAt = Infinity;
      const now = monotonicNow();
      for (let i = this.wakes.length - 1; i >= 0; i--) if (this.wakes[i]! <= now) this.wakes.splice(i, 1);
      running = this.tick({ claim: false })
        .catch((err: unknown) => log.error({ err, worker: 'rail-simulator' }, 'background worker tick failed'))
        .finally(() => {
          running = undefined;
          arm();
        });
    };
    this.wakeEngine = (when) => {
      // Wake-ups in steps of WAKE_STEP_MS: a busy rail runs one tick per step for all the work
      // due in it.
      const at = Math.ceil(when / WAKE_STEP_MS) * WAKE_STEP_MS;
      if (!this.wakes.includes(at)) this.wakes.push(at);
      if (this.wakes.length > 1000) this.wakes.splice(0, this.wakes.length - 1000);
      arm();
    };
    return {
      name: 'rail-simulator',
      start: () => {
        if (!stopped) return;
        stopped = false;
        this.clampPending = true;
        this.wakeEngine(monotonicNow());
      },
      stop: async () => {
        stopped = true;
        if (timer) clearTimeout(timer);
        await running;
      },
    };
  }

  private get safetyMs(): number {
    const fallback = runsInRealTime(this.options.clock) ? SAFETY_POLL_MS : TEST_CLOCK_POLL_MS;
    return Math.max(MIN_POLL_MS, this.options.pollMs ?? fallback);
  }

  /**
   * One pass of the engine: advances due payments, then delivers notifications, until idle.
   * `claim` (default true): look for queued notifications in any case. The engine's own loop
   * passes false: it claims only when a claim is due (`claimDue`, a deferred delivery due, or
   * safetyMs since the last one — so the safety net's tick, which comes safetyMs after the last
   * tick, claims).
   */
  async tick(options: { claim?: boolean } = {}): Promise<void> {
    const delivery = this.delivery;
    if (options.claim ?? true) delivery.claimDue = true;
    if (this.sawBackwardStep() || this.clampPending) {
      this.clampPending = false;
      await this.clampAfterStep();
    }
    let advance = true;
    for (let round = 0; round < 20; round++) {
      const advanced: number = advance ? await this.advanceDue() : 0;
      let delivered = 0;
      const now = monotonicNow();
      // (A timer may fire a millisecond early: one wake-up step of slack.)
      if (now - this.lastClaim >= this.safetyMs - WAKE_STEP_MS) delivery.claimDue = true;
      if (delivery.deferredDue(now)) delivery.claimDue = true;
      if (delivery.claimDue) {
        delivery.claimDue = false;
        this.lastClaim = now;
        delivered = await delivery.claim();
        // A full claim may have left more behind.
        if (delivered >= DELIVERY_BATCH) delivery.claimDue = true;
      }
      if (advanced === 0 && delivered === 0) return;
      // Work that falls due later comes with its own wake-up; only a full batch means more is due.
      advance = advanced >= DUE_BATCH;
    }
  }

  /**
   * Runs the engine until the given notifications are delivered (or another process delivered
   * them), so a sandbox call answers after its effect. Gives up after 10 s.
   */
  async deliverNow(notificationIds: string[]): Promise<void> {
    const deadline = monotonicNow() + FLUSH_TIMEOUT_MS;
    while (monotonicNow() < deadline) {
      await this.tick();
      const left = await this.options.db.query('SELECT 1 FROM sim_notifications WHERE notification_id = ANY($1::text[]) LIMIT 1', [notificationIds]);
      if (left.length === 0) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    this.options.log.warn({ notifications: notificationIds }, 'sandbox notification not delivered within 10 s');
  }

  /**
   * Whether the wall clock stepped back since the last look; looked at by every tick and wherever
   * a deadline is written (a step forward and back between two ticks is seen too).
   */
  private sawBackwardStep(): boolean {
    return (this.backwardSteps ??= new BackwardSteps(this.options.clock)).seen();
  }

  /** Where deadlines are written: a step back seen here is clamped by the next tick. */
  lookForBackwardStep(): void {
    if (!this.sawBackwardStep()) return;
    this.clampPending = true;
    this.wakeEngine(monotonicNow());
  }

  /** Due times and leases that a backward step of the wall clock left in the future are due now. */
  private async clampAfterStep(): Promise<void> {
    const now = this.options.clock.now();
    const slack = 1_000;
    const dueHorizon = new Date(now.getTime() + Math.max(this.options.protectionMs, this.options.settlementMs) + slack);
    const leaseHorizon = new Date(now.getTime() + Math.max(DELIVERY_LEASE_MS, MAX_DELIVERY_BACKOFF_MS) + slack);
    const clamped = await store.clampFutureDeadlines(this.options.db, now, dueHorizon, leaseHorizon);
    if (clamped.payments > 0 || clamped.notifications > 0) {
      this.options.log.warn({ ...clamped }, 'rail simulator: the wall clock stepped back; due times and leases beyond their length are due now');
      this.delivery.claimDue = true;
    }
  }

  /**
   * Due work: settlements in one statement (the common case; their notifications leased at once
   * and delivered here), anything else in a transaction.
   */
  private async advanceDue(): Promise<number> {
    const now = this.options.clock.now();
    // Without a handler yet nothing is leased: the claim delivers once there is one.
    const fast = await store.settleDuePayments(this.options.db, now, DUE_BATCH, this.delivery.leaseFrom(now));
    if (fast.unleased > 0) this.delivery.claimDue = true;
    if (fast.leased.length > 0) await this.delivery.deliverRows(fast.leased);
    if (fast.others === 0) return fast.settled;
    return fast.settled + (await this.advanceDueInTransaction());
  }

  private async advanceDueInTransaction(): Promise<number> {
    return this.options.db.transaction(async (tx) => {
      const now = this.options.clock.now();
      const rows = await store.claimDuePayments(tx, now, DUE_BATCH);
      for (const row of rows) await this.advance(tx, row, now);
      return rows.length;
    });
  }

  private async advance(tx: Sql, row: store.SimPaymentRow, now: Date): Promise<void> {
    const notify = this.delivery.notify.bind(this.delivery);
    if (row.status === 'protection') {
      await store.updatePayment(tx, row.end_to_end_id, { status: 'in_flight', due_at: new Date(now.getTime() + this.options.settlementMs) });
      this.wakeEngine(monotonicNow() + this.options.settlementMs);
      await notify(tx, now, row.end_to_end_id, { kind: 'payment.accepted', endToEndId: row.end_to_end_id });
      return;
    }
    if (row.kind === 'return') {
      if (row.behavior === 'settle') {
        await store.updatePayment(tx, row.end_to_end_id, { status: 'settled', due_at: null, resolved_at: now });
        await notify(tx, now, row.end_to_end_id, { kind: 'return.settled', endToEndId: row.end_to_end_id, settledAt: now });
      } else {
        const rejection = Object.values(REJECTION).find((r) => r.code === row.reason_code) ?? REJECTION.originalNotFound;
        await store.updatePayment(tx, row.end_to_end_id, { status: 'rejected', due_at: null, resolved_at: now });
        await notify(tx, now, row.end_to_end_id, { kind: 'return.rejected', endToEndId: row.end_to_end_id, reasonCode: rejection.code, reason: rejection.reason });
      }
      return;
    }
    switch (row.behavior) {
      case 'settle':
        await this.settle(tx, row, now);
        return;
      case 'reject':
        await this.reject(tx, row, now, Object.values(REJECTION).find((r) => r.code === row.reason_code) ?? REJECTION.byReceiver);
        return;
      case 'hold':
        await store.updatePayment(tx, row.end_to_end_id, { status: 'held', due_at: null });
        await notify(tx, now, row.end_to_end_id, { kind: 'payment.held', endToEndId: row.end_to_end_id });
        return;
    }
  }

  /** Settles a payment (due, or decided in the sandbox); returns its notification's id. */
  async settle(tx: Sql, row: store.SimPaymentRow, now: Date): Promise<string> {
    await store.updatePayment(tx, row.end_to_end_id, { status: 'settled', due_at: null, resolved_at: now });
    return this.delivery.notify(tx, now, row.end_to_end_id, { kind: 'payment.settled', endToEndId: row.end_to_end_id, settledAt: now });
  }

  /** Rejects a payment (due, or decided in the sandbox); returns its notification's id. */
  async reject(tx: Sql, row: store.SimPaymentRow, now: Date, rejection: { code: string; reason: string }): Promise<string> {
    await store.updatePayment(tx, row.end_to_end_id, { status: 'rejected', due_at: null, resolved_at: now, reason_code: rejection.code });
    return this.delivery.notify(tx, now, row.end_to_end_id, {
      kind: 'payment.rejected',
      endToEndId: row.end_to_end_id,
      reasonCode: rejection.code,
      reason: rejection.reason,
    });
  }
}
