/**
 * Issue 28: `npm pack` of packages/sdk gives a small tarball that installs alone into an empty
 * project, with no network and no other package, and works there: a webhook signed the way the
 * server signs it (node:crypto, independently of the SDK) verifies, a tampered one does not, and a
 * request signs. Its declarations type-check in a project with no Node.js types (DOM only).
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/lib/paths.js';

const exec = promisify(execFile);
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const sdkDir = join(packageRoot, 'packages', 'sdk');
const work = mkdtempSync(join(tmpdir(), 'pixgate-sdk-pack-'));
const app = join(work, 'app');

interface Packed {
  filename: string;
  size: number;
  unpackedSize: number;
  files: { path: string }[];
}
let packed: Packed;

beforeAll(async () => {
  // npm pack runs the SDK's prepack (tsc: JavaScript and declarations) first. It packs a copy of
  // packages/sdk (its package.json, tsconfig, sources, README and LICENSE; typescript linked from
  // the repository), so the build does not rewrite packages/sdk/dist under the servers and CLIs
  // other test files run from it meanwhile.
  const copy = join(work, 'sdk');
  for (const entry of ['package.json', 'tsconfig.json', 'README.md', 'LICENSE', 'src']) cpSync(join(sdkDir, entry), join(copy, entry), { recursive: true });
  mkdirSync(join(copy, 'node_modules', '.bin'), { recursive: true });
  symlinkSync(join(packageRoot, 'node_modules', 'typescript', 'bin', 'tsc'), join(copy, 'node_modules', '.bin', 'tsc'));
  const { stdout } = await exec(npm, ['pack', '--json', '--pack-destination', work], { cwd: copy, maxBuffer: 1 << 24 });
  packed = (JSON.parse(stdout) as Packed[])[0]!;
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'empty-app', version: '1.0.0', private: true, type: 'module' }));
  await exec(npm, ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', join(work, packed.filename)], { cwd: app, maxBuffer: 1 << 24 });
}, 300_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('@pixgate/sdk tarball', () => {
  it('holds only the built SDK, its declarations, README, LICENSE and package.json, in under 50 kB', () => {
    const paths = packed.files.map((f) => f.path).sort();
    expect(paths.filter((p) => !/^dist\/[A-Za-z]+\.(js|d\.ts)$/.test(p))).toEqual(['LICENSE', 'README.md', 'package.json']);
    expect(paths).toContain('dist/index.js');
    expect(paths).toContain('dist/index.d.ts');
    expect(packed.size).toBeLessThan(50_000);
  });

  it('installs offline into an empty project as its only package', () => {
    const installed = readdirSync(join(app, 'node_modules')).filter((n) => !n.startsWith('.'));
    expect(installed).toEqual(['@pixgate']);
    expect(readdirSync(join(app, 'node_modules', '@pixgate'))).toEqual(['sdk']);
  });

  it('imports there, verifies a webhook signed as the server signs it, refuses a tampered one, and signs a request', async () => {
    writeFileSync(
      join(app, 'check.mjs'),
      `import { createHmac } from 'node:crypto';
import { signRequest, standardWebhooksKey, verifyWebhook, WebhookVerificationError } from '@pixgate/sdk';
const secret = 'whsec_' + Buffer.from('0123456789abcdef0123456789abcdef').toString('base64');
const body = JSON.stringify({ type: 'pix.payout.confirmed', data: { amount: 159000 } });
const id = 'msg_1', ts = String(Math.floor(Date.now() / 1000));
const key = Buffer.from(secret.slice(6), 'base64');
const sig = createHmac('sha256', key).update(id + '.' + ts + '.' + body).digest('base64');
const headers = { 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': 'v1,' + sig };
const ok = await verifyWebhook({ rawBody: body, headers, secret });
let tampered = 'accepted';
try { await verifyWebhook({ rawBody: body.replace('159000', '159001'), headers, secret }); } catch (e) { tampered = e instanceof WebhookVerificationError ? 'refused' : String(e); }
const signed = await signRequest({ version: 'v2', clientSecret: 's3cret', method: 'POST', path: '/api/external/pix/cash-out', body: '{"amount": 1590}', idempotencyKey: 'k1' });
console.log(JSON.stringify({ type: ok.event.type, scheme: ok.scheme, tampered, keyBytes: standardWebhooksKey(secret).length, signedHeaders: Object.keys(signed.headers).sort(), hmac: signed.headers.hmac }));
`,
    );
    const { stdout } = await exec(process.execPath, ['check.mjs'], { cwd: app });
    const out = JSON.parse(stdout) as { type: string; scheme: string; tampered: string; keyBytes: number; signedHeaders: string[]; hmac: string };
    expect(out).toMatchObject({ type: 'pix.payout.confirmed', scheme: 'standard-webhooks', tampered: 'refused', keyBytes: 32 });
    expect(out.signedHeaders).toEqual(expect.arrayContaining(['hmac', 'idempotency-key', 'x-request-nonce', 'x-request-timestamp', 'x-signature-version']));
    expect(out.hmac).toMatch(/^[0-9a-f]{128}$/); // HMAC-SHA512
  });

  it('type-checks in a project with DOM types only (no @types/node): browser and edge code can use it', async () => {
    writeFileSync(
      join(app, 'browser.ts'),
      `import { Pixgate, verifyWebhook, type Balance } from '@pixgate/sdk';
const pixgate = new Pixgate({ baseUrl: 'https://pixgate.example', clientId: 'id', clientSecret: 'secret' });
export async function balance(): Promise<Balance> { return pixgate.balance(); }
export async function onWebhook(request: Request): Promise<string> {
  const { event } = await verifyWebhook({ rawBody: new Uint8Array(await request.arrayBuffer()), headers: request.headers, secret: 'whsec_x' });
  return String(event.type);
}
`,
    );
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2022', 'DOM', 'DOM.Iterable'], types: [], strict: true, noEmit: true }, files: ['browser.ts'] }),
    );
    const tsc = join(packageRoot, 'node_modules', 'typescript', 'bin', 'tsc');
    const run = await exec(process.execPath, [tsc, '-p', app]).catch((e: { stdout: string; code: number }) => e);
    expect(run.stdout).toBe('');
  });
});
