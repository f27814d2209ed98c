import { describe, expect, it, vi } from 'vitest';
import { Batcher, DEFAULT_QUEUE_BATCHES, OverloadedError, type BatcherOptions } from '../../src/lib/batcher.js';

const tick = () => new Promise((r) => setImmediate(r));

/** A Batcher that echoes its items and holds its first batch until `release()`. */
function firstBatchHeld(options: Omit<BatcherOptions<number, number>, 'run'>) {
  const batches: number[][] = [];
  let release!: () => void;
  const first = new Promise<void>((r) => (release = r));
  const b = new Batcher<number, number>({
    ...options,
    run: async (items) => {
      batches.push(items);
      if (batches.length === 1) await first;
      return items.map((value) => ({ ok: true, value }));
    },
  });
  return { b, batches, release };
}

describe('Batcher (group commit)', () => {
  it('runs the items of one loop turn as one batch, and answers each item with its own outcome', async () => {
    const batches: number[][] = [];
    const b = new Batcher<number, number>({
      maxBatch: 100,
      run: async (items) => {
        batches.push(items);
        return items.map((i) => (i % 2 === 0 ? { ok: true, value: i * 10 } : { ok: false, error: new Error(`odd ${i}`) }));
      },
    });
    const results = await Promise.allSettled([1, 2, 3, 4].map((i) => b.submit(i)));
    expect(batches).toEqual([[1, 2, 3, 4]]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual(['odd 1', 20, 'odd 3', 40]);
  });

  it('queues what arrives while a batch runs for the next batch, in arrival order, at most maxBatch each', async () => {
    const { b, batches, release } = firstBatchHeld({ maxBatch: 2 });
    const all = [b.submit(1)];
    await tick();
    all.push(b.submit(2), b.submit(3), b.submit(4));
    await tick();
    expect(batches).toEqual([[1]]); // one in flight: the others wait
    expect(b.waiting).toBe(3);
    release();
    expect(await Promise.all(all)).toEqual([1, 2, 3, 4]);
    expect(batches).toEqual([[1], [2, 3], [4]]);
  });

  it('lingerMs: a batch that follows one that just finished waits for more items; a lone item does not', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] }); // setImmediate stays real: the loop turns run
    try {
      const { b, batches, release } = firstBatchHeld({ maxBatch: 100, lingerMs: 50 });
      // Alone: runs on the next loop turn, no timer involved.
      const all = [b.submit(1)];
      await tick();
      expect(batches).toEqual([[1]]);
      // Behind a running batch: once it finishes, the next batch lingers 50 ms and gathers item 3 too.
      all.push(b.submit(2));
      release();
      await tick();
      await tick();
      all.push(b.submit(3));
      await tick();
      expect(batches).toEqual([[1]]);
      vi.advanceTimersByTime(50);
      expect(await Promise.all(all)).toEqual([1, 2, 3]);
      expect(batches).toEqual([[1], [2, 3]]);
      // Idle again: the next item is not held (no timer is advanced).
      expect(await b.submit(4)).toBe(4);
      expect(batches.at(-1)).toEqual([4]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('runs up to maxInFlight batches at once', async () => {
    let running = 0;
    let most = 0;
    const b = new Batcher<number, number>({
      maxBatch: 1,
      maxInFlight: 3,
      run: async (items) => {
        most = Math.max(most, ++running);
        await tick();
        running--;
        return items.map((value) => ({ ok: true, value }));
      },
    });
    await Promise.all([1, 2, 3, 4, 5, 6, 7].map((i) => b.submit(i)));
    expect(most).toBe(3);
  });

  it('fails every item of a batch whose run throws, and keeps serving later items', async () => {
    let calls = 0;
    const b = new Batcher<number, number>({
      maxBatch: 10,
      run: async (items) => {
        if (calls++ === 0) throw new Error('connection lost');
        return items.map((value) => ({ ok: true, value }));
      },
    });
    const failed = await Promise.allSettled([b.submit(1), b.submit(2)]);
    expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(await b.submit(3)).toBe(3);
  });

  it('fails an item the batch did not answer', async () => {
    const b = new Batcher<number, number>({ maxBatch: 10, run: async () => [{ ok: true, value: 1 }] });
    const r = await Promise.allSettled([b.submit(1), b.submit(2)]);
    expect(r[0]).toEqual({ status: 'fulfilled', value: 1 });
    expect(r[1]!.status).toBe('rejected');
  });

  it('tells its observer each batch: items, the wait behind the running batch, the run (failed batches too)', async () => {
    const seen: { items: number; waitedMs: number; ranMs: number }[] = [];
    let calls = 0;
    const b = new Batcher<number, number>({
      maxBatch: 2,
      run: async (items) => {
        await new Promise((r) => setTimeout(r, 30));
        if (calls++ === 2) throw new Error('lost');
        return items.map((value) => ({ ok: true, value }));
      },
      observe: (batch) => seen.push(batch),
    });
    // 1 and 2 run first; 3 and 4 wait for them (about 30 ms), then 5 alone, whose run throws.
    const r = await Promise.allSettled([1, 2, 3, 4, 5].map((i) => b.submit(i)));
    expect(r.map((x) => x.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'rejected']);
    expect(seen.map((x) => x.items)).toEqual([2, 2, 1]);
    expect(seen[0]!.waitedMs).toBeLessThan(25);
    expect(seen[1]!.waitedMs).toBeGreaterThanOrEqual(25);
    expect(seen[2]!.waitedMs).toBeGreaterThanOrEqual(50);
    for (const x of seen) expect(x.ranMs).toBeGreaterThanOrEqual(25);
  });

  it('bounds its queue (issue 24): past maxQueued waiting items, submit fails at once with an OverloadedError; room again once a batch takes them', async () => {
    const { b, batches, release } = firstBatchHeld({ maxBatch: 2, maxQueued: 3, name: 'the test queue' });
    const first = b.submit(1);
    await tick(); // 1 runs (held); the next ones wait
    const waiting = [b.submit(2), b.submit(3), b.submit(4)];
    const refused = await b.submit(5).then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(OverloadedError);
    expect((refused as OverloadedError).message).toMatch(/the test queue is full/);
    expect((refused as OverloadedError).retryAfterSeconds).toBeGreaterThan(0);
    expect(b.waiting).toBe(3);
    release();
    expect(await Promise.all([first, ...waiting])).toEqual([1, 2, 3, 4]);
    expect(await b.submit(6)).toBe(6);
    expect(batches.flat()).toEqual([1, 2, 3, 4, 6]);
  });

  it('is bounded by default: DEFAULT_QUEUE_BATCHES batches of items', async () => {
    const { b, release } = firstBatchHeld({ maxBatch: 1 });
    const all = [b.submit(0)];
    await tick();
    for (let i = 1; i <= DEFAULT_QUEUE_BATCHES; i++) all.push(b.submit(i));
    await expect(b.submit(-1)).rejects.toBeInstanceOf(OverloadedError);
    release();
    expect(await Promise.all(all)).toHaveLength(DEFAULT_QUEUE_BATCHES + 1);
  });
});
