import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { BLOCK_SIZE, canBind, ephemeralRange, PortBlock } from '../bench/ha/ports.js';

/**
 * The HA lab's ports (bench/ha/ports.ts): one block per lab, below the kernel's ephemeral range
 * (where no outgoing connection takes a port), reserved so two labs never share one, each port
 * handed out free.
 */
describe('the HA lab port block', () => {
  it('reserves disjoint blocks below the ephemeral range, hands out free ports only, and frees the block on release', async () => {
    const [ephemeralLow] = ephemeralRange();
    const a = await PortBlock.reserve();
    const b = await PortBlock.reserve();
    try {
      expect(a.base + BLOCK_SIZE).toBeLessThanOrEqual(ephemeralLow);
      expect(b.base + BLOCK_SIZE).toBeLessThanOrEqual(ephemeralLow);
      expect(Math.abs(a.base - b.base)).toBeGreaterThanOrEqual(BLOCK_SIZE);
      // A port of the block that someone binds meanwhile is skipped.
      const squatter = createServer();
      await new Promise<void>((r) => squatter.listen(a.base, '127.0.0.1', () => r()));
      try {
        expect(await canBind(a.base)).toBe(false);
        const first = await a.take();
        expect(first).toBe(a.base + 1);
        expect(await canBind(first)).toBe(true);
      } finally {
        await new Promise((r) => squatter.close(r));
      }
      const taken = [];
      for (let i = 2; i < BLOCK_SIZE; i++) taken.push(await a.take());
      expect(new Set(taken).size).toBe(BLOCK_SIZE - 2);
      await expect(a.take()).rejects.toThrow(/used up/);
    } finally {
      a.release();
      b.release();
    }
  });
});
