import { describe, expect, it } from 'vitest';
import { isWakeMessage, RAIL_ENGINE, runsBackgroundLoops, wakeSender, type WakeMessage } from '../../src/lib/clusterWakes.js';

describe('cluster wake-ups (src/lib/clusterWakes.ts)', () => {
  it("coalesce a channel's wake-ups within a few milliseconds into one message, each channel its own", async () => {
    const sent: WakeMessage[] = [];
    const sender = wakeSender((m) => sent.push(m));
    for (let i = 0; i < 50; i++) sender.wake('outbox');
    sender.wake('other');
    expect(sent).toEqual([]); // not before the window closes
    await new Promise((r) => setTimeout(r, 20));
    expect(sent).toEqual([
      { pixgate: 'wake', name: 'outbox' },
      { pixgate: 'wake', name: 'other' },
    ]);
    sender.wake('outbox');
    await new Promise((r) => setTimeout(r, 20));
    expect(sent).toHaveLength(3);
  });

  it("send the engine's wake-up for a time once, and again for another time", () => {
    const sent: WakeMessage[] = [];
    const sender = wakeSender((m) => sent.push(m));
    sender.wakeAt(RAIL_ENGINE, 1000);
    sender.wakeAt(RAIL_ENGINE, 1000);
    sender.wakeAt(RAIL_ENGINE, 1020);
    expect(sent).toEqual([
      { pixgate: 'wake', name: RAIL_ENGINE, at: 1000 },
      { pixgate: 'wake', name: RAIL_ENGINE, at: 1020 },
    ]);
  });

  it('recognise their own messages only', () => {
    expect(isWakeMessage({ pixgate: 'wake', name: 'outbox' })).toBe(true);
    expect(isWakeMessage({ pixgate: 'wake' })).toBe(false);
    expect(isWakeMessage({ type: 'prom-client:getMetricsReq' })).toBe(false);
    expect(isWakeMessage(null)).toBe(false);
    expect(isWakeMessage('wake')).toBe(false);
  });

  it('run the background loops in a process that is not a cluster worker', () => {
    expect(runsBackgroundLoops({})).toBe(true);
  });
});
