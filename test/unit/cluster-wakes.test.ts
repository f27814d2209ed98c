import { describe, expect, it } from 'vitest';
import { isWakeMessage, RAIL_ENGINE, runsBackgroundLoops, wakeSender, type WakeMessage } from '../../src/lib/clusterWakes.js';

const flushed = () => new Promise((r) => setTimeout(r, 25));

describe('cluster wake-ups (src/lib/clusterWakes.ts)', () => {
  it('leave in one message per window: each channel once however often it was woken, in the order first woken', async () => {
    const sent: WakeMessage[] = [];
    const sender = wakeSender((m) => sent.push(m));
    for (let i = 0; i < 50; i++) sender.wake('outbox');
    sender.wake('other');
    expect(sent).toEqual([]); // not before the window closes
    await flushed();
    expect(sent).toEqual([{ pixgate: 'wake', wakes: [{ name: 'outbox' }, { name: 'other' }] }]);
    sender.wake('outbox');
    await flushed();
    expect(sent).toEqual([
      { pixgate: 'wake', wakes: [{ name: 'outbox' }, { name: 'other' }] },
      { pixgate: 'wake', wakes: [{ name: 'outbox' }] },
    ]);
  });

  it("carry the engine's wake-up for a time once, and again for another time, with the channels of the same window", async () => {
    const sent: WakeMessage[] = [];
    const sender = wakeSender((m) => sent.push(m));
    sender.wakeAt(RAIL_ENGINE, 1000);
    sender.wake('outbox');
    sender.wakeAt(RAIL_ENGINE, 1000);
    sender.wakeAt(RAIL_ENGINE, 1020);
    await flushed();
    sender.wakeAt(RAIL_ENGINE, 1020); // sent already
    await flushed();
    expect(sent).toEqual([
      {
        pixgate: 'wake',
        wakes: [
          { name: RAIL_ENGINE, at: 1000 },
          { name: 'outbox' },
          { name: RAIL_ENGINE, at: 1020 },
        ],
      },
    ]);
  });

  it('recognise their own messages only', () => {
    expect(isWakeMessage({ pixgate: 'wake', wakes: [{ name: 'outbox' }, { name: RAIL_ENGINE, at: 1 }] })).toBe(true);
    expect(isWakeMessage({ pixgate: 'wake', wakes: [] })).toBe(true);
    expect(isWakeMessage({ pixgate: 'wake', name: 'outbox' })).toBe(false); // the one-wake-up-per-message form of before
    expect(isWakeMessage({ pixgate: 'wake', wakes: [{}] })).toBe(false);
    expect(isWakeMessage({ pixgate: 'wake' })).toBe(false);
    expect(isWakeMessage({ type: 'prom-client:getMetricsReq' })).toBe(false);
    expect(isWakeMessage(null)).toBe(false);
    expect(isWakeMessage('wake')).toBe(false);
  });

  it('run the background loops in a process that is not a cluster worker', () => {
    expect(runsBackgroundLoops({})).toBe(true);
  });
});
