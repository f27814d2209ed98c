import { randomUUID } from 'node:crypto';
import { afterCommit, type Database, type Sql } from '../db/db.js';
import { Batcher, type BatchObserver, type BatchOutcome } from '../lib/batcher.js';
import { monotonicNow, type Clock } from '../lib/clock.js';
import { IdempotencyLostError, requestHash, type IdempotencyBinding, type PreparedAnswer } from '../lib/idempotencyKey.js';

export { IdempotencyLostError, requestHash, type IdempotencyBinding, type PreparedAnswer };

/**
 * Idempotency of external POSTs (spec, Limits: 24 h window, scope (method, path, key) — here also
 * the merchant, so two merchants never see each other's answers; only 2xx answers are kept).
 *
 * A request claims its key with an `in_progress` row carrying a fresh fencing token and a lease.
 * The business operation records its answer in its own database transaction through
 * `IdempotencyClaim.record`, which only succeeds while the token still owns the row; routes that do
 * not write record after the fact. A non-2xx answer releases the claim so the key can be retried.
 * A concurrent request with the same key waits for the first to finish and replays its answer.
 *
 * An operation that creates its record in one transaction and answers in a later one (a cash-out
 * or refund: reserve, rail call, record the acknowledgement) binds the key to that record in the
 * record's own transaction (`bind`, column `resource_id`). A bound key is never forgotten by a
 * release: the next request under it — a retry after a 5xx, or one that takes the key over after
 * the lease because its holder died — gets `resumes` and continues that record instead of
 * creating another.
 */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;
/**
 * After this a claim whose request never finished (crash) can be taken over (IDEMPOTENCY_LEASE_MS;
 * always longer than the rail deadline RAIL_TIMEOUT_MS).
 */
export const CLAIM_LEASE_MS = 60_000;
/** How long a concurrent duplicate waits for the first request before answering 409. */
export const WAIT_FOR_FIRST_MS = 15_000;
/**
 * A waiting duplicate looks again after 25 ms, then 50, 100, … at most every 500 ms; a request of
 * this process that finishes wakes its waiters at once.
 */
const POLL_FIRST_MS = 25;
/** A release the database refused is tried again after 100 ms, then 200, … at most every 2 s. */
const RELEASE_RETRY_FIRST_MS = 100;
const RELEASE_RETRY_MAX_MS = 2_000;
const POLL_MAX_MS = 500;

export interface IdempotencyScope {
  merchantId: number;
  method: string;
  path: string;
  key: string;
}

export interface StoredAnswer {
  statusCode: number;
  body: string;
}

export type ClaimResult =
  | { kind: 'claimed'; claim: IdempotencyClaim }
  | { kind: 'replay'; answer: StoredAnswer }
  | { kind: 'mismatch' }
  | { kind: 'busy' };

interface Row {
  id: number;
  request_hash: string;
  status: 'in_progress' | 'completed';
  owner_token: string;
  locked_until: Date;
  response_status: number | null;
  response_body: string | null;
  resource_id: string | null;
  expires_at: Date;
}

/** The claim a request holds on its key until it answers. */
export class IdempotencyClaim {
  /**
   * The answer recorded inside the business transaction, sent byte for byte. Set only once that
   * transaction has committed: an answer whose COMMIT failed was never recorded.
   */
  recorded: StoredAnswer | undefined;

  constructor(
    readonly id: number,
    readonly token: string,
    /** The record an earlier holder of this key created (bound with `bind`): resume it, create none. */
    readonly resumes: string | null = null,
    /** Wakes the requests of this process waiting on the key once it is settled. */
    readonly settled: () => void = () => {},
  ) {}

  /**
   * Binds the key to the record the operation creates, inside the transaction that creates it.
   * Throws (rolling that transaction back) if this request no longer owns the key.
   */
  async bind(tx: Sql, resourceId: string): Promise<void> {
    const rows = await tx.query(
      `UPDATE idempotency_keys SET resource_id = $3
        WHERE id = $1 AND owner_token = $2 AND status = 'in_progress' AND resource_id IS NULL RETURNING id`,
      [this.id, this.token, resourceId],
    );
    if (rows.length === 0) throw new IdempotencyLostError('the idempotency claim was lost');
  }

  /**
   * Records the answer inside the caller's transaction. Throws (rolling that transaction back) if
   * this request no longer owns the key, so an operation can never run twice under one key.
   */
  async record(tx: Sql, statusCode: number, body: string): Promise<void> {
    const rows = await tx.query(
      `WITH done AS (
         UPDATE idempotency_keys SET status = 'completed', response_status = $3
          WHERE id = $1 AND owner_token = $2 AND status = 'in_progress' RETURNING id, expires_at)
       ${INSERT_ANSWER} SELECT id, expires_at, $4 FROM done ${ON_ANSWER_CONFLICT} RETURNING key_id`,
      [this.id, this.token, statusCode, body],
    );
    if (rows.length === 0) throw new IdempotencyLostError('the idempotency claim was lost');
    this.recordedIn(tx, statusCode, body);
  }

  /**
   * For an operation that writes the answer itself, inside a larger statement of its own
   * transaction (the cash-out's record step): the same UPDATE as `record`, with its outcome
   * checked by the caller; `recordedIn` must then be called with that transaction.
   */
  prepare(statusCode: number, body: string): PreparedAnswer {
    return {
      id: this.id,
      token: this.token,
      statusCode,
      body,
      recordedIn: (tx) => this.recordedIn(tx, statusCode, body),
      recorded: () => this.markRecorded(statusCode, body),
    };
  }

  private recordedIn(tx: Sql, statusCode: number, body: string): void {
    afterCommit(tx, () => this.markRecorded(statusCode, body));
  }

  private markRecorded(statusCode: number, body: string): void {
    this.recorded = { statusCode, body };
    this.settled();
  }
}

function scopeId(scope: IdempotencyScope): string {
  return JSON.stringify([scope.merchantId, scope.method, scope.path, scope.key]);
}

/** A new claim to insert (the fast path of `claim`). */
interface NewClaim {
  scope: IdempotencyScope;
  hash: string;
  token: string;
  lease: Date;
  expires: Date;
}

/** A 2xx answer to store (`complete`). */
interface Completion {
  claim: IdempotencyClaim;
  answer: StoredAnswer;
}

/**
 * The answers are kept apart from the keys (migration 0910): in idempotency_responses, partitioned
 * by day over the expiry of their key, so retention drops whole days of answer bodies while the
 * small key rows keep their unique scope and lease. An answer is written in the statement that
 * completes its key; the conflict clause is a guard only (a key completes once).
 */
export const INSERT_ANSWER = 'INSERT INTO idempotency_responses (key_id, expires_at, body)';
export const ON_ANSWER_CONFLICT = 'ON CONFLICT (key_id, expires_at) DO UPDATE SET body = EXCLUDED.body';

/** Claims inserted, or answers stored, by one statement; and such statements at once. */
const CLAIM_BATCH = 200;
const CLAIMS_IN_FLIGHT = 2;

export class IdempotencyStore {
  private readonly leaseMs: number;
  /**
   * Group commit (src/lib/batcher.ts) for the two statements every keyed request sends: the
   * claims of one event-loop turn are inserted by one statement, the answers stored by another.
   */
  private readonly inserts: Batcher<NewClaim, number | null>;
  private readonly completions: Batcher<Completion, void>;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    options: { leaseMs?: number; observeBatch?: (name: string) => BatchObserver } = {},
  ) {
    this.leaseMs = options.leaseMs ?? CLAIM_LEASE_MS;
    const observe = (name: string) => (options.observeBatch ? { observe: options.observeBatch(name) } : {});
    this.inserts = new Batcher({ maxBatch: CLAIM_BATCH, maxInFlight: CLAIMS_IN_FLIGHT, run: (items) => oneByOneOnError(items, (i) => this.insertClaims(i)), ...observe('idempotency_claim') });
    this.completions = new Batcher({ maxBatch: CLAIM_BATCH, maxInFlight: CLAIMS_IN_FLIGHT, run: (items) => oneByOneOnError(items, (i) => this.storeAnswers(i)), ...observe('idempotency_answer') });
  }

  /**
   * One statement for many new claims: the id of each item's row, or null where the key was
   * already there (taken, or by an earlier item of the batch: the slow path then reads it). Rows
   * are inserted in key order, so two batches with the same keys (two processes, or two batches
   * in flight) wait for each other in one order and never deadlock; the same key twice in a batch
   * goes to the item that came first.
   */
  private async insertClaims(items: readonly NewClaim[]): Promise<BatchOutcome<number | null>[]> {
    const rows = await this.db.query<{ id: number; owner_token: string }>(
      `INSERT INTO idempotency_keys (merchant_id, method, path, key, request_hash, status, owner_token, locked_until, expires_at)
       SELECT merchant_id, method, path, key, request_hash, 'in_progress', owner_token, locked_until, expires_at
         FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::uuid[], $7::timestamptz[], $8::timestamptz[])
           WITH ORDINALITY AS x(merchant_id, method, path, key, request_hash, owner_token, locked_until, expires_at, n)
        ORDER BY merchant_id, method, path, key, n
       ON CONFLICT (merchant_id, method, path, key) DO NOTHING RETURNING id, owner_token::text`,
      [
        items.map((i) => i.scope.merchantId),
        items.map((i) => i.scope.method),
        items.map((i) => i.scope.path),
        items.map((i) => i.scope.key),
        items.map((i) => i.hash),
        items.map((i) => i.token),
        items.map((i) => i.lease),
        items.map((i) => i.expires),
      ],
    );
    const byToken = new Map(rows.map((r) => [r.owner_token, Number(r.id)]));
    return items.map((i) => ({ ok: true, value: byToken.get(i.token) ?? null }));
  }

  /** One statement for many answers (each only while its claim is held: id, token, in progress). */
  private async storeAnswers(items: readonly Completion[]): Promise<BatchOutcome<void>[]> {
    await this.db.query(
      `WITH done AS (
         UPDATE idempotency_keys k SET status = 'completed', response_status = x.status
           FROM unnest($1::bigint[], $2::uuid[], $3::int[], $4::text[]) AS x(id, token, status, body)
          WHERE k.id = x.id AND k.owner_token = x.token AND k.status = 'in_progress' RETURNING k.id, k.expires_at, x.body)
       ${INSERT_ANSWER} SELECT id, expires_at, body FROM done ORDER BY id ${ON_ANSWER_CONFLICT}`,
      [items.map((i) => i.claim.id), items.map((i) => i.claim.token), items.map((i) => i.answer.statusCode), items.map((i) => i.answer.body)],
    );
    return items.map(() => ({ ok: true, value: undefined }));
  }

  /** Requests of this process waiting on a key held by another request, by scope. */
  private readonly waiters = new Map<string, Set<() => void>>();

  async claim(scope: IdempotencyScope, hash: string): Promise<ClaimResult> {
    const deadline = monotonicNow() + WAIT_FOR_FIRST_MS;
    let pause = POLL_FIRST_MS;
    for (;;) {
      const result = await this.tryClaim(scope, hash);
      if (result !== 'wait') return result;
      const left = deadline - monotonicNow();
      if (left <= 0) return { kind: 'busy' };
      await this.sleepUnlessWoken(scopeId(scope), Math.min(pause, left));
      pause = Math.min(pause * 2, POLL_MAX_MS);
    }
  }

  private sleepUnlessWoken(id: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const set = this.waiters.get(id) ?? new Set();
      this.waiters.set(id, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0 && this.waiters.get(id) === set) this.waiters.delete(id);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
    });
  }

  private wake(id: string): void {
    for (const done of [...(this.waiters.get(id) ?? [])]) done();
  }

  private newClaim(scope: IdempotencyScope, id: number, token: string, resumes: string | null = null): IdempotencyClaim {
    const key = scopeId(scope);
    return new IdempotencyClaim(id, token, resumes, () => this.wake(key));
  }

  private async tryClaim(scope: IdempotencyScope, hash: string): Promise<ClaimResult | 'wait'> {
    const now = this.clock.now();
    const token = randomUUID();
    const lease = new Date(now.getTime() + this.leaseMs);
    const inserted = await this.inserts.submit({ scope, hash, token, lease, expires: new Date(now.getTime() + IDEMPOTENCY_WINDOW_MS) });
    if (inserted !== null) return { kind: 'claimed', claim: this.newClaim(scope, inserted, token) };

    const [row] = await this.db.query<Row>(
      `SELECT k.id, k.request_hash, k.status, k.owner_token, k.locked_until, k.response_status, r.body AS response_body, k.resource_id, k.expires_at
         FROM idempotency_keys k LEFT JOIN idempotency_responses r ON r.key_id = k.id AND r.expires_at = k.expires_at
        WHERE k.merchant_id = $1 AND k.method = $2 AND k.path = $3 AND k.key = $4`,
      [scope.merchantId, scope.method, scope.path, scope.key],
    );
    if (!row) return 'wait'; // released between the two statements: try again
    if (row.expires_at <= now) {
      // By id and the token read with it: after a failover the id may name another key (below).
      await this.db.query('DELETE FROM idempotency_keys WHERE id = $1 AND owner_token = $2 AND expires_at <= $3', [row.id, row.owner_token, now]);
      return 'wait';
    }
    if (row.request_hash !== hash) return { kind: 'mismatch' };
    if (row.status === 'completed') {
      // An answer's partition goes only once every key of its day has expired (checked above).
      if (row.response_body === null) throw new Error(`idempotency record ${row.id} is completed but its answer is missing`);
      return { kind: 'replay', answer: { statusCode: row.response_status!, body: row.response_body } };
    }
    // The request that held it never answered (crashed): take the key over with a new token. A
    // lease ending more than one whole lease later than one taken now was written before the wall
    // clock stepped back: it is over too (the holder, if alive, loses the key: its writes check
    // the token). Only past that horizon: leases taken by processes whose clocks differ by less
    // than a lease — other app nodes, or a request whose batch committed after a later one's —
    // are live and are waited for.
    // The row is named by its id and the token read with it: a failover between the two statements
    // can lose the row read (committed on the old primary, not yet on its standby) and the id it
    // took, which the new primary then gives another key — taking that one over would record this
    // request's answer under another scope. The token also makes the takeover a compare-and-swap.
    const horizon = new Date(lease.getTime() + this.leaseMs);
    if (row.locked_until <= now || row.locked_until > horizon) {
      const taken = await this.db.query<{ id: number }>(
        `UPDATE idempotency_keys SET owner_token = $2, locked_until = $3
          WHERE id = $1 AND owner_token = $6 AND status = 'in_progress' AND (locked_until <= $4 OR locked_until > $5) RETURNING id`,
        [row.id, token, lease, now, horizon, row.owner_token],
      );
      if (taken[0]) return { kind: 'claimed', claim: this.newClaim(scope, row.id, token, row.resource_id) };
    }
    return 'wait';
  }

  /** Stores a 2xx answer of a request that did not record it in its own transaction. */
  async complete(claim: IdempotencyClaim, answer: StoredAnswer): Promise<void> {
    await this.completions.submit({ claim, answer });
    claim.settled();
  }

  /**
   * Frees the key after a non-2xx answer: the client may retry with it. A key bound to a record
   * stays (with its lease ended), so the retry resumes that record.
   */
  async release(claim: IdempotencyClaim): Promise<void> {
    try {
      await this.releaseNow(claim);
    } catch {
      // The database did not take the release — often what failed the request (answered 503):
      // keep trying in the background until it does, or until the lease has ended (a retry may
      // then take the key over anyway), so the client's retry finds the key free, not "still
      // being processed" for the rest of the lease.
      this.releaseLater(claim);
    }
    claim.settled();
  }

  private releaseLater(claim: IdempotencyClaim): void {
    const giveUpAt = monotonicNow() + this.leaseMs;
    let delayMs = RELEASE_RETRY_FIRST_MS;
    const attempt = () => {
      const timer = setTimeout(() => {
        this.releaseNow(claim).then(
          () => claim.settled(),
          () => {
            delayMs = Math.min(delayMs * 2, RELEASE_RETRY_MAX_MS);
            if (monotonicNow() + delayMs < giveUpAt) attempt();
          },
        );
      }, delayMs);
      timer.unref();
    };
    attempt();
  }

  private async releaseNow(claim: IdempotencyClaim): Promise<void> {
    const deleted = await this.db.query(
      `DELETE FROM idempotency_keys WHERE id = $1 AND owner_token = $2 AND status = 'in_progress' AND resource_id IS NULL RETURNING id`,
      [claim.id, claim.token],
    );
    if (deleted.length === 0) {
      await this.db.query(
        `UPDATE idempotency_keys SET locked_until = $3 WHERE id = $1 AND owner_token = $2 AND status = 'in_progress'`,
        [claim.id, claim.token, this.clock.now()],
      );
    }
  }

}

/**
 * Runs a batch; if its statement fails and it has more than one item, runs each item alone, so
 * one item's bad value fails that item only (as before batching).
 */
async function oneByOneOnError<I, O>(items: I[], run: (items: I[]) => Promise<BatchOutcome<O>[]>): Promise<BatchOutcome<O>[]> {
  try {
    return await run(items);
  } catch (err) {
    if (items.length === 1) throw err;
    return Promise.all(
      items.map(async (item) => {
        try {
          return (await run([item]))[0]!;
        } catch (error) {
          return { ok: false as const, error };
        }
      }),
    );
  }
}
