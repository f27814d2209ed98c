import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { openPglite } from '../../src/db/pglite.js';
import { packageRoot } from '../../src/lib/paths.js';
import { BACKENDS, createTestSchema } from '../helpers/db.js';
import { startPixgate, type PixgateProcess } from '../helpers/process.js';
import { merchantWithWebhook, startReceiver } from '../webhooks/helpers.js';

/**
 * Issue 24, item 16: a backward step of the wall clock (NTP) stopped webhook fan-out for as long as
 * the step — the dispatcher spaced its ticks with Date.now() differences, so after a 2-hour step
 * back its next tick was 2 hours away. A pixgate process whose wall clock is stepped 2 hours back
 * while it runs (test/helpers/wallClockShift.mjs; the machine's clock is untouched) still credits
 * an inbound PIX and delivers its webhook.
 */
const ADMIN_TOKEN = 'clock-step-admin-token-0123';
const PRELOAD = join(packageRoot, 'test', 'helpers', 'wallClockShift.mjs');
const TWO_HOURS_MS = 2 * 60 * 60 * 1000;
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function inbound(p: PixgateProcess, accountId: number, amount: number) {
  const res = await fetch(`${p.url}/api/sandbox/pix/inbound`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ account_id: accountId, amount, payer_name: 'Carlos' }),
  });
  expect(res.status).toBeLessThan(300);
}

/**
 * The process's wall clock as its latest log line shows it (pino's time reads `new Date()`; Node's
 * own Date header does not go through the global Date).
 */
async function processClock(p: PixgateProcess): Promise<number> {
  await fetch(`${p.url}/healthz`);
  const times = [...p.output().matchAll(/"time":"([^"]+)"/g)];
  return Date.parse(times.at(-1)![1]!);
}

describe.each(BACKENDS)('a 2-hour backward wall-clock step (%s)', (backend) => {
  it('leaves webhook fan-out and delivery running', async () => {
    const r = await startReceiver();
    const dir = mkdtempSync(join(tmpdir(), 'pixgate-clock-'));
    dirs.push(dir);
    const shiftFile = join(dir, 'shift-ms');
    writeFileSync(shiftFile, '0');
    const env: Record<string, string> = {
      ADMIN_TOKEN,
      WEBHOOK_ALLOWED_HOSTS: r.hostPort,
      SIM_SETTLEMENT_MS: '200',
      NODE_OPTIONS: `--import=${PRELOAD}`,
      PIXGATE_WALL_CLOCK_SHIFT_FILE: shiftFile,
    };
    let p: PixgateProcess;
    let ids: { merchantId: number; accountId: number };
    let cleanup = async () => {};
    if (backend === 'pglite') {
      const dataDir = join(dir, 'data');
      const db = await openPglite({ dataDir });
      await migrate(db);
      ids = await merchantWithWebhook(db, `${r.url}/hook`);
      await db.close();
      p = await startPixgate({ ...env, DATA_DIR: dataDir });
    } else {
      const pgUrl = process.env.TEST_DATABASE_URL!;
      const schema = `clock_${Date.now().toString(36)}`;
      const c = new pg.Client({ connectionString: pgUrl });
      await c.connect();
      const access = await createTestSchema(schema);
      p = await startPixgate({ ...env, ...access.env() }); // migrates the schema
      const db = await access.open({ max: 2 });
      ids = await merchantWithWebhook(db, `${r.url}/hook`);
      await db.close();
      cleanup = async () => {
        await access.drop();
        await c.end();
      };
    }
    try {
      await inbound(p, ids.accountId, 1_000);
      await r.waitFor((x) => x.length >= 1, 30_000).catch((err: Error) => {
        throw new Error(`before the step: ${err.message}`);
      });

      writeFileSync(shiftFile, String(-TWO_HOURS_MS));
      for (let i = 0; (await processClock(p)) > Date.now() - TWO_HOURS_MS / 2; i++) {
        if (i > 100) throw new Error('the process clock was not stepped');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }

      await inbound(p, ids.accountId, 2_000);
      await r.waitFor((x) => x.length >= 2, 30_000).catch((err: Error) => {
        throw new Error(`after the step: ${err.message}`);
      });
      expect(r.received.map((x) => x.body.event ?? x.body.type)).toHaveLength(2);
    } finally {
      p.proc.kill('SIGTERM');
      await p.exited;
      await cleanup();
      await r.close();
    }
  }, 120_000);
});
