/**
 * Webhook delivery benchmark: deliveries per second and the delay from the state change (the outbox
 * row's created_at, written in the transaction of the change) to receipt at a local receiver.
 *
 *   npm run bench:webhooks                              embedded database (PGlite, in memory)
 *   DATABASE_URL=postgres://… npm run bench:webhooks    PostgreSQL (a schema of its own, dropped after)
 *   options: --events 2000 (burst size)  --rate 200 (events/s of the steady phase)  --seconds 10
 *            --processes 1 (worker sets on PostgreSQL, each with its own pool)
 *   BENCH_PROFILE=1 also prints time, count and rows of the claim and result statements.
 *
 * Phase 1 (burst): N events written at once (2 per subject, 100 per transaction); throughput is
 * N / (last receipt − first write). Phase 2 (steady): one event per transaction at a fixed rate;
 * delay percentiles. The receiver answers 200 at once; one webhook receives everything.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import pg from 'pg';
import pino from 'pino';
import { parseConfig } from '../src/config.js';
import type { Database } from '../src/db/db.js';
import { migrate } from '../src/db/migrate.js';
import { openPglite } from '../src/db/pglite.js';
import { openPostgres } from '../src/db/postgres.js';
import { emitEvent } from '../src/events/outbox.js';
import { webhookWorkers } from '../src/webhooks/workers.js';
import { merchantWithWebhook } from '../test/webhooks/helpers.js';

const { values: args } = parseArgs({
  options: {
    events: { type: 'string', default: '2000' },
    rate: { type: 'string', default: '200' },
    seconds: { type: 'string', default: '10' },
    processes: { type: 'string', default: '1' },
  },
});
const BURST = Number(args.events);
const RATE = Number(args.rate);
const SECONDS = Number(args.seconds);
const PROCESSES = Number(args.processes);

const receivedAt = new Map<number, number>();
let waiters: Array<() => void> = [];
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const n = (JSON.parse(Buffer.concat(chunks).toString()) as { n: number }).n;
    if (!receivedAt.has(n)) receivedAt.set(n, Date.now());
    res.writeHead(200).end();
    for (const w of waiters) w();
  });
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = (server.address() as AddressInfo).port;

const url = process.env.DATABASE_URL;
const schema = `bench_${Date.now().toString(36)}`;
let dbs: Database[];
if (url) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query(`CREATE SCHEMA ${schema}`);
  await c.end();
  dbs = await Promise.all(Array.from({ length: PROCESSES }, () => openPostgres({ url, schema, max: 20 })));
} else {
  dbs = [await openPglite({ dataDir: 'memory://' })];
}
const db = dbs[0]!;
// BENCH_PROFILE=1: time, count and rows of each statement run outside transactions (claims, results).
const stats = new Map<string, { n: number; ms: number; rows: number }>();
if (process.env.BENCH_PROFILE) {
  for (const d of dbs) {
    const query = d.query.bind(d);
    d.query = (async (text: string, params?: readonly unknown[]) => {
      const t = performance.now();
      const rows = await query(text, params);
      const key = text.replace(/\s+/g, ' ').slice(0, 60);
      const e = stats.get(key) ?? { n: 0, ms: 0, rows: 0 };
      e.n++;
      e.ms += performance.now() - t;
      e.rows += rows.length;
      stats.set(key, e);
      return rows;
    }) as Database['query'];
  }
}
await migrate(db);
const config = parseConfig({ WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${port}`, ADMIN_TOKEN: 'bench-admin-token-0123456789' });
const log = pino({ level: 'warn' });
const ids = await merchantWithWebhook(db, `http://127.0.0.1:${port}/bench`);
const workers = dbs.flatMap((d, i) => webhookWorkers({ db: d, config, log }, { workerId: `bench-${i}` }));
for (const w of workers) w.start();

let next = 0;
async function write(count: number, perTx: number, subjectOf: (n: number) => string) {
  for (let done = 0; done < count; done += perTx) {
    await db.transaction(async (tx) => {
      for (let i = 0; i < Math.min(perTx, count - done); i++) {
        const n = next++;
        await emitEvent(tx, { event: 'pix.charge.paid', ...ids, subject: subjectOf(n), payload: { status: 'paid', n } });
      }
    });
  }
}

function until(count: number, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${receivedAt.size} of ${count} received`)), timeoutMs);
    const check = () => {
      if (receivedAt.size >= count) {
        clearTimeout(timer);
        waiters = waiters.filter((w) => w !== check);
        resolve();
      }
    };
    waiters.push(check);
    check();
  });
}

async function delays(from: number, to: number): Promise<number[]> {
  const rows = await db.query<{ n: number; created_at: Date }>(
    `SELECT (payload->>'n')::int AS n, created_at FROM outbox_events WHERE (payload->>'n')::int >= $1 AND (payload->>'n')::int < $2`,
    [from, to],
  );
  return rows.map((r) => receivedAt.get(r.n)! - r.created_at.getTime()).sort((a, b) => a - b);
}
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

// Warm-up (connections, JIT).
await write(50, 10, (n) => `warm-${n}`);
await until(50, 30_000);

// Phase 1: burst.
const burstStart = Date.now();
const firstBurst = next;
await write(BURST, 100, (n) => `burst-${Math.floor(n / 2)}`);
const written = Date.now();
await until(firstBurst + BURST, 300_000);
const burstEnd = Math.max(...[...receivedAt.entries()].filter(([n]) => n >= firstBurst).map(([, t]) => t));
const burstDelays = await delays(firstBurst, firstBurst + BURST);

// Phase 2: steady rate, one event per transaction.
const firstSteady = next;
const steadyCount = RATE * SECONDS;
const steadyStart = Date.now();
for (let i = 0; i < steadyCount; i++) {
  const due = steadyStart + (i * 1000) / RATE;
  const wait = due - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  await write(1, 1, (n) => `steady-${n}`);
}
await until(firstSteady + steadyCount, 120_000);
const steadyDelays = await delays(firstSteady, firstSteady + steadyCount);

for (const w of workers) await w.stop();
if (process.env.BENCH_PROFILE) {
  console.log('    ms  count   rows  statement');
  for (const [k, v] of [...stats].sort((a, b) => b[1].ms - a[1].ms)) {
    console.log(String(Math.round(v.ms)).padStart(6), String(v.n).padStart(6), String(v.rows).padStart(6), '', k);
  }
}
for (const d of dbs) await d.close();
if (url) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query(`DROP SCHEMA ${schema} CASCADE`);
  await c.end();
}
server.close();

const backend = url ? `PostgreSQL, ${PROCESSES} worker set(s)` : 'PGlite (embedded, in memory)';
const line = (label: string, d: number[]) => `${label.padEnd(34)} p50 ${String(pct(d, 50)).padStart(5)} ms   p99 ${String(pct(d, 99)).padStart(5)} ms   max ${String(d.at(-1)).padStart(5)} ms`;
console.log(`\nwebhook delivery benchmark — ${backend}, node ${process.version}`);
console.log(`burst: ${BURST} events written in ${written - burstStart} ms, all received after ${burstEnd - burstStart} ms`);
console.log(`  throughput                        ${Math.round((BURST * 1000) / (burstEnd - burstStart))} deliveries/s`);
console.log(line('  delay state change → receipt', burstDelays));
console.log(`steady: ${steadyCount} events at ${RATE}/s, one per transaction`);
console.log(line('  delay state change → receipt', steadyDelays));
process.exit(0);
