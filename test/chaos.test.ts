import { randomInt } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { formatReport, runChaos } from '../bench/chaos/harness.js';
import { missingPrerequisite } from '../bench/chaos/infra.js';

/**
 * The short version of `npm run chaos` (docs/chaos.md): the same harness — its own PostgreSQL
 * cluster and Redis on free ports, pixgate as a child process, concurrent signed clients — with a
 * few faults: 3 SIGKILLs, a PostgreSQL restart, a Redis stop and a rail stall (when the sandbox has
 * the switch). It must end with 0 anomalies. It runs where PostgreSQL is available (CI sets
 * TEST_DATABASE_URL; the binaries must be installed) and takes about a minute in its own fork, in
 * parallel with the other files. A failure prints the seed: `npm run chaos -- --seed N` replays it.
 */
const why = !process.env.TEST_DATABASE_URL
  ? 'TEST_DATABASE_URL is not set (the suite needs PostgreSQL binaries; CI has them)'
  : missingPrerequisite();
if (why) console.warn(`fault-injection short run skipped: ${why}`);

describe.skipIf(why !== undefined)('fault injection, short run of npm run chaos', () => {
  it('3 kills, a PostgreSQL restart, a Redis stop and a rail stall: every audit passes', async () => {
    const seed = process.env.CHAOS_SEED ? Number(process.env.CHAOS_SEED) : randomInt(1, 2 ** 31);
    const lines: string[] = [];
    const report = await runChaos({
      seed,
      durationMs: 20_000,
      kills: 3,
      pgRestarts: 1,
      redisStops: 1,
      stalls: 1,
      workers: 4,
      merchants: 2,
      drainMs: 60_000,
      log: (line) => lines.push(line),
    });
    const text = `${lines.join('\n')}\n${formatReport(report)}`;
    expect(report.figures.kills, text).toBeGreaterThanOrEqual(3);
    expect(report.figures.acknowledged, text).toBeGreaterThan(0);
    expect(report.anomalies, text).toEqual([]);
  }, 300_000);
});
