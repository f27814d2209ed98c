/**
 * Group commit for any step that is cheaper done for many requests at once (TigerBeetle's
 * batching, PostgreSQL's own group commit): `submit` queues an item; items submitted in one turn
 * of the event loop, and those that arrive while `maxInFlight` batches are running, go together
 * to the next `run` (at most `maxBatch` each, in arrival order). Alone, an item waits one loop
 * turn at most; under load, one round trip (one transaction, one commit) serves many requests.
 *
 * `run` answers each item on its own — a value or that item's own error — so one item's refusal
 * never fails the others; if `run` throws, every item of the batch fails with that error.
 */
export type BatchOutcome<O> = { ok: true; value: O } | { ok: false; error: unknown };

/**
 * A bounded queue refused an item: the work is not done (nothing was started), and the caller may
 * try again after `retryAfterSeconds`. The HTTP edge answers it 503 with Retry-After.
 */
export class OverloadedError extends Error {
  constructor(
    message: string,
    readonly retryAfterSeconds = 1,
  ) {
    super(message);
    this.name = 'OverloadedError';
  }
}

/** Items a Batcher holds waiting at most, by default, per item of its `maxBatch`. */
export const DEFAULT_QUEUE_BATCHES = 64;

export interface BatcherOptions<I, O> {
  run: (items: I[]) => Promise<BatchOutcome<O>[]>;
  /** Most items one `run` takes. */
  maxBatch: number;
  /** Batches running at once (1: each batch waits for the one before, as a single writer). */
  maxInFlight?: number;
  /** Told of every batch once it ran (metrics: src/metrics, `Metrics.batchObserver`). */
  observe?: BatchObserver;
  /**
   * Under load, how long the next batch waits for more items (ms; default 0): only a batch that
   * follows one that just finished waits, so a request alone is never held. A single writer whose
   * batches cost mostly per batch (a statement, a commit) trades that little latency for larger
   * batches.
   */
  lingerMs?: number;
  /**
   * Most items waiting for a batch (not counting those of running batches; default
   * DEFAULT_QUEUE_BATCHES × maxBatch): past it, `submit` fails at once with an OverloadedError
   * instead of queueing without limit.
   */
  maxQueued?: number;
  /** What the OverloadedError says is full (default "the batch queue"). */
  name?: string;
}

/**
 * What one batch cost: its items, how long its first item waited for it to start (the time spent
 * queued behind running batches) and how long `run` took, in milliseconds.
 */
export type BatchObserver = (batch: { items: number; waitedMs: number; ranMs: number }) => void;

interface Waiting<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (err: unknown) => void;
  queuedAt: number;
}

export class Batcher<I, O> {
  private queue: Waiting<I, O>[] = [];
  private scheduled = false;
  private inFlight = 0;
  private readonly maxInFlight: number;
  private readonly maxQueued: number;

  constructor(private readonly options: BatcherOptions<I, O>) {
    this.maxInFlight = options.maxInFlight ?? 1;
    this.maxQueued = options.maxQueued ?? DEFAULT_QUEUE_BATCHES * options.maxBatch;
  }

  submit(item: I): Promise<O> {
    if (this.queue.length >= this.maxQueued) {
      return Promise.reject(new OverloadedError(`${this.options.name ?? 'the batch queue'} is full (${this.maxQueued} waiting); retry shortly`));
    }
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject, queuedAt: this.options.observe ? performance.now() : 0 });
      this.schedule();
    });
  }

  /** Items waiting for a batch (not counting those of running batches). */
  get waiting(): number {
    return this.queue.length;
  }

  private schedule(afterBatch = false): void {
    if (this.scheduled || this.queue.length === 0 || this.inFlight >= this.maxInFlight) return;
    this.scheduled = true;
    const linger = afterBatch && this.options.lingerMs && this.queue.length < this.options.maxBatch ? this.options.lingerMs : 0;
    (linger > 0 ? (f: () => void) => setTimeout(f, linger) : setImmediate)(() => {
      this.scheduled = false;
      while (this.queue.length > 0 && this.inFlight < this.maxInFlight) void this.runOne(this.queue.splice(0, this.options.maxBatch));
    });
  }

  private async runOne(batch: Waiting<I, O>[]): Promise<void> {
    this.inFlight++;
    const started = this.options.observe ? performance.now() : 0;
    try {
      const outcomes = await this.options.run(batch.map((w) => w.item));
      batch.forEach((w, i) => {
        const outcome = outcomes[i];
        if (!outcome) w.reject(new Error(`batch answered ${outcomes.length} of ${batch.length} items`));
        else if (outcome.ok) w.resolve(outcome.value);
        else w.reject(outcome.error);
      });
    } catch (err) {
      for (const w of batch) w.reject(err);
    } finally {
      this.inFlight--;
      this.schedule(true);
      try {
        this.options.observe?.({ items: batch.length, waitedMs: started - batch[0]!.queuedAt, ranMs: performance.now() - started });
      } catch {
        // Measuring never stops the batches.
      }
    }
  }
}

/**
 * One Batcher per key object (per database: tests run several apps in one process), made on first
 * use.
 */
export function batcherPer<K extends object, I, O>(make: (key: K) => Batcher<I, O>): (key: K) => Batcher<I, O> {
  return onePer(make);
}

/** One value per key object, made on first use (a batcher, an observer: per app context). */
export function onePer<K extends object, V>(make: (key: K) => V): (key: K) => V {
  const made = new WeakMap<K, V>();
  return (key) => {
    let v = made.get(key);
    if (v === undefined) made.set(key, (v = make(key)));
    return v;
  };
}
