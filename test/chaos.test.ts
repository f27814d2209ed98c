import { randomInt } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { formatReport, runChaos } from '../bench/chaos/harness.js';
import { missingPrerequisite } from '../bench/chaos/infra.js';

/**
 * The short version of `npm run chaos` (docs/chaos.md): the same harness — its own PostgreSQL
 * cluster and Redis on free ports, pixgate as a child process with WEB_CONCURRENCY=2, concurrent
 * signed clients, one limited and one broke merchant — with one of each kind of fault but two
 * SIGKILLs of the whole server: a cluster worker SIGKILLed, the postmaster SIGKILLed, Redis frozen,
 * a rail stall (when the sandbox has the switch) and a wall-clock step; the clean PostgreSQL
 * restart and the Redis stop are left to the long run. It must end with 0 anomalies. It runs where PostgreSQL is available (CI sets
 * TEST_DATABASE_URL; the binaries must be installed) and takes about a minute in its own fork, in
 * parallel with the other files. A failure prints the seed: `npm run chaos -- --seed N` replays it.
 */
const why = !process.env.TEST_DATABASE_URL
  ? 'TEST_DATABASE_URL is not set (the suite needs PostgreSQL binaries; CI has them)'
  : missingPrerequisite();
if (why) console.warn(`fault-injection short run skipped: ${why}`);

describe.skipIf(why !== undefined)('fault injection, short run of npm run chaos', () => {
  it('2 kills, a worker kill, a postmaster kill, a hung Redis, a rail stall and a clock step: every audit passes', async () => {
    const seed = process.env.CHAOS_SEED ? Number(process.env.CHAOS_SEED) : randomInt(1, 2 ** 31);
    const lines: string[] = [];
    const report = await runChaos({
      seed,
      durationMs: 15_000,
      kills: 2,
      workerKills: 1,
      pgRestarts: 0,
      pgKills: 1,
      redisStops: 0,
      redisHangs: 1,
      stalls: 1,
      clockSteps: 1,
      workers: 4,
      merchants: 4,
      poorMerchants: 2,
      webConcurrency: 2,
      drainMs: 60_000,
      log: (line) => lines.push(line),
    });
    const text = `${lines.join('\n')}\n${formatReport(report)}`;
    expect(report.figures.kills, text).toBeGreaterThanOrEqual(2);
    for (const fault of ['worker_kills', 'pg_kills', 'redis_hangs', 'clock_steps']) expect(report.faults[fault], `${fault}\n${text}`).toBeGreaterThanOrEqual(1);
    expect(report.figures.acknowledged, text).toBeGreaterThan(0);
    expect(report.anomalies, text).toEqual([]);
  }, 300_000);
});
