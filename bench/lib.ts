/** Shared by the benchmarks: admin calls, bench merchants and signed requests. */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { signV1 } from '../src/auth/hmac.js';
import { canonicalize } from '../src/lib/canonicalJson.js';

export interface AdminTarget {
  url: string;
  adminToken: string;
}

export interface BenchRequest {
  path: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  /** Called with the answer's body text (only when set: reading it costs). */
  onBody?: (text: string) => void;
}

export async function call(t: AdminTarget, prefix: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<any> {
  const res = await fetch(`${t.url}/api/${prefix}${path}`, {
    method,
    headers: { authorization: `Bearer ${t.adminToken}`, ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const json = await res.json();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

export interface Merchant {
  accountId: number;
  clientId: string;
  secret: string;
}

let documentSeq = 0;
function cnpj(): string {
  const twelve = `${String(10_000_000 + ((Date.now() + documentSeq++ * 7919) % 89_999_999)).slice(0, 8)}0001`;
  const digit = (d: string, w: number[]) => {
    const r = w.reduce((a, x, i) => a + x * Number(d[i]), 0) % 11;
    return r < 2 ? 0 : 11 - r;
  };
  const w1 = [5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2];
  const d1 = digit(twelve, w1);
  return `${twelve}${d1}${digit(twelve + d1, [6, ...w1])}`;
}

export async function merchant(t: AdminTarget): Promise<Merchant> {
  const m = await call(t, 'admin', 'POST', '/merchants', { name: 'Bench', document: cnpj() });
  await call(t, 'admin', 'POST', `/accounts/${m.account_id}/deposits`, { amount: 10_000_000_000 });
  await call(t, 'admin', 'PATCH', `/accounts/${m.account_id}`, {
    cash_out_daily_limit_cents: 1_000_000_000_000,
    cash_out_nighttime_limit_cents: 1_000_000_000_000,
  });
  const k = await call(t, 'admin', 'POST', '/api-keys', {
    merchant_id: m.merchant_id,
    account_id: m.account_id,
    permissions: ['transfer:write', 'transfer:read', 'account:read', 'account:write'],
    ip_whitelist: ['127.0.0.1', '::1'],
  });
  return { accountId: m.account_id, clientId: k.client_id, secret: k.client_secret };
}

export const auth = (m: Merchant) => `ApiKey ${m.clientId}:${m.secret}`;

/** A signed cash-out of 1 to 50 cents, round robin over `merchants`. */
export function cashOuts(merchants: Merchant[], pixKey: string, onAnswer?: (body: { transaction_id?: string }) => void) {
  const runId = randomBytes(4).toString('hex');
  let seq = 0; // never repeats across warm-up and measured runs: every cash-out is a new order
  return (): BenchRequest => {
    const n = seq++;
    const m = merchants[n % merchants.length]!;
    const text = JSON.stringify({ amount: 1 + (n % 50), external_id: `b-${runId}-${n}`, pix_key: pixKey });
    return {
      path: '/api/external/pix/cash-out',
      method: 'POST',
      headers: { authorization: auth(m), 'content-type': 'application/json', hmac: signV1(m.secret, canonicalize(text)) },
      body: text,
      ...(onAnswer ? { onBody: (b: string) => onAnswer(JSON.parse(b) as { transaction_id?: string }) } : {}),
    };
  };
}


/** Self time per function of a V8 .cpuprofile, grouped as "function (package or file)". */
export function printCpuProfile(dir: string, top = 12) {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  for (const file of files) {
    const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as {
      nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number }[];
      startTime: number;
      endTime: number;
      samples: number[];
    };
    const total = profile.samples.length;
    const self = new Map<string, number>();
    const byPackage = new Map<string, number>();
    for (const node of profile.nodes) {
      const hits = node.hitCount ?? 0;
      if (!hits) continue;
      const url = node.callFrame.url;
      const where = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1] ?? (url.includes('/dist/src/') ? `pixgate ${url.slice(url.indexOf('/dist/src/') + 10)}` : url.startsWith('node:') ? url : url || '(native/gc/idle)');
      const pkg = where.startsWith('pixgate') ? 'pixgate' : where;
      const name = `${node.callFrame.functionName || '(anonymous)'}  ${where}`;
      self.set(name, (self.get(name) ?? 0) + hits);
      byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + hits);
    }
    console.log(`\nCPU profile of ${file} (${total} samples over ${((profile.endTime - profile.startTime) / 1e6).toFixed(1)} s):`);
    console.log('  self time by package:');
    for (const [k, v] of [...byPackage].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`    ${((100 * v) / total).toFixed(1).padStart(5)}%  ${k}`);
    console.log('  self time by function:');
    for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top * 2)) console.log(`    ${((100 * v) / total).toFixed(1).padStart(5)}%  ${k}`);
  }
}

