/** Shared by the benchmarks: admin calls, bench merchants and signed requests. */
import { randomBytes } from 'node:crypto';
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

