import { type BatchOutcome } from '../../lib/batcher.js';
import { booksBusy, CASH_OUT_BATCH_MAX, WAIT_LANE_MAX, WAIT_LANES_MAX, WAIT_LANES_RUNNING, type Reserved, type ReserveRequest, type Settled } from './types.js';

interface LaneItem {
  item: ReserveRequest;
  resolve: (value: Settled) => void;
  reject: (err: unknown) => void;
}

/**
 * The cash-outs of accounts whose books a batch found held elsewhere, one lane per account: the
 * lane runs them in batches of their own that wait for the books (`runBatch` in `wait` mode), in
 * arrival order; while it has items, the account's new cash-outs queue behind them (so an
 * account's cash-outs are still decided in arrival order). Bounded: WAIT_LANES_MAX lanes,
 * WAIT_LANE_MAX items waiting in each and WAIT_LANES_RUNNING waiting for their books at once;
 * past a bound the request is answered 503 with Retry-After (OverloadedError).
 */
export class WaitLanes {
  private readonly lanes = new Map<number, LaneItem[]>();
  private readonly ready: number[] = [];
  private running = 0;

  /** `run`: a batch of one account's cash-outs that waits for its books (`runBatch` in `wait` mode). */
  constructor(private readonly run: (batch: ReserveRequest[]) => Promise<BatchOutcome<Reserved>[]>) {}

  has(accountId: number): boolean {
    return this.lanes.has(accountId);
  }

  enqueue(item: ReserveRequest): BatchOutcome<Reserved> {
    const id = item.caller.accountId;
    let lane = this.lanes.get(id);
    if (!lane) {
      if (this.lanes.size >= WAIT_LANES_MAX) return { ok: false, error: booksBusy() };
      this.lanes.set(id, (lane = []));
      this.ready.push(id);
    }
    if (lane.length >= WAIT_LANE_MAX) return { ok: false, error: booksBusy() };
    const queue = lane;
    const later = new Promise<Settled>((resolve, reject) => queue.push({ item, resolve, reject }));
    later.catch(() => {}); // awaited by its request (reserveInBatch); never unhandled meanwhile
    this.pump();
    return { ok: true, value: { later } };
  }

  private pump(): void {
    while (this.running < WAIT_LANES_RUNNING && this.ready.length > 0) {
      const id = this.ready.shift()!;
      this.running++;
      void this.drain(id).finally(() => {
        this.running--;
        this.pump();
      });
    }
  }

  private async drain(accountId: number): Promise<void> {
    const lane = this.lanes.get(accountId)!;
    try {
      while (lane.length > 0) {
        const batch = lane.splice(0, CASH_OUT_BATCH_MAX);
        let outcomes: BatchOutcome<Reserved>[];
        try {
          outcomes = await this.run(batch.map((w) => w.item));
        } catch (err) {
          outcomes = batch.map(() => ({ ok: false, error: err }));
        }
        batch.forEach((w, i) => {
          const o = outcomes[i]!;
          if (!o.ok) w.reject(o.error);
          else if ('later' in o.value) w.reject(new Error('a waiting cash-out was deferred again'));
          else w.resolve(o.value);
        });
      }
    } finally {
      this.lanes.delete(accountId);
    }
  }
}
