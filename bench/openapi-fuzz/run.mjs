#!/usr/bin/env node
// `npm run fuzz:openapi`: the independent OpenAPI fuzzer (bench/openapi-fuzz/fuzz.py) against a
// pixgate server of its own.
//
// 1. Makes a Python venv with hypothesis and jsonschema (node_modules/.cache/openapi-fuzz-venv),
//    installed by pip from FUZZ_PIP_INDEX (default: the machine's local indexes file:///opt/pypi/simple
//    and file:///opt/pypi-more/simple; PyPI itself is not reachable here) when they are missing.
// 2. Starts the built server (dist/src/main.js) on a fresh database: PGlite in a temp folder, or a new
//    schema on FUZZ_DATABASE_URL (PostgreSQL; dropped at the end), with a webhook receiver port allowed.
// 3. Runs the fuzzer (FUZZ_EXAMPLES per operation, default 100; FUZZ_ONLY a regex of "METHOD /path"),
//    prints its figures, and exits with its status (1 when it found a problem). The server's log is
//    kept in the temp folder and its error lines are printed.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = new URL('../..', import.meta.url).pathname;
const here = join(root, 'bench', 'openapi-fuzz');
const log = (m) => process.stderr.write(`fuzz:openapi: ${m}\n`);

execFileSync(process.execPath, [join(root, 'scripts', 'ensure-build.mjs')], { stdio: 'inherit' });

// --- Python environment -------------------------------------------------------------------------
const venv = process.env.FUZZ_VENV ?? join(root, 'node_modules', '.cache', 'openapi-fuzz-venv');
const python = join(venv, 'bin', 'python');
const hasDeps = () => existsSync(python) && (() => {
  try {
    execFileSync(python, ['-c', 'import hypothesis, jsonschema, referencing'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
if (!hasDeps()) {
  const indexes = (process.env.FUZZ_PIP_INDEX ?? 'file:///opt/pypi/simple file:///opt/pypi-more/simple').split(/\s+/).filter(Boolean);
  log(`installing hypothesis and jsonschema into ${venv} from ${indexes.join(', ')}`);
  execFileSync('python3', ['-m', 'venv', venv], { stdio: 'inherit' });
  try {
    execFileSync(python, ['-m', 'pip', 'install', '-q', '--disable-pip-version-check', '--index-url', indexes[0], ...indexes.slice(1).flatMap((i) => ['--extra-index-url', i]), '-r', join(here, 'requirements.txt')], { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    process.stderr.write(`${err.stdout ?? ''}${err.stderr ?? ''}`);
    throw new Error('pip could not install the fuzzer\'s requirements (set FUZZ_PIP_INDEX to an index that has them)');
  }
}

// --- Server ---------------------------------------------------------------------------------------
const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

const dir = mkdtempSync(join(tmpdir(), 'pixgate-openapi-fuzz-'));
const adminToken = `fuzz-admin-${randomBytes(12).toString('hex')}`;
const receiverPort = await freePort();
const serverPort = await freePort();
const env = {
  PATH: process.env.PATH ?? '',
  APP_ENV: 'local',
  HOST: '127.0.0.1',
  PORT: String(serverPort),
  ADMIN_TOKEN: adminToken,
  DATA_DIR: join(dir, 'data'),
  LOG_LEVEL: process.env.FUZZ_LOG_LEVEL ?? 'warn',
  WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiverPort}`,
  RATE_LIMIT_PER_MINUTE: '100000000',
  RAIL_TIMEOUT_MS: '1000',
  SIM_SETTLEMENT_MS: '100',
};
let schema;
if (process.env.FUZZ_DATABASE_URL) {
  const pg = (await import('pg')).default;
  schema = `fuzz_${randomBytes(6).toString('hex')}`;
  const c = new pg.Client({ connectionString: process.env.FUZZ_DATABASE_URL });
  await c.connect();
  await c.query(`CREATE SCHEMA ${schema}`);
  await c.end();
  // search_path through the startup parameter `options`: straight to PostgreSQL only; a pooler
  // (pgbouncer) refuses or drops it (issue 25, item 1). Behind one the schema would have to be a
  // login role's own search_path (test/helpers/db.ts does so for TEST_PGBOUNCER_URL).
  const url = new URL(process.env.FUZZ_DATABASE_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  env.DATABASE_URL = url.toString();
}

const serverLog = join(dir, 'server.log');
const { openSync } = await import('node:fs');
const out = openSync(serverLog, 'a');
const server = spawn(process.execPath, [join(root, 'dist', 'src', 'main.js')], { env, stdio: ['ignore', out, out] });
let exitCode = 1;
try {
  const url = `http://127.0.0.1:${serverPort}`;
  for (const deadline = Date.now() + 60_000; ; ) {
    const ready = await fetch(`${url}/readyz`).then((r) => r.ok, () => false);
    if (ready) break;
    if (server.exitCode !== null || Date.now() > deadline) throw new Error(`the server did not start:\n${readFileSync(serverLog, 'utf8').slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  log(`server ${url} (${schema ? `PostgreSQL schema ${schema}` : `PGlite in ${env.DATA_DIR}`}); log ${serverLog}`);
  const fuzz = spawn(python, [join(here, 'fuzz.py'), '--base-url', url, '--admin-token', adminToken, '--receiver-port', String(receiverPort), ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1' },
  });
  exitCode = await new Promise((resolve) => fuzz.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
  const errors = readFileSync(serverLog, 'utf8').split('\n').filter((l) => /"level":(50|60)/.test(l));
  if (errors.length) {
    log(`${errors.length} error lines in the server log; the first ones:`);
    for (const l of errors.slice(0, 5)) process.stderr.write(`  ${l.slice(0, 800)}\n`);
  }
} finally {
  server.kill('SIGTERM');
  await new Promise((resolve) => (server.exitCode !== null ? resolve() : server.once('exit', resolve)));
  if (schema) {
    const pg = (await import('pg')).default;
    const c = new pg.Client({ connectionString: process.env.FUZZ_DATABASE_URL });
    await c.connect();
    await c.query(`DROP SCHEMA ${schema} CASCADE`);
    await c.end();
  }
  if (exitCode === 0 && !process.env.FUZZ_KEEP) rmSync(dir, { recursive: true, force: true });
  else log(`kept ${dir}`);
}
process.exit(exitCode);
