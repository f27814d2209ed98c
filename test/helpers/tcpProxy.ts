import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A TCP proxy in front of a real server (PostgreSQL, Redis) that fails on purpose, for fault tests
 * that must never touch the machine's shared services:
 *   forward     pass bytes both ways (the default)
 *   refuse      drop every open connection (RST) and refuse new ones (ECONNREFUSED): the server is down
 *   blackhole   keep connections open but pass nothing either way, and accept new connections
 *               that never get an answer: a frozen server, or a partition without RST
 * `url(scheme)` is the proxy's address; the port stays the same across modes.
 */
export type TcpFault = 'forward' | 'refuse' | 'blackhole';

export interface TcpProxy {
  readonly port: number;
  readonly mode: TcpFault;
  setMode(mode: TcpFault): Promise<void>;
  /** Connections the proxy has accepted so far. */
  readonly accepted: number;
  close(): Promise<void>;
}

export async function startTcpProxy(upstreamHost: string, upstreamPort: number): Promise<TcpProxy> {
  const pairs = new Set<{ client: Socket; upstream: Socket }>();
  let mode: TcpFault = 'forward';
  let accepted = 0;
  let port = 0;
  let server: Server | undefined;

  const onConnection = (client: Socket) => {
    accepted++;
    client.on('error', () => {});
    if (mode === 'refuse') {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(upstreamPort, upstreamHost);
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    const pair = { client, upstream };
    pairs.add(pair);
    const forget = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', forget);
    upstream.on('close', forget);
    // Bytes pass only in `forward`; in `blackhole` they are swallowed (neither side hears anything).
    client.on('data', (chunk) => {
      if (mode === 'forward') upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (mode === 'forward') client.write(chunk);
    });
  };

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server = createServer(onConnection);
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        port = (server!.address() as AddressInfo).port;
        resolve();
      });
    });
  const stopListening = () =>
    new Promise<void>((resolve) => {
      if (!server) return resolve();
      const s = server;
      server = undefined;
      s.close(() => resolve());
    });

  await listen();
  return {
    get port() {
      return port;
    },
    get mode() {
      return mode;
    },
    get accepted() {
      return accepted;
    },
    async setMode(next) {
      mode = next;
      if (next === 'refuse') {
        await Promise.all([
          stopListening(),
          (async () => {
            for (const { client, upstream } of pairs) {
              client.resetAndDestroy();
              upstream.destroy();
            }
          })(),
        ]);
      } else if (!server) {
        await listen();
      }
    },
    async close() {
      mode = 'refuse';
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await stopListening();
    },
  };
}
