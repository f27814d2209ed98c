import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { standardForFuzz } from '../helpers/apiPixContract.js';
import { API_PIX_STANDARD_MISSING, apiPixStandard } from '../helpers/apiPixStandard.js';
import { BACKENDS } from '../helpers/db.js';
import { startTestServer, TEST_ADMIN_TOKEN, type TestServer } from '../helpers/server.js';

/**
 * The OpenAPI fuzzer (bench/openapi-fuzz/fuzz.py) driven by the central bank's standard itself
 * (`--standard`, fuzz_standard.py) over the façade: requests drawn from the standard's request
 * schemas (valid and broken), sent with a bearer token, every answer judged by the standard — no
 * 5xx, no status it does not list (but the tolerated `get:400` and `*:401`, which must be problems),
 * every JSON body valid against its schema. The test server's contract check runs too.
 */
const python = spawnSync('python3', ['-c', 'import hypothesis, jsonschema, referencing'], { stdio: 'ignore' }).status === 0;
const standard = apiPixStandard();
const SERVED = ['/cob', '/cob/{txid}', '/loc', '/loc/{id}', '/loc/{id}/txid'];
/** The received Pix, returns and webhooks, fuzzed in a run of their own (8 operations). */
const SERVED_PIX = ['/pix', '/pix/{e2eid}', '/pix/{e2eid}/devolucao/{id}', '/webhook', '/webhook/{chave}'];
/** The due-date charges and their batches, fuzzed in a run of their own (src/apiPix/cobv/, 8 operations). */
const SERVED_COBV = ['/cobv', '/cobv/{txid}', '/lotecobv', '/lotecobv/{id}'];
const EXAMPLES = process.env.FUZZ_OPENAPI_EXAMPLES ?? '25';
const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
const why = !standard ? API_PIX_STANDARD_MISSING : !python ? 'python3 with hypothesis and jsonschema is not available' : '';

describe.skipIf(!standard || !python).each(BACKENDS)(`the standard-driven fuzz of the API Pix façade on %s${why ? ` (skipped: ${why})` : ''}`, (backend) => {
  let s: TestServer;
  let receiverPort: number;
  const dir = mkdtempSync(join(tmpdir(), 'pixgate-api-pix-fuzz-'));
  beforeAll(async () => {
    receiverPort = await freePort();
    s = await startTestServer({ backend, env: { WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiverPort}`, RAIL_TIMEOUT_MS: '1000', SIM_SETTLEMENT_MS: '100', RATE_LIMIT_PER_MINUTE: '100000000' } });
  });
  afterAll(async () => {
    await s?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const run = async (served: readonly string[], name: string) => {
    const docPath = join(dir, `standard-${name}.json`);
    writeFileSync(docPath, JSON.stringify(standardForFuzz(served)));
    const out = join(dir, `result-${name}.json`);
    const args = ['bench/openapi-fuzz/fuzz.py', '--base-url', s.url, '--admin-token', TEST_ADMIN_TOKEN, '--receiver-port', String(receiverPort), '--examples', EXAMPLES, '--seed', '27', '--json-out', out, '--standard', docPath, '--tolerate', 'get:400,*:401'];
    const { output } = await new Promise<{ code: number; output: string }>((resolve) => {
      execFile('python3', args, { env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' }, maxBuffer: 1 << 24 }, (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output: `${stdout}${stderr}` }),
      );
    });
    expect(output.slice(-4000), 'the fuzzer ran to its figures').toContain('operations covered');
    const result = JSON.parse(readFileSync(out, 'utf8')) as { operations: number; requests: number; statuses: Record<string, number>; problems: unknown[] };
    expect(result.problems).toEqual([]);
    return result;
  };

  it('no 5xx and no answer outside the standard', async () => {
    const result = await run(SERVED, 'cob');
    expect(result.operations).toBe(9);
    // Valid requests reached the business logic: charges and locations were created and read.
    expect((result.statuses['200'] ?? 0) + (result.statuses['201'] ?? 0)).toBeGreaterThan(20);
  }, 600_000);

  it('no 5xx and no answer outside the standard: received Pix, returns and webhooks', async () => {
    const result = await run(SERVED_PIX, 'pix');
    expect(result.operations).toBe(8);
    // Valid queries reached the business logic (lists of Pix and of webhooks answered 200).
    expect(result.statuses['200'] ?? 0).toBeGreaterThan(10);
  }, 600_000);

  it('no 5xx and no answer outside the standard: cobv and lotecobv', async () => {
    const result = await run(SERVED_COBV, 'cobv');
    expect(result.operations).toBe(8);
    expect((result.statuses['200'] ?? 0) + (result.statuses['201'] ?? 0) + (result.statuses['202'] ?? 0)).toBeGreaterThan(0);
  }, 600_000);
});
