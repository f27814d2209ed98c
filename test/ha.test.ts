import { randomInt } from 'node:crypto';
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ensurePrerequisites, pixgateSupports } from '../bench/ha/lab.js';
import { formatHa, runHa } from '../bench/ha/run.js';

/**
 * The short version of `npm run ha` (docs/deploy.md): the same lab — etcd, three PostgreSQL nodes
 * under Patroni with synchronous_mode_strict, HAProxy, pgbouncer in transaction mode, Redis with
 * Sentinel, two pixgate nodes behind the balancer, all on free ports in a temporary folder — and the
 * chaos suite's clients and audit, with one SIGKILL of the primary's postmaster: Patroni promotes
 * the synchronous standby, and every acknowledged operation must be there exactly once.
 *
 * It needs the Debian packages patroni, etcd-server, haproxy, pgbouncer and redis-sentinel; it
 * installs them (apt-get) when it runs as root, as CI does (.ci/run installs them first), and is
 * skipped with the reason otherwise. pixgate goes through pgbouncer and Sentinel once it supports
 * DATABASE_POOLER and REDIS_SENTINELS (issue 25, items 1 and 4); until then straight to HAProxy.
 */
// Opt-in for now (PIXGATE_HA_TEST=1): the lab is new, and one failover takes 40-60 s of a loaded
// 2-core machine; .ci/run turns it on once it has passed there repeatedly (docs/deploy.md).
const why = process.env.PIXGATE_HA_TEST !== '1' ? 'set PIXGATE_HA_TEST=1 to run it' : ensurePrerequisites((line) => console.warn(line));
if (why) console.warn(`high-availability short run skipped: ${why}`);

/**
 * Answers that break the API's contract under a failover and that issue 25 item 2 (outcome-unknown
 * commits answered 503 with Retry-After) fixes in pixgate, not in the lab: tolerated only while that
 * work is not merged (detected with item 1, DATABASE_POOLER, which lands with it); lost and
 * duplicated operations are never tolerated.
 */
const BEFORE_ITEM_2 = new Set(['answer_500', 'raw_error_answer', 'audit_row_missing']);

describe.skipIf(why !== undefined)('high availability, short run of npm run ha', () => {
  it('one failover to the synchronous standby under load: nothing acknowledged is lost or duplicated', async () => {
    const seed = process.env.HA_SEED ? Number(process.env.HA_SEED) : randomInt(1, 2 ** 31);
    const lines: string[] = [];
    const pooler = pixgateSupports('DATABASE_POOLER');
    const report = await runHa({
      seed,
      failovers: 1,
      switchovers: 0,
      syncStops: 0,
      redisFailovers: 0,
      workers: 4,
      merchants: 2,
      gapMs: [3000, 5000],
      drainMs: 60_000,
      pooler,
      sentinel: pixgateSupports('REDIS_SENTINELS'),
      log: (line) => lines.push(line),
    });
    const text = `${lines.join('\n')}\n${formatHa(report)}`;
    console.log(text.split('\n').at(-1));
    expect(report.failovers, text).toBe(1);
    expect(report.acknowledged, text).toBeGreaterThan(0);
    expect(report.rto, text).toHaveLength(1);
    expect(report.lost, text).toBe(0);
    expect(report.duplicated, text).toBe(0);
    expect(report.anomalies.filter((a) => pooler || !BEFORE_ITEM_2.has(a.check)), text).toEqual([]);
    // Passed: the logs kept for the tolerated anomalies are not needed.
    rmSync(report.dir, { recursive: true, force: true });
  }, 240_000);
});
