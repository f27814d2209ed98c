import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.js';
import { canonicalize } from '../../src/lib/canonicalJson.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

async function explain(argv: string[], env: Record<string, string>) {
  let out = '';
  const io = { stdout: (t: string) => void (out += t), stderr: () => {}, env, isTTY: false, cwd: process.cwd(), signal: new AbortController().signal };
  expect(await runCli(['sign', '--json', ...argv], io)).toBe(0);
  return JSON.parse(out) as { signed_string: string; signed_string_sha256: string };
}

/** Outside production a refused signature answers the SHA-256 of the string the server verified. */
describe('X-Signature-Canonical-SHA256 on a refused signature', () => {
  let s: TestServer;
  let m: MerchantFixture;
  beforeAll(async () => {
    s = await startTestServer({ workers: false });
    m = await merchantWithKey(s);
  });
  afterAll(async () => s?.close());

  it('v1: the hash of the canonical body; a right client hash shows the secret is what differs', async () => {
    const body = '{"cpf": "52998224725", "a": [1, 2.50]}';
    const res = await m.client.post('/cpf/validate', body, { hmac: 'f'.repeat(128) });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ worked: false, detail: 'Invalid HMAC signature' });
    expect(res.headers.get('x-signature-canonical-sha256')).toBe(sha256(canonicalize(body)));
    const cli = await explain(['-d', body, '--v1'], { PIXGATE_CLIENT_SECRET: 'wrong-secret' });
    expect(cli.signed_string_sha256).toBe(res.headers.get('x-signature-canonical-sha256'));
  });

  it('v2: the hash of the signing string, equal to `pixgate sign --explain` for the same inputs, different when the path differs', async () => {
    const body = '{"cpf":"52998224725"}';
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = { 'x-signature-version': '2', 'x-request-timestamp': String(timestamp), 'x-request-nonce': 'nonce-0123456789abcdef', 'idempotency-key': 'idem-key-0001', hmac: '0'.repeat(128) };
    const res = await m.client.post('/cpf/validate', body, { sign: false, headers });
    expect(res.status).toBe(401);
    const args = ['-d', body, '--timestamp', String(timestamp), '--nonce', 'nonce-0123456789abcdef', '--idempotency-key', 'idem-key-0001'];
    const same = await explain([...args, '--path', '/cpf/validate'], { PIXGATE_CLIENT_SECRET: 'x' });
    expect(res.headers.get('x-signature-canonical-sha256')).toBe(same.signed_string_sha256);
    const other = await explain([...args, '--path', '/cpf/validate/'], { PIXGATE_CLIENT_SECRET: 'x' });
    expect(other.signed_string_sha256).not.toBe(same.signed_string_sha256);
  });

  it('is not sent in production', async () => {
    const p = await startTestServer({ workers: false, env: { APP_ENV: 'production', DATABASE_URL: 'postgres://unused/db' } });
    try {
      const pm = await merchantWithKey(p);
      const res = await pm.client.post('/cpf/validate', { cpf: '52998224725' }, { hmac: 'f'.repeat(128) });
      expect(res.status).toBe(401);
      expect(res.headers.get('x-signature-canonical-sha256')).toBeNull();
    } finally {
      await p.close();
    }
  });
});
