import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { BackgroundWorker } from '../lib/worker.js';
import type { Database, Sql } from '../db/db.js';
import { afterCommit, UNIQUE_VIOLATION, sqlState } from '../db/db.js';
import { bankName } from '../lib/banks.js';
import { Batcher, type BatchObserver, type BatchOutcome } from '../lib/batcher.js';
import { BackwardSteps, monotonicNow, systemClock, type Clock } from '../lib/clock.js';
import { BASE_UNITS_PER_CENT } from '../lib/money.js';
import {
  KeyAlreadyRegisteredError,
  type DirectoryEntry,
  type InfractionDecision,
  type KeyDirectory,
  type KeyRegistration,
  type NotificationAnswer,
  type NotificationHandler,
  type PaymentAck,
  type PaymentOrder,
  type Rail,
  type RailNotification,
  type ReturnAck,
  type ReturnOrder,
} from './rail.js';
import * as infractions from './sim/infractions.js';
import { randomPayer, SeededRandom } from './sim/random.js';
import { REJECTION, returnProblem } from './sim/returnRules.js';
import * as store from './sim/store.js';

export interface SimulatorOptions {
  db: Database;
  institutionIspb: string;
  institutionName: string;
  clock: Clock;
  log: Logger;
  /** SIM_SETTLEMENT_MS: delay between acceptance and the outcome of a payment or return. */
  settlementMs: number;
  /** SIM_PROTECTION_MS: how long a protection-queued payment waits before it is reprocessed. */
  protectionMs: number;
  /** SIM_SEED. */
  seed: number;
  /**
   * The engine's safety-net poll (at least 1 s; default 5 s on the system clock, 1 s on a test
   * clock): it wakes when work this process queued is due; the poll only finds work of other
   * (dead) processes, leases that ran out, and work falling due on a clock a test moves by hand.
   */
  pollMs?: number;
  /** Named observers of its batched calls (metrics: `sim_lookup`, `sim_order`). */
  observeBatch?: (name: string) => BatchObserver;
}

const DELIVERY_LEASE_MS = 30_000;
/** Longest wait before a failed delivery is tried again. */
const MAX_DELIVERY_BACKOFF_MS = 30_000;
const DELIVERY_BATCH = 50;
const DUE_BATCH = 200;
const FLUSH_TIMEOUT_MS = 10_000;
/** Safety-net poll: 5 s on the system clock (idle cost 0.4 statements/s a process), 1 s on a test clock. */
const SAFETY_POLL_MS = 5_000;
const TEST_CLOCK_POLL_MS = 1_000;
const MIN_POLL_MS = 1_000;
const WAKE_STEP_MS = 20;
/** Look-ups and payment orders gathered into one statement (src/lib/batcher.ts), and such statements at once. */
const CALL_BATCH = 100;
const CALLS_IN_FLIGHT = 2;

export type SandboxOutcome<T = void> = { ok: true; value: T } | { ok: false; reason: 'not_found' | 'conflict' | 'unprocessable'; detail: string };

/**
 * The simulated central bank. It keeps its own books in `sim_*` tables of the same database:
 * the directory (DICT), every payment and return it has seen, and the notifications it still has to
 * deliver to this institution. Pending work is a row with a due time, claimed by the engine with
 * FOR UPDATE SKIP LOCKED, so it survives restarts and any number of processes can run the engine.
 *
 * What it does with a payment depends on the receiving key's directory entry (sandbox
 * `/dict/keys`): `settle` (after SIM_SETTLEMENT_MS), `reject`, `hold` (until a sandbox call),
 * `timeout` (the order is refused, nothing recorded); `fraud_flagged` queues the payment for
 * SIM_PROTECTION_MS before that. Returns are judged by the spec's return codes and deadlines.
 * Infractions (MED) against inbound payments are reported and resolved through sandbox calls; the
 * notifications of one payment (its credit, its infractions) are delivered in that order.
 */
export class SimulatedRail implements Rail {
  readonly directory: KeyDirectory;
  readonly random: SeededRandom;
  private handler: NotificationHandler | undefined;
  /**
   * Concurrent calls of the cash-out path, each kind answered by one statement (issue 12): the
   * directory look-ups of one event-loop turn, and the payment orders.
   */
  private readonly lookups: Batcher<string, DirectoryEntry | null>;
  private readonly orders: Batcher<PaymentOrder, store.Taken>;

  constructor(private readonly options: SimulatorOptions) {
    this.random = new SeededRandom(options.seed);
    const observe = (name: string) => (options.observeBatch ? { observe: options.observeBatch(name) } : {});
    this.lookups = new Batcher({ maxBatch: CALL_BATCH, maxInFlight: CALLS_IN_FLIGHT, run: (keys) => this.lookupKeys(keys), ...observe('sim_lookup') });
    this.orders = new Batcher({ maxBatch: CALL_BATCH, maxInFlight: CALLS_IN_FLIGHT, run: (orders) => this.takePayments(orders), ...observe('sim_order') });
    this.directory = {
      registerKey: (r) => this.registerKey(r),
      removeKey: (key) => this.removeKey(key),
      lookupKey: (key) => this.lookupKey(key),
    };
  }

  get ispb(): string {
    return this.options.institutionIspb;
  }

  onNotification(handler: NotificationHandler): void {
    this.handler = handler;
  }

  workers(): BackgroundWorker[] {
    return [this.engineWorker()];
  }

  /**
   * For a process that does not run the engine (a cluster worker other than the background one,
   * src/lib/clusterWakes.ts): the wake-ups for work it queues go to `forward` (in WAKE_STEP_MS
   * steps), for the engine of the process that runs it.
   */
  forwardWakes(forward: (at: number) => void): void {
    this.wakeEngine = (when) => forward(Math.ceil(when / WAKE_STEP_MS) * WAKE_STEP_MS);
  }

  /** A wake-up from another process for work it queued (`forwardWakes`); nothing if the engine does not run here. */
  wake(at: number): void {
    this.wakeEngine(at);
  }

  /** Wake-ups asked for (monotonicNow ms, src/lib/clock.ts): work this process queued, deliveries it deferred. */
  private readonly wakes: number[] = [];
  private wakeEngine: (at: number) => void = () => {};

  /**
   * The engine's loop: runs `tick` when work this process queued is due — a payment or return it
   * took, a protection wait it ended, a delivery it deferred after a failure (`wakeEngine`, no
   * statement: the rail runs in the process that sends the order) — and otherwise only every
   * SAFETY_POLL_MS (1 s on a test clock) as a safety net (work of a process that died,
   * notifications whose lease ran out), so that idle it costs 0.4 statements a second. No NOTIFY:
   * every notifying commit of the cluster waits for one global lock, which would serialize the
   * money path.
   */
  private engineWorker(): BackgroundWorker {
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

  // ---- directory (DICT) ----

  private async registerKey(r: KeyRegistration): Promise<void> {
    try {
      await this.options.db.query(
        `INSERT INTO sim_dict_entries (key, type, name, document, ispb, bank_name, account_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [r.key, r.type, r.name, r.document, this.options.institutionIspb, this.options.institutionName, r.accountId],
      );
    } catch (err) {
      if (sqlState(err) === UNIQUE_VIOLATION) throw new KeyAlreadyRegisteredError(`key ${r.key} is already registered`);
      throw err;
    }
  }

  private async removeKey(key: string): Promise<void> {
    await this.options.db.query('DELETE FROM sim_dict_entries WHERE key = $1 AND ispb = $2', [key, this.options.institutionIspb]);
  }

  private lookupKey(key: string): Promise<DirectoryEntry | null> {
    return this.lookups.submit(key);
  }

  /** The look-ups of one batch in one statement; each key answered with its entry or null. */
  private async lookupKeys(keys: string[]): Promise<BatchOutcome<DirectoryEntry | null>[]> {
    const rows = await store.findDictEntries(this.options.db, keys);
    return keys.map((key) => {
      const row = rows.get(key);
      if (!row) return { ok: true, value: null };
      return {
        ok: true,
        value: {
          key: row.key,
          type: row.type,
          name: row.name,
          document: row.document,
          ispb: row.ispb,
          bankName: row.bank_name ?? bankName(row.ispb, { ispb: this.options.institutionIspb, name: this.options.institutionName }),
          accountId: row.account_id,
          fraudFlagged: row.fraud_flagged,
        },
      };
    });
  }

  // ---- settlement (SPI) ----

  async sendPayment(order: PaymentOrder): Promise<PaymentAck> {
    return this.takePaymentAndAnswer(order);
  }

  async sendReturn(order: ReturnOrder): Promise<ReturnAck> {
    return this.answerAfterStall(await this.takeReturn(order));
  }

  /**
   * The stall switch (sandbox PUT /rail/stall): the order has been taken (it is processed as usual),
   * and only its answer is late — by `delay_ms` — or lost (`drop`), as on a real network.
   */
  private async answerAfterStall<T>(ack: T): Promise<T> {
    const stall = await store.readStall(this.options.db);
    if (stall.drop) return new Promise<T>(() => {});
    if (stall.delay_ms > 0) await new Promise((r) => setTimeout(r, stall.delay_ms).unref());
    return ack;
  }

  /** GET /rail/stall. */
  readStall(): Promise<store.RailStall> {
    return store.readStall(this.options.db);
  }

  /** PUT /rail/stall; `{delay_ms: 0, drop: false}` clears it. */
  setStall(stall: store.RailStall): Promise<store.RailStall> {
    return store.writeStall(this.options.db, stall, this.options.clock.now());
  }

  /**
   * The order taken together with the others of its batch (`takePayments`, one statement); then
   * the answer after the stall switch, each caller on its own (a delayed answer never holds the
   * batcher up).
   */
  private async takePaymentAndAnswer(order: PaymentOrder): Promise<PaymentAck> {
    const taken = await this.orders.submit(order);
    // An order already taken is acknowledged as it was the first time (queued by protection stays
    // "queued" after the payment left the queue: the rail is idempotent on the end-to-end id). A
    // key with behaviour `timeout`: the rail does not take new orders for it.
    const ack: PaymentAck = { status: taken.ack ?? 'timeout' };
    if (taken.stall.drop) return new Promise<PaymentAck>(() => {});
    if (taken.stall.delay_ms > 0) await new Promise((r) => setTimeout(r, taken.stall.delay_ms).unref());
    return ack;
  }

  /**
   * One statement for the orders of a batch (store.takeOutboundPayments): the directory entries,
   * the payments inserted (or the ones already taken under their end-to-end ids), the stall switch.
   * If it fails, each order is taken alone (a statement of one), so that one bad order (a
   * transaction id another order took) does not refuse the others.
   */
  private async takePayments(orders: PaymentOrder[]): Promise<BatchOutcome<store.Taken>[]> {
    const { db, clock, institutionIspb } = this.options;
    this.lookForBackwardStep();
    const now = clock.now();
    const terms: store.TakeTerms = {
      created_at: now,
      protectionDue: new Date(now.getTime() + this.options.protectionMs),
      settlementDue: new Date(now.getTime() + this.options.settlementMs),
      institutionIspb,
      refusals: { keyNotFound: REJECTION.keyNotFound.code, sameInstitution: REJECTION.sameInstitution.code },
    };
    const wake = (taken: store.Taken) => {
      // This process's engine settles it when due (a crash: another process's safety-net poll).
      if (taken.inserted) this.wakeEngine(monotonicNow() + (taken.ack === 'queued' ? this.options.protectionMs : this.options.settlementMs));
      return taken;
    };
    try {
      return (await store.takeOutboundPayments(db, orders.map(outboundOrder), terms)).map((taken) => ({ ok: true, value: wake(taken) }));
    } catch (err) {
      if (orders.length === 1) throw err;
      return Promise.all(
        orders.map((order) =>
          store.takeOutboundPayments(db, [outboundOrder(order)], terms).then(
            ([taken]): BatchOutcome<store.Taken> => ({ ok: true, value: wake(taken!) }),
            (error: unknown): BatchOutcome<store.Taken> => ({ ok: false, error }),
          ),
        ),
      );
    }
  }

  private async takeReturn(order: ReturnOrder): Promise<ReturnAck> {
    const { db, clock } = this.options;
    this.lookForBackwardStep();
    const existing = await store.findPayment(db, order.endToEndId);
    if (existing) return existing.status === 'settled' ? { status: 'settled', settledAt: existing.resolved_at! } : { status: 'accepted' };
    return db.transaction(async (tx) => {
      const now = clock.now();
      const original = await store.findPayment(tx, order.originalEndToEndId, true);
      const problem =
        !original || original.direction !== 'inbound'
          ? REJECTION.originalNotFound
          : returnProblem({
              returnCode: order.returnCode,
              originalAt: original.created_at,
              now,
              amount: order.amount,
              remaining: original.amount - original.returned_amount,
            });
      // A valid return settles after SIM_SETTLEMENT_MS, or at once when that is 0; an invalid one
      // is accepted and rejected later, as the central bank does.
      const settleNow = problem === null && this.options.settlementMs === 0;
      const { row, inserted } = await store.insertPayment(tx, {
        end_to_end_id: order.endToEndId,
        kind: 'return',
        direction: 'outbound',
        transaction_id: order.transactionId,
        original_end_to_end_id: order.originalEndToEndId,
        amount: order.amount,
        payer_name: original?.receiver_name ?? null,
        payer_document: original?.receiver_document ?? null,
        payer_ispb: this.options.institutionIspb,
        payer_account_id: original?.receiver_account_id ?? null,
        receiver_name: original?.payer_name ?? null,
        receiver_document: original?.payer_document ?? null,
        receiver_ispb: original?.payer_ispb ?? '00000000',
        behavior: problem ? 'reject' : 'settle',
        reason_code: problem?.code ?? null,
        return_code: order.returnCode,
        description: order.description,
        status: settleNow ? 'settled' : 'in_flight',
        due_at: settleNow ? null : new Date(now.getTime() + this.options.settlementMs),
        created_at: now,
        resolved_at: settleNow ? now : null,
      });
      if (inserted && problem === null) await store.addReturned(tx, order.originalEndToEndId, order.amount);
      if (inserted && row.due_at !== null) afterCommit(tx, () => this.wakeEngine(monotonicNow() + this.options.settlementMs));
      return row.status === 'settled' ? { status: 'settled', settledAt: row.resolved_at! } : { status: 'accepted' };
    });
  }

  // ---- sandbox controls (contract section 4) ----

  /** POST /dict/keys: registers (or re-registers) a key of another institution. */
  async registerForeignKey(
    entry: Pick<DirectoryEntry, 'key' | 'type' | 'name' | 'document' | 'ispb' | 'bankName' | 'fraudFlagged'> & { behavior: store.SimBehavior },
  ): Promise<SandboxOutcome<{ row: store.DictRow; created: boolean }>> {
    const result = await store.upsertForeignKey(this.options.db, {
      key: entry.key,
      type: entry.type,
      name: entry.name,
      document: entry.document,
      ispb: entry.ispb,
      bank_name: entry.bankName ?? bankName(entry.ispb, { ispb: this.options.institutionIspb, name: this.options.institutionName }),
      behavior: entry.behavior,
      fraud_flagged: entry.fraudFlagged,
    });
    if (result === 'owned') return { ok: false, reason: 'conflict', detail: 'PIX key belongs to an account of this institution' };
    return { ok: true, value: result };
  }

  /** POST /payouts/:transaction_id/settle|reject: decides a held or accepted payment now. */
  async decidePayment(transactionId: string, decision: 'settle' | 'reject'): Promise<SandboxOutcome<{ endToEndId: string }>> {
    const outcome = await this.options.db.transaction(async (tx): Promise<SandboxOutcome<{ endToEndId: string; notificationId: string }>> => {
      const row = await store.findOutboundPaymentByTransactionId(tx, transactionId);
      if (!row) return { ok: false, reason: 'not_found', detail: 'Payout not found' };
      if (row.status !== 'in_flight' && row.status !== 'held') {
        return { ok: false, reason: 'conflict', detail: `Payout is ${row.status === 'protection' ? 'queued by protection' : row.status}; only a held or accepted payout can be decided` };
      }
      const now = this.options.clock.now();
      const notificationId =
        decision === 'settle' ? await this.settle(tx, row, now) : await this.reject(tx, row, now, REJECTION.byReceiver);
      return { ok: true, value: { endToEndId: row.end_to_end_id, notificationId } };
    });
    if (!outcome.ok) return outcome;
    await this.deliverNow([outcome.value.notificationId]);
    return { ok: true, value: { endToEndId: outcome.value.endToEndId } };
  }

  /**
   * POST /payouts/:transaction_id/return: the receiver returns (part of) a settled payment. An
   * amount beyond what remains is refused by the rail (`payment.return_rejected`, no money back).
   */
  async returnPayment(transactionId: string, amount: number | undefined): Promise<SandboxOutcome<{ returned: boolean; endToEndId: string }>> {
    const outcome = await this.options.db.transaction(
      async (tx): Promise<SandboxOutcome<{ returned: boolean; endToEndId: string; notificationId: string }>> => {
        const payment = await store.findOutboundPaymentByTransactionId(tx, transactionId);
        if (!payment) return { ok: false, reason: 'not_found', detail: 'Payout not found' };
        if (payment.status !== 'settled') return { ok: false, reason: 'conflict', detail: `Payout is ${payment.status}; only a settled payout can be returned` };
        const now = this.options.clock.now();
        const remaining = payment.amount - payment.returned_amount;
        const value = amount ?? remaining;
        const returnE2e = this.random.endToEndId('D', payment.receiver_ispb, now);
        if (value <= 0 || value > remaining) {
          const notificationId = await this.notify(tx, now, payment.end_to_end_id, {
            kind: 'payment.return_rejected',
            endToEndId: payment.end_to_end_id,
            attemptId: returnE2e,
            amount: value,
            reasonCode: REJECTION.amountExceeded.code,
            reason: REJECTION.amountExceeded.reason,
          });
          return { ok: true, value: { returned: false, endToEndId: returnE2e, notificationId } };
        }
        let drawn = 0;
        const returnId = await this.insertWithFreshId(tx, () => (drawn++ === 0 ? returnE2e : this.random.endToEndId('D', payment.receiver_ispb, now)), (id) => ({
          end_to_end_id: id,
          kind: 'return',
          direction: 'inbound',
          original_end_to_end_id: payment.end_to_end_id,
          amount: value,
          payer_name: payment.receiver_name,
          payer_document: payment.receiver_document,
          payer_ispb: payment.receiver_ispb,
          receiver_name: payment.payer_name,
          receiver_document: payment.payer_document,
          receiver_ispb: payment.payer_ispb,
          receiver_account_id: payment.payer_account_id,
          return_code: 'MD06',
          status: 'settled',
          created_at: now,
          resolved_at: now,
        }));
        await store.addReturned(tx, payment.end_to_end_id, value);
        const notificationId = await this.notify(tx, now, payment.end_to_end_id, {
          kind: 'payment.returned',
          endToEndId: payment.end_to_end_id,
          returnEndToEndId: returnId,
          amount: value,
          returnCode: 'MD06',
          reason: 'Devolução PIX',
          returnedAt: now,
        });
        return { ok: true, value: { returned: true, endToEndId: returnId, notificationId } };
      },
    );
    if (!outcome.ok) return outcome;
    await this.deliverNow([outcome.value.notificationId]);
    return { ok: true, value: { returned: outcome.value.returned, endToEndId: outcome.value.endToEndId } };
  }

  /**
   * Inserts a payment under a freshly drawn end-to-end id, drawing again while the id is taken. The
   * draws follow SIM_SEED, so a process restarted with the same seed draws ids it already used (in
   * the same minute, the ids' time stamp); keeping the old payment would silently lose the new one.
   */
  private async insertWithFreshId(tx: Sql, draw: () => string, payment: (id: string) => store.NewSimPayment): Promise<string> {
    for (let attempt = 0; attempt < 100; attempt++) {
      const id = draw();
      if ((await store.insertPayment(tx, payment(id))).inserted) return id;
    }
    throw new Error('rail simulator: no free end-to-end id after 100 draws');
  }

  /**
   * POST /pix/inbound: a PIX from a payer of another institution to one of this institution's
   * accounts, settled at once. Missing payer fields are drawn from the seeded generator. Resolves
   * once the notification has been delivered (the account is credited), with its end-to-end id.
   */
  async simulateInboundPayment(input: {
    accountId: number;
    amount: number;
    payerName?: string | undefined;
    payerDocument?: string | undefined;
    payerIspb?: string | undefined;
    description?: string | undefined;
    txid?: string | undefined;
  }): Promise<string> {
    const drawn = randomPayer(this.random);
    const payer = { name: input.payerName ?? drawn.name, document: input.payerDocument ?? drawn.document, ispb: input.payerIspb ?? drawn.ispb };
    const now = this.options.clock.now();
    let endToEndId = '';
    const notificationId = await this.options.db.transaction(async (tx) => {
      endToEndId = await this.insertWithFreshId(tx, () => this.random.endToEndId('E', payer.ispb, now), (id) => ({
        end_to_end_id: id,
        kind: 'payment',
        direction: 'inbound',
        amount: input.amount,
        payer_name: payer.name,
        payer_document: payer.document,
        payer_ispb: payer.ispb,
        receiver_ispb: this.options.institutionIspb,
        receiver_account_id: input.accountId,
        status: 'settled',
        description: input.description ?? null,
        txid: input.txid ?? null,
        created_at: now,
        resolved_at: now,
      }));
      return this.notify(tx, now, endToEndId, {
        kind: 'inbound.payment',
        endToEndId,
        amount: input.amount,
        receiverAccountId: input.accountId,
        payer,
        description: input.description ?? null,
        txid: input.txid ?? null,
        receivedAt: now,
      });
    });
    await this.deliverNow([notificationId]);
    return endToEndId;
  }

  // ---- infractions (MED) ----

  /**
   * POST /infractions: the payer's side reports an infraction (MED) against a PIX this institution
   * received, claiming `amount` (default: all of the payment not returned yet). Resolves once the
   * notification has been delivered (the service placed its block), with the infraction's id.
   */
  async reportInfraction(input: { endToEndId: string; amount: number | undefined; reason: string }): Promise<SandboxOutcome<{ id: string }>> {
    const outcome = await this.options.db.transaction(async (tx): Promise<SandboxOutcome<{ id: string; notificationId: string }>> => {
      const payment = await store.findPayment(tx, input.endToEndId, true);
      if (!payment || payment.kind !== 'payment' || payment.direction !== 'inbound' || payment.receiver_account_id === null || payment.status !== 'settled') {
        return { ok: false, reason: 'not_found', detail: 'No PIX received by this institution has that end_to_end_id' };
      }
      const open = await infractions.findOpenInfraction(tx, payment.end_to_end_id);
      if (open) return { ok: false, reason: 'conflict', detail: `The payment already has an open infraction (${open.id})` };
      const remaining = payment.amount - payment.returned_amount;
      if (remaining <= 0) return { ok: false, reason: 'unprocessable', detail: 'The payment was returned in full; nothing is left to claim' };
      const amount = input.amount ?? remaining;
      if (amount > remaining) {
        const cents = (v: number) => v / BASE_UNITS_PER_CENT; // amounts of the rail are whole cents
        return {
          ok: false,
          reason: 'unprocessable',
          detail: `amount exceeds what can still be returned of the payment (${cents(remaining)} of ${cents(payment.amount)} cents)`,
        };
      }
      const now = this.options.clock.now();
      const id = randomUUID();
      await infractions.insertInfraction(tx, { id, end_to_end_id: payment.end_to_end_id, amount, reason: input.reason, created_at: now });
      const notificationId = await this.notify(tx, now, payment.end_to_end_id, {
        kind: 'infraction.reported',
        infractionId: id,
        endToEndId: payment.end_to_end_id,
        amount,
        reason: input.reason,
        reportedAt: now,
      });
      return { ok: true, value: { id, notificationId } };
    });
    if (!outcome.ok) return outcome;
    await this.deliverNow([outcome.value.notificationId]);
    return { ok: true, value: { id: outcome.value.id } };
  }

  /** POST /infractions/:id/resolve: the final decision on an open infraction, delivered before answering. */
  async resolveInfraction(id: string, decision: InfractionDecision): Promise<SandboxOutcome> {
    const outcome = await this.options.db.transaction(async (tx): Promise<SandboxOutcome<string>> => {
      const row = await infractions.lockInfraction(tx, id);
      if (!row) return { ok: false, reason: 'not_found', detail: 'Infraction not found' };
      if (row.status !== 'OPEN') return { ok: false, reason: 'conflict', detail: `The infraction is already ${row.status}` };
      const now = this.options.clock.now();
      await infractions.resolveInfraction(tx, id, decision, now);
      const notificationId = await this.notify(tx, now, row.end_to_end_id, {
        kind: 'infraction.resolved',
        infractionId: id,
        endToEndId: row.end_to_end_id,
        decision,
        resolvedAt: now,
      });
      return { ok: true, value: notificationId };
    });
    if (!outcome.ok) return outcome;
    await this.deliverNow([outcome.value]);
    return { ok: true, value: undefined };
  }

  // ---- engine ----

  /**
   * Unleased notifications may wait in the queue (queued by this process other than by a
   * settlement it delivers itself, or before the handler was set; and on start): the next tick
   * claims. Otherwise a tick only delivers what it settled itself, and claims when a deferred
   * delivery falls due (`claimAt`) or on the safety net — a notification of another process that
   * died waits at most that long, as before.
   */
  private claimDue = true;
  /** When deliveries this process deferred after a failure fall due (monotonicNow ms). */
  private readonly claimAt: number[] = [];
  /** When this process last claimed (monotonicNow ms): a busy engine still claims every safetyMs. */
  private lastClaim = 0;
  private get safetyMs(): number {
    const fallback = this.options.clock === systemClock ? SAFETY_POLL_MS : TEST_CLOCK_POLL_MS;
    return Math.max(MIN_POLL_MS, this.options.pollMs ?? fallback);
  }

  /**
   * One pass of the engine: advances due payments, then delivers notifications, until idle.
   * `claim` (default true): look for queued notifications in any case. The engine's own loop
   * passes false: it claims only when a claim is due (`claimDue`, `claimAt`, or safetyMs since
   * the last one — so the safety net's tick, which comes safetyMs after the last tick, claims).
   */
  async tick(options: { claim?: boolean } = {}): Promise<void> {
    if (options.claim ?? true) this.claimDue = true;
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
      if (now - this.lastClaim >= this.safetyMs - WAKE_STEP_MS) this.claimDue = true;
      if (this.claimAt.some((at) => at <= now)) {
        this.claimDue = true;
        for (let i = this.claimAt.length - 1; i >= 0; i--) if (this.claimAt[i]! <= now) this.claimAt.splice(i, 1);
      }
      if (this.claimDue) {
        this.claimDue = false;
        this.lastClaim = now;
        delivered = await this.deliver();
        // A full claim may have left more behind.
        if (delivered >= DELIVERY_BATCH) this.claimDue = true;
      }
      if (advanced === 0 && delivered === 0) return;
      // Work that falls due later comes with its own wake-up; only a full batch means more is due.
      advance = advanced >= DUE_BATCH;
    }
  }

  /** Sees the wall clock step back (the first tick counts: a step may predate this process). */
  private backwardSteps: BackwardSteps | undefined;
  /**
   * Look for deadlines a clock step left in the future on the next tick: when the engine starts (a
   * step may predate this process, whose deadlines another process wrote) and when a step back was
   * seen outside a tick.
   */
  private clampPending = false;

  /**
   * Whether the wall clock stepped back since the last look; looked at by every tick and wherever
   * a deadline is written (a step forward and back between two ticks is seen too).
   */
  private sawBackwardStep(): boolean {
    return (this.backwardSteps ??= new BackwardSteps(this.options.clock)).seen();
  }

  /** Where deadlines are written: a step back seen here is clamped by the next tick. */
  private lookForBackwardStep(): void {
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
      this.claimDue = true;
    }
  }

  /**
   * Due work: settlements in one statement (the common case; their notifications leased at once
   * and delivered here), anything else in a transaction.
   */
  private async advanceDue(): Promise<number> {
    const now = this.options.clock.now();
    // Without a handler yet nothing is leased: the claim delivers once there is one.
    const leaseUntil = this.handler ? new Date(now.getTime() + DELIVERY_LEASE_MS) : null;
    const fast = await store.settleDuePayments(this.options.db, now, DUE_BATCH, leaseUntil);
    if (fast.unleased > 0) this.claimDue = true;
    if (fast.leased.length > 0) await this.deliverRows(fast.leased);
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
    if (row.status === 'protection') {
      await store.updatePayment(tx, row.end_to_end_id, { status: 'in_flight', due_at: new Date(now.getTime() + this.options.settlementMs) });
      this.wakeEngine(monotonicNow() + this.options.settlementMs);
      await this.notify(tx, now, row.end_to_end_id, { kind: 'payment.accepted', endToEndId: row.end_to_end_id });
      return;
    }
    if (row.kind === 'return') {
      if (row.behavior === 'settle') {
        await store.updatePayment(tx, row.end_to_end_id, { status: 'settled', due_at: null, resolved_at: now });
        await this.notify(tx, now, row.end_to_end_id, { kind: 'return.settled', endToEndId: row.end_to_end_id, settledAt: now });
      } else {
        const rejection = Object.values(REJECTION).find((r) => r.code === row.reason_code) ?? REJECTION.originalNotFound;
        await store.updatePayment(tx, row.end_to_end_id, { status: 'rejected', due_at: null, resolved_at: now });
        await this.notify(tx, now, row.end_to_end_id, { kind: 'return.rejected', endToEndId: row.end_to_end_id, reasonCode: rejection.code, reason: rejection.reason });
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
        await this.notify(tx, now, row.end_to_end_id, { kind: 'payment.held', endToEndId: row.end_to_end_id });
        return;
    }
  }

  private async settle(tx: Sql, row: store.SimPaymentRow, now: Date): Promise<string> {
    await store.updatePayment(tx, row.end_to_end_id, { status: 'settled', due_at: null, resolved_at: now });
    return this.notify(tx, now, row.end_to_end_id, { kind: 'payment.settled', endToEndId: row.end_to_end_id, settledAt: now });
  }

  private async reject(tx: Sql, row: store.SimPaymentRow, now: Date, rejection: { code: string; reason: string }): Promise<string> {
    await store.updatePayment(tx, row.end_to_end_id, { status: 'rejected', due_at: null, resolved_at: now, reason_code: rejection.code });
    return this.notify(tx, now, row.end_to_end_id, {
      kind: 'payment.rejected',
      endToEndId: row.end_to_end_id,
      reasonCode: rejection.code,
      reason: rejection.reason,
    });
  }

  /** Queues a notification in the simulator's transaction; its id is derived from what it reports. */
  private async notify(tx: Sql, now: Date, subject: string, body: DistributiveOmit<RailNotification, 'id' | 'at'>): Promise<string> {
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
   * Delivers leased notifications to the handler — all of them in one call when it takes batches
   * (the service applies the settlements of the batch in one transaction), else one call each,
   * concurrently; the lease gives at most one notification per subject, so their order does not
   * matter between them. A failure is retried later with backoff.
   */
  private async deliver(): Promise<number> {
    const handler = this.handler;
    if (!handler) {
      this.claimDue = true;
      return 0;
    }
    const { db, clock, log } = this.options;
    const now = clock.now();
    const rows = await store.claimNotifications(db, now, new Date(now.getTime() + DELIVERY_LEASE_MS), DELIVERY_BATCH);
    if (rows.length === 0) return 0;
    await this.deliverRows(rows);
    return rows.length;
  }

  /** Hands leased notifications to the handler (see `deliver`); deletes the applied ones, defers the others. */
  private async deliverRows(rows: store.SimNotificationRow[]): Promise<void> {
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
        this.wakeEngine(monotonicNow() + backoff);
      }),
    );
    // Applied notifications are deleted together (a crash before this redelivers them: the
    // service's inbox makes that a no-op), each named by its id and notification id: after a
    // failover the id alone may name another one (store.LeasedNotification).
    await store.deleteNotifications(db, delivered);
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
}

/** The end-to-end id of what a refused notification brought: the inbound payment, or the return. */
function refusedPayment(n: RailNotification): string {
  if (n.kind === 'inbound.payment') return n.endToEndId;
  if (n.kind === 'payment.returned') return n.returnEndToEndId;
  throw new Error(`a ${n.kind} notification cannot be refused`);
}

function outboundOrder(order: PaymentOrder): store.OutboundOrder {
  return {
    end_to_end_id: order.endToEndId,
    transaction_id: order.transactionId,
    amount: order.amount,
    payer_name: order.payer.name,
    payer_document: order.payer.document,
    payer_ispb: order.payer.ispb,
    payer_account_id: order.payer.accountId,
    receiver_key: order.receiverKey,
    description: order.description,
    txid: order.txid,
  };
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

const DATE_FIELDS = new Set(['settledAt', 'returnedAt', 'receivedAt', 'reportedAt', 'resolvedAt']);

function toNotification(row: store.SimNotificationRow): RailNotification {
  const body: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row.payload)) body[k] = DATE_FIELDS.has(k) && typeof v === 'string' ? new Date(v) : v;
  return { ...body, id: row.notification_id, at: row.created_at } as RailNotification;
}
