import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import https from 'node:https';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/lib/paths.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const dir = join(packageRoot, 'test', 'fixtures', 'tls');
const ca = readFileSync(join(dir, 'cert.pem'));

function handshake(port: number, version: 'TLSv1.1' | 'TLSv1.2' | 'TLSv1.3'): Promise<{ ok: true; protocol: string | null } | { ok: false; error: string }> {
  return new Promise((resolve) => {
    const socket = tls.connect({
      host: '127.0.0.1',
      port,
      ca,
      servername: 'localhost',
      minVersion: version,
      maxVersion: version,
      // Let this client offer TLS 1.1 at all (OpenSSL 3 refuses it at the default security level).
      ciphers: 'DEFAULT@SECLEVEL=0',
    });
    socket.once('secureConnect', () => {
      const protocol = socket.getProtocol();
      socket.end();
      resolve({ ok: true, protocol });
    });
    socket.once('error', (err) => resolve({ ok: false, error: err.message }));
  });
}

describe('TLS (TLS_CERT_FILE / TLS_KEY_FILE)', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ env: { TLS_CERT_FILE: join(dir, 'cert.pem'), TLS_KEY_FILE: join(dir, 'key.pem') } });
  });
  afterAll(async () => s?.close());

  it('serves HTTPS', () => {
    expect(s.url).toMatch(/^https:\/\//);
  });

  it('refuses a TLS 1.1 client (the server sends a protocol_version alert)', async () => {
    const result = await handshake(Number(new URL(s.url).port), 'TLSv1.1');
    expect(result).toEqual({ ok: false, error: expect.stringMatching(/tlsv1 alert protocol version/) });
  });

  it('control: the same TLS 1.1 client does connect to a server that allows TLS 1.1', async () => {
    const lax = https.createServer({ cert: ca, key: readFileSync(join(dir, 'key.pem')), minVersion: 'TLSv1', ciphers: 'DEFAULT@SECLEVEL=0' });
    await new Promise<void>((r) => lax.listen(0, '127.0.0.1', r));
    try {
      expect(await handshake((lax.address() as { port: number }).port, 'TLSv1.1')).toEqual({ ok: true, protocol: 'TLSv1.1' });
    } finally {
      lax.close();
    }
  });

  it('serves a TLS 1.2 client and a TLS 1.3 client', async () => {
    expect(await handshake(Number(new URL(s.url).port), 'TLSv1.2')).toEqual({ ok: true, protocol: 'TLSv1.2' });
    expect(await handshake(Number(new URL(s.url).port), 'TLSv1.3')).toEqual({ ok: true, protocol: 'TLSv1.3' });
  });
});
