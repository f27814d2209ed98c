import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * What the proxy does with the next request:
 *   forward      pass it to the server and its answer back
 *   503 / 500    answer that status without forwarding
 *   429:<s>      answer 429 with Retry-After: <s>, without forwarding
 *   lost         forward it, wait for the server's answer, then drop the connection (a lost answer)
 *   hang         never answer
 */
export type Fault = 'forward' | '503' | '500' | 'lost' | 'hang' | `429:${number}`;

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  fault: Fault;
}

export interface FaultProxy {
  url: string;
  /** Faults for the next requests, in order; afterwards `fallback`. */
  plan: Fault[];
  fallback: Fault;
  seen: SeenRequest[];
  close(): Promise<void>;
}

/** A real HTTP proxy in front of a pixgate server that fails on purpose (SDK retry tests). */
export async function startFaultProxy(upstream: string): Promise<FaultProxy> {
  const sockets = new Set<import('node:net').Socket>();
  const p = { plan: [] as Fault[], fallback: 'forward' as Fault, seen: [] as SeenRequest[] } as FaultProxy;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const fault = p.plan.shift() ?? p.fallback;
      p.seen.push({ method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers, body, fault });
      if (fault === 'hang') return;
      if (fault === '503' || fault === '500') {
        res.writeHead(Number(fault), { 'content-type': 'application/json' }).end('{"errors":{"unavailable":"injected by the test proxy"}}');
        return;
      }
      if (fault.startsWith('429:')) {
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': fault.slice(4) }).end('{"error":{"status":429,"message":"Too many requests. Please try again later."}}');
        return;
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && !['host', 'connection', 'content-length'].includes(k)) headers[k] = v;
      const answer = await fetch(upstream + (req.url ?? '/'), { method: req.method!, headers, ...(body && req.method !== 'GET' ? { body } : {}) });
      const text = await answer.text();
      if (fault === 'lost') {
        req.socket.destroy();
        return;
      }
      const out: Record<string, string> = {};
      answer.headers.forEach((v, k) => {
        if (!['content-length', 'transfer-encoding', 'connection', 'keep-alive'].includes(k)) out[k] = v;
      });
      res.writeHead(answer.status, out).end(text);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  p.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  p.close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return p;
}
