import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiDocument } from '../src/openapi/document.js';
import { BACKENDS } from './helpers/db.js';
import { startTestServer, TEST_ADMIN_TOKEN, type TestServer } from './helpers/server.js';

/**
 * A short run of the independent OpenAPI fuzzer (bench/openapi-fuzz/fuzz.py, Python: hypothesis +
 * jsonschema, which the machine's python3 ships; `.ci/run` installs them from the local index when
 * missing) against the test server: every operation of the document, a few examples each, and no
 * answer outside the document. The test server's contract check runs too. `npm run fuzz:openapi`
 * is the long run (docs/openapi.md).
 */
const python = spawnSync('python3', ['-c', 'import hypothesis, jsonschema, referencing'], { stdio: 'ignore' }).status === 0;
if (!python) console.warn('openapi-fuzz.test.ts: python3 with hypothesis and jsonschema is not available; the OpenAPI fuzz run is skipped (pip install hypothesis jsonschema)');

const EXAMPLES = process.env.FUZZ_OPENAPI_EXAMPLES ?? '4';

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

describe.skipIf(!python).each(BACKENDS)('the OpenAPI fuzzer (short run) on %s', (backend) => {
  let s: TestServer;
  let receiverPort: number;
  const dir = mkdtempSync(join(tmpdir(), 'pixgate-openapi-fuzz-test-'));
  beforeAll(async () => {
    receiverPort = await freePort();
    s = await startTestServer({
      backend,
      env: { WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiverPort}`, RAIL_TIMEOUT_MS: '1000', SIM_SETTLEMENT_MS: '100', RATE_LIMIT_PER_MINUTE: '100000000' },
    });
  });
  afterAll(async () => {
    await s?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('every operation answers inside the document', async () => {
    const out = join(dir, 'result.json');
    const args = ['bench/openapi-fuzz/fuzz.py', '--base-url', s.url, '--admin-token', TEST_ADMIN_TOKEN, '--receiver-port', String(receiverPort), '--examples', EXAMPLES, '--seed', '1', '--json-out', out];
    // Asynchronous: the server runs in this process.
    const { code, output } = await new Promise<{ code: number; output: string }>((resolve) => {
      execFile('python3', args, { env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' }, maxBuffer: 1 << 24 }, (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output: `${stdout}${stderr}` }),
      );
    });
    expect(output.slice(-4000), 'the fuzzer ran to its figures').toContain('operations covered');
    const result = JSON.parse(readFileSync(out, 'utf8')) as { operations: number; requests: number; problems: unknown[] };
    expect(result.problems).toEqual([]);
    expect(code).toBe(0);
    const doc = openApiDocument() as { paths: Record<string, Record<string, unknown>> };
    expect(result.operations).toBe(Object.values(doc.paths).reduce((n, ops) => n + Object.keys(ops).length, 0));
    expect(result.requests).toBeGreaterThanOrEqual(result.operations * Number(EXAMPLES));
  }, 240_000);
});
