/**
 * The clients of the fault-injection suite: concurrent workers that send signed cash-outs (v1 and
 * v2), refunds, cash-in charges paid through the sandbox, inbound PIX and MED infractions opened and
 * resolved, with and without Idempotency-Key and external_id, retrying after timeouts with the same
 * key and body. Every operation gets a marker (`chaos-<n>`, sent as its description) so the audit
 * can find every row it created, whatever the server answered. Every answer is logged.
 */
import type { Answer, Merchant, Operator } from './client.js';
import { sleep } from './infra.js';

export type OpKind = 'cash_out' | 'tef' | 'deposit' | 'refund' | 'charge' | 'charge_pay' | 'inbound' | 'med_open' | 'med_resolve' | 'payout_return';

export interface Op {
  id: string;
  kind: OpKind;
  merchant: number;
  accountId: number;
  sign?: 'v1' | 'v2';
  idempotencyKey?: string;
  externalId?: string;
  path: string;
  body: Record<string, unknown>;
  /** cash-out destination behaviour. */
  destination?: 'settle' | 'reject' | 'queued';
  sends: number;
  /** `at`: when the answer (or the client's deadline) came; `ms`: how long the request took. */
  answers: { at: number; status: number; code?: string; error?: string; ms?: number }[];
  acked?: { at: number; status: number; body: any };
  refused?: { status: number; text: string };
  /** Retries are safe only with an Idempotency-Key or an external_id (or for the sandbox's idempotent MED calls). */
  retryable: boolean;
  replay?: { status: number; transactionId?: string; text: string };
  /** charge_pay: the charge's transaction id and amount (cents). */
  parent?: string;
  chargeAmountCents?: number;
  /** tef: the destination's account id. */
  destinationAccount?: number;
  /** cash_out: one of a burst sent at once on one account (funds pressure). */
  burst?: boolean;
}

export interface Inbound {
  merchant: number;
  transactionId: string;
  endToEndId: string;
  amountCents: number;
  disputed: boolean;
}

/** mulberry32: a small seeded PRNG, so a failing run's choices can be replayed with its seed. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface WorkloadOptions {
  seed: number;
  workers: number;
  clientTimeoutMs: number;
  keys: { settle: string; reject: string; queued: string };
  /** Each merchant's EVP key (this institution's keys: destinations of TEFs). */
  evpKeys: string[];
  /** The operator API honours Idempotency-Key on deposits (detected at set-up): deposits join the mix. */
  idempotentDeposits: boolean;
  /**
   * Merchants under funds pressure (indices). `limited`: low daily and nighttime limits (the run
   * opens with a burst of 4 cash-outs of 80–95 % of the nighttime limit at once on each: only one
   * fits a window); `broke`: a small balance, refilled only by small inbound PIX. Their cash-outs
   * are R$ 30–90 and often sent in bursts of 2–4 at once, spread by the cluster over its
   * processes, so insufficient-balance and limit refusals happen.
   */
  limited?: number[];
  broke?: number[];
  /** Nighttime limit of the limited merchants (cents): sizes the opening bursts. */
  limitedNightCents?: number;
}

export interface Figures {
  [name: string]: number;
}

/** Status 0 (no answer), 5xx, 429, and 409 "still being processed" are worth a retry. */
function transient(a: Answer): boolean {
  if (a.status === 0 || a.status >= 500 || a.status === 429) return true;
  if (a.status === 409 && /still being processed|retry later/i.test(a.text)) return true;
  return false;
}

export class Workload {
  readonly ops: Op[] = [];
  readonly inbound: Inbound[] = [];
  /** What the clients saw that is wrong in itself; `check` names the anomaly (default: `answer`, or `harness` for a client error). */
  readonly notes: { op: string; what: string; detail: string; check?: string }[] = [];
  /** Cash-outs acknowledged to a settling key: what the receiver's bank may return (sandbox). */
  private readonly payouts: { merchant: number; transactionId: string; amountCents: number }[] = [];
  readonly figures: Figures = { client_retries: 0, server_errors_5xx: 0, no_answer: 0 };
  producing = true;
  /** After this, an operation stops retrying and is left unresolved. */
  retryDeadline = Number.POSITIVE_INFINITY;
  private next = 0;
  private running: Promise<void>[] = [];
  private readonly poor: Set<number>;
  private readonly broke: Set<number>;

  constructor(
    private readonly merchants: Merchant[],
    private readonly operator: Operator,
    private readonly o: WorkloadOptions,
  ) {
    this.poor = new Set([...(o.limited ?? []), ...(o.broke ?? [])]);
    this.broke = new Set(o.broke ?? []);
  }

  start(): void {
    const opening = (this.o.limited ?? []).map((m) => this.openingBurst(m));
    this.running = [...opening, ...Array.from({ length: this.o.workers }, (_, w) => this.worker(prng(this.o.seed * 7919 + w + 1)))];
  }

  /** A limited merchant added during the run (its index in the shared merchant list): it joins the mix after its opening burst. */
  addLimited(m: number): void {
    this.poor.add(m);
    this.running.push(this.openingBurst(m));
  }

  /**
   * The first cash-outs of a limit window, 4 at once (spread over the cluster's processes) while
   * the window's usage row does not exist yet, each 80–95 % of the nighttime limit: one fits.
   */
  private openingBurst(m: number): Promise<void> {
    const r = prng(this.o.seed * 104729 + m);
    const night = this.o.limitedNightCents ?? 100_000;
    return Promise.all(Array.from({ length: 4 }, () => this.cashOut(r, m, true, Math.floor(night * (0.8 + r() * 0.15))))).then(
      () => {},
      (err) => {
        this.notes.push({ op: '-', what: 'client error', detail: String((err as Error).stack ?? err) });
      },
    );
  }

  async stop(): Promise<void> {
    this.producing = false;
    await Promise.all(this.running);
  }

  private newOp(kind: OpKind, merchant: number, fields: Partial<Op> & { path: string; body: Record<string, unknown> }): Op {
    const op: Op = { id: `chaos-${++this.next}`, kind, merchant, accountId: this.merchants[merchant]!.accountId, sends: 0, answers: [], retryable: false, ...fields };
    this.ops.push(op);
    return op;
  }

  private async worker(r: () => number): Promise<void> {
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
    while (this.producing) {
      const m = Math.floor(r() * this.merchants.length);
      const roll = r();
      try {
        if (this.poor.has(m) && roll < 0.3) await this.burst(r, m);
        else if (roll < 0.35) await this.cashOut(r, m);
        else if (roll < 0.43) await this.tef(r, m);
        else if (roll < 0.55) await this.inboundPix(r, m);
        else if (roll < 0.7) await this.refund(r, m, pick);
        else if (roll < 0.82) await this.charge(r, m);
        else if (roll < 0.85) await (this.o.idempotentDeposits ? this.deposit(r, m) : this.charge(r, m));
        else if (roll < 0.88) await this.payoutReturn(r, m, pick);
        else await this.med(r, m, pick);
      } catch (err) {
        this.notes.push({ op: '-', what: 'client error', detail: String((err as Error).stack ?? err) });
      }
    }
  }

  /** Sends `op` until it is answered for good (2xx, or a refusal that is not transient), or the retry deadline passes. */
  async execute(op: Op, send: () => Promise<Answer>): Promise<Answer | undefined> {
    let backoff = 250;
    for (;;) {
      op.sends++;
      if (op.sends > 1) this.figures.client_retries!++;
      const started = Date.now();
      const a = await send();
      op.answers.push({ at: Date.now(), status: a.status, code: a.body?.code, error: a.error, ms: Date.now() - started });
      if (a.status === 0) this.figures.no_answer!++;
      const rawError = rawDriverError(a);
      if (rawError) this.notes.push({ op: op.id, check: 'raw_error_answer', what: `answered ${a.status} with a driver error`, detail: a.text.slice(0, 300) });
      else if (a.status === 500) this.notes.push({ op: op.id, check: 'answer_500', what: 'answered 500 (an unavailability must be a 503 with Retry-After)', detail: a.text.slice(0, 300) });
      if (a.status === 503 && a.retryAfter === undefined) this.notes.push({ op: op.id, check: 'answer_503_without_retry_after', what: 'answered 503 without Retry-After', detail: a.text.slice(0, 300) });
      if (a.status >= 500) {
        this.figures.server_errors_5xx!++;
        if (a.body && typeof a.body === 'object' && a.body.worked === true) {
          this.notes.push({ op: op.id, what: '5xx with a success body', detail: `${a.status} ${a.text.slice(0, 300)}` });
        }
      }
      if (a.status >= 200 && a.status < 300) {
        op.acked = { at: Date.now(), status: a.status, body: a.body };
        return a;
      }
      if (a.status === 409 && a.body?.code === 'external_id_conflict') {
        this.notes.push({ op: op.id, what: 'external_id_conflict on an identical resend', detail: a.text.slice(0, 300) });
      }
      const providerTimeout = a.body?.code === 'provider_timeout' && op.externalId !== undefined;
      if (!(transient(a) || providerTimeout) || !op.retryable || Date.now() > this.retryDeadline) {
        if (!transient(a)) op.refused = { status: a.status, text: a.text.slice(0, 300) };
        return a;
      }
      await sleep(providerTimeout ? 5000 : backoff * (0.5 + Math.random()));
      backoff = Math.min(backoff * 2, 3000);
    }
  }

  /** 2–4 cash-outs on one account at once, each sized so that not all of them fit in its balance or limits. */
  private async burst(r: () => number, m: number): Promise<void> {
    const n = 2 + Math.floor(r() * 3);
    const rs = Array.from({ length: n }, (_, i) => prng(Math.floor(r() * 2 ** 31) + i));
    await Promise.all(rs.map((ri) => this.cashOut(ri, m, true)));
  }

  private async cashOut(r: () => number, m: number, burst = false, cents?: number): Promise<void> {
    const merchant = this.merchants[m]!;
    const sign: 'v1' | 'v2' = r() < 0.3 ? 'v2' : 'v1';
    const withKey = sign === 'v2' || r() < 0.5;
    const withExternal = r() < 0.5;
    const d = r();
    const destination = d < 0.8 ? 'settle' : d < 0.9 ? 'reject' : 'queued';
    const n = this.next + 1;
    const amount = cents ?? (this.poor.has(m) ? 3000 + Math.floor(r() * 6000) : 100 + Math.floor(r() * 4900));
    const body: Record<string, unknown> = { amount, pix_key: this.o.keys[destination], description: `chaos-${n}` };
    if (withExternal) body.external_id = `ext-chaos-${n}`;
    const op = this.newOp('cash_out', m, {
      path: '/pix/cash-out',
      body,
      sign,
      destination,
      ...(burst ? { burst: true } : {}),
      ...(withKey ? { idempotencyKey: `key-chaos-${n}` } : {}),
      ...(withExternal ? { externalId: `ext-chaos-${n}` } : {}),
      retryable: withKey || withExternal,
    });
    const a = await this.execute(op, () => merchant.post(op.path, op.body, { sign, idempotencyKey: op.idempotencyKey, timeoutMs: this.o.clientTimeoutMs }));
    if (a && a.status >= 200 && a.status < 300 && destination === 'settle' && typeof a.body?.transaction_id === 'string') this.payouts.push({ merchant: m, transactionId: a.body.transaction_id, amountCents: amount });
  }

  /**
   * The receiver's bank returns part of a settled payout (sandbox; the rail notifies pixgate, which
   * credits it). Never resent: a second return is a second return.
   */
  private async payoutReturn(r: () => number, m: number, pick: <T>(xs: readonly T[]) => T): Promise<void> {
    const mine = this.payouts.filter((p) => p.merchant === m);
    if (mine.length === 0) return this.cashOut(r, m);
    const payout = pick(mine);
    const op = this.newOp('payout_return', m, { path: `/payouts/${payout.transactionId}/return`, body: { amount: 1 + Math.floor(r() * Math.max(1, payout.amountCents / 3)) }, parent: payout.transactionId });
    await this.execute(op, () => this.operator.call('sandbox', 'POST', op.path, op.body, this.o.clientTimeoutMs));
  }

  /** A TEF to another merchant's EVP key: synchronous, final in its answer. */
  private async tef(r: () => number, m: number): Promise<void> {
    if (this.merchants.length < 2) return this.cashOut(r, m);
    const merchant = this.merchants[m]!;
    const to = (m + 1 + Math.floor(r() * (this.merchants.length - 1))) % this.merchants.length;
    const sign: 'v1' | 'v2' = r() < 0.3 ? 'v2' : 'v1';
    const withKey = sign === 'v2' || r() < 0.5;
    const withExternal = r() < 0.5;
    const n = this.next + 1;
    const body: Record<string, unknown> = { amount: 100 + Math.floor(r() * 4900), pix_key: this.o.evpKeys[to], description: `chaos-${n}` };
    if (withExternal) body.external_id = `ext-chaos-${n}`;
    const op = this.newOp('tef', m, {
      path: '/tef/transfers',
      body,
      sign,
      destinationAccount: this.merchants[to]!.accountId,
      ...(withKey ? { idempotencyKey: `key-chaos-${n}` } : {}),
      ...(withExternal ? { externalId: `ext-chaos-${n}` } : {}),
      retryable: withKey || withExternal,
    });
    await this.execute(op, () => merchant.post(op.path, op.body, { sign, idempotencyKey: op.idempotencyKey, timeoutMs: this.o.clientTimeoutMs }));
  }

  /** An operator deposit with an Idempotency-Key, retried like a merchant request. */
  private async deposit(r: () => number, m: number): Promise<void> {
    const merchant = this.merchants[m]!;
    const n = this.next + 1;
    const op = this.newOp('deposit', m, {
      path: `/accounts/${merchant.accountId}/deposits`,
      body: { amount: 1000 + Math.floor(r() * 100_000), description: `chaos-${n}` },
      idempotencyKey: `key-chaos-${n}`,
      retryable: true,
    });
    await this.execute(op, () => this.operator.call('admin', 'POST', op.path, op.body, this.o.clientTimeoutMs, { 'idempotency-key': op.idempotencyKey! }));
  }

  private async inboundPix(r: () => number, m: number): Promise<void> {
    const merchant = this.merchants[m]!;
    const n = this.next + 1;
    const amountCents = this.broke.has(m) ? 2000 + Math.floor(r() * 6000) : 10_000 + Math.floor(r() * 190_000);
    const op = this.newOp('inbound', m, { path: '/pix/inbound', body: { account_id: merchant.accountId, amount: amountCents, description: `chaos-${n}` } });
    // The sandbox plays another bank sending a PIX: a resend would be a second payment, so no retry.
    const a = await this.execute(op, () => this.operator.call('sandbox', 'POST', op.path, op.body, this.o.clientTimeoutMs));
    if (a && a.status === 201) this.inbound.push({ merchant: m, transactionId: a.body.transaction_id, endToEndId: a.body.end_to_end_id, amountCents, disputed: false });
  }

  private async refund(r: () => number, m: number, pick: <T>(xs: readonly T[]) => T): Promise<void> {
    const mine = this.inbound.filter((i) => i.merchant === m && !i.disputed);
    if (mine.length === 0) return this.inboundPix(r, m);
    const original = pick(mine);
    const merchant = this.merchants[m]!;
    const sign: 'v1' | 'v2' = r() < 0.3 ? 'v2' : 'v1';
    const withKey = sign === 'v2' || r() < 0.6;
    const n = this.next + 1;
    const op = this.newOp('refund', m, {
      path: '/pix/refund',
      body: { original_transaction_id: original.transactionId, amount: 1 + Math.floor(r() * Math.min(500, original.amountCents / 40)), description: `chaos-${n}` },
      sign,
      ...(withKey ? { idempotencyKey: `key-chaos-${n}` } : {}),
      retryable: withKey,
    });
    await this.execute(op, () => merchant.post(op.path, op.body, { sign, idempotencyKey: op.idempotencyKey, timeoutMs: this.o.clientTimeoutMs }));
  }

  private async charge(r: () => number, m: number): Promise<void> {
    const merchant = this.merchants[m]!;
    const sign: 'v1' | 'v2' = r() < 0.3 ? 'v2' : 'v1';
    const withKey = sign === 'v2' || r() < 0.5;
    const withExternal = r() < 0.5;
    const n = this.next + 1;
    const body: Record<string, unknown> = { amount: 500 + Math.floor(r() * 50_000), description: `chaos-${n}`, expires_in: 3600 };
    if (withExternal) body.external_id = `ext-chaos-${n}`;
    const op = this.newOp('charge', m, {
      path: '/pix/cash-in',
      body,
      sign,
      ...(withKey ? { idempotencyKey: `key-chaos-${n}` } : {}),
      ...(withExternal ? { externalId: `ext-chaos-${n}` } : {}),
      retryable: withKey || withExternal,
    });
    const a = await this.execute(op, () => merchant.post(op.path, op.body, { sign, idempotencyKey: op.idempotencyKey, timeoutMs: this.o.clientTimeoutMs }));
    if (!a || a.status < 200 || a.status >= 300 || r() < 0.15) return;
    const pay = this.newOp('charge_pay', m, { path: '/pix/pay', body: { emv: a.body.emv }, parent: a.body.transaction_id, chargeAmountCents: Number(op.body.amount) });
    // The payer's bank pays once: a resend would be a second payment (credited as a plain PIX), so no retry.
    const paid = await this.execute(pay, () => this.operator.call('sandbox', 'POST', pay.path, pay.body, this.o.clientTimeoutMs));
    if (paid && paid.status === 201) {
      this.inbound.push({ merchant: m, transactionId: paid.body.transaction_id, endToEndId: paid.body.end_to_end_id, amountCents: Number(op.body.amount), disputed: false });
    }
  }

  private async med(r: () => number, m: number, pick: <T>(xs: readonly T[]) => T): Promise<void> {
    const mine = this.inbound.filter((i) => i.merchant === m && !i.disputed);
    if (mine.length === 0) return this.inboundPix(r, m);
    const original = pick(mine);
    original.disputed = true;
    const open = this.newOp('med_open', m, {
      path: '/infractions',
      body: { end_to_end_id: original.endToEndId, amount: 1 + Math.floor(r() * Math.floor(original.amountCents / 4)), reason: 'chaos' },
      retryable: true,
    });
    let infractionId: string | undefined;
    const a = await this.execute(open, async () => {
      const ans = await this.operator.call('sandbox', 'POST', open.path, open.body, this.o.clientTimeoutMs);
      // A resend after a lost answer meets the infraction it opened: that is its answer.
      const existing = ans.status === 409 ? /open infraction \(([0-9a-f-]{36})\)/.exec(ans.text)?.[1] : undefined;
      if (existing && open.sends > 1) {
        infractionId = existing;
        return { ...ans, status: 200, body: { id: existing } };
      }
      return ans;
    });
    if (!a || a.status < 200 || a.status >= 300) return;
    infractionId ??= a.body.id;
    await sleep(300 + r() * 2500);
    const d = r();
    const decision = d < 0.5 ? 'accepted' : d < 0.85 ? 'rejected' : 'cancelled';
    const resolve = this.newOp('med_resolve', m, { path: `/infractions/${infractionId}/resolve`, body: { decision }, retryable: true });
    await this.execute(resolve, async () => {
      const ans = await this.operator.call('sandbox', 'POST', resolve.path, resolve.body, this.o.clientTimeoutMs);
      if (ans.status === 409 && resolve.sends > 1 && /already/i.test(ans.text)) return { ...ans, status: 200 };
      return ans;
    });
  }

  /**
   * After the faults: every acknowledged cash-out, refund and charge sent with an Idempotency-Key
   * or an external_id is sent once more, identically. The answer must name the same record.
   */
  async replayAcknowledged(): Promise<void> {
    const todo = this.ops.filter((o) => o.acked && (o.kind === 'cash_out' || o.kind === 'tef' || o.kind === 'deposit' || o.kind === 'refund' || o.kind === 'charge') && (o.idempotencyKey || o.externalId));
    let i = 0;
    await Promise.all(
      Array.from({ length: this.o.workers }, async () => {
        while (i < todo.length) {
          const op = todo[i++]!;
          const merchant = this.merchants[op.merchant]!;
          let a: Answer;
          let tries = 0;
          do {
            a =
              op.kind === 'deposit'
                ? await this.operator.call('admin', 'POST', op.path, op.body, 15_000, { 'idempotency-key': op.idempotencyKey! })
                : await merchant.post(op.path, op.body, { sign: op.sign!, idempotencyKey: op.idempotencyKey, timeoutMs: 15_000 });
          } while (transient(a) && ++tries < 5 && (await sleep(1000), true));
          op.replay = { status: a.status, transactionId: a.body?.transaction_id, text: a.text.slice(0, 300) };
        }
      }),
    );
  }
}

/**
 * An answer that passes a database or network error through (issue 24, 15): a driver code
 * (ECONNREFUSED, a SQLSTATE such as 57P01) or an internal address in place of the API's own shape.
 */
export function rawDriverError(a: Answer): boolean {
  if (a.status < 400) return false;
  const code = a.body && typeof a.body === 'object' ? (a.body as { code?: unknown }).code : undefined;
  if (typeof code === 'string' && (/^E[A-Z]{3,}$/.test(code) || /^[0-9A-Z]{2}[0-9A-Z]{3}$/.test(code))) return true;
  return /ECONN[A-Z]+|EPIPE|ETIMEDOUT|\b127\.0\.0\.1:\d+|terminating connection|Connection terminated/i.test(a.text);
}
