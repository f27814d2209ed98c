import pg from 'pg';

/**
 * libpq-style host lists for node-postgres, which takes one host per URL:
 * `postgres://user@h1:5432,h2:5432/db?target_session_attrs=read-write`. As libpq does, the hosts
 * are tried in order; `target_session_attrs` says which server is acceptable:
 *   any (default)    the first that accepts the connection
 *   read-write       one whose sessions are writable (`transaction_read_only` off)
 *   primary          one not in recovery (`pg_is_in_recovery()` false)
 *   read-only        one whose sessions are read-only
 *   standby          one in recovery
 *   prefer-standby   a standby if one answers, else any
 * The host found is kept for every new connection of the pool until a connection to it fails or it
 * no longer qualifies (a promoted standby, a demoted primary after a switchover): then the list is
 * searched again. Every new connection is checked once (one round trip) when the attribute is not
 * `any`, so a pool never keeps connecting to a server that changed role. A URL of one host without
 * `target_session_attrs` is handed to node-postgres as it is.
 */
export type SessionAttrs = 'any' | 'read-write' | 'primary' | 'read-only' | 'standby' | 'prefer-standby';
const ATTRS: readonly SessionAttrs[] = ['any', 'read-write', 'primary', 'read-only', 'standby', 'prefer-standby'];

export interface HostList {
  hosts: readonly { host: string; port: number }[];
  attrs: SessionAttrs;
  /** The node-postgres Pool options that reach a server of the list. */
  clientConfig(): pg.PoolConfig;
  /** A single client (not pooled) that reaches a server of the list. */
  newClient(config: pg.ClientConfig): pg.Client;
}

/** Thrown by a connection to a server that does not have the wanted role (unavailable: 503). */
export class WrongServerRole extends Error {
  override name = 'WrongServerRole';
  readonly code = 'ECONNREFUSED';
}

/** Parses the URL's host list; throws (with a message naming the problem) on a malformed one. */
export function parseHostList(url: string): { prefix: string; hosts: { host: string; port: number }[]; rest: string; attrs: SessionAttrs } {
  const m = /^(postgres(?:ql)?:\/\/(?:[^@/?#]*@)?)([^/?#]*)(.*)$/.exec(url);
  if (!m) throw new Error('the database URL must start with postgres:// or postgresql://');
  const [, prefix, hostPart, tail] = m as unknown as [string, string, string, string];
  const hosts = hostPart.split(',').map((h) => {
    const hm = /^(\[[^\]]+\]|[^:]*)(?::(\d+))?$/.exec(h);
    if (!hm || hm[1] === '') throw new Error(`the database URL names an empty or malformed host: "${h}"`);
    return { host: hm[1]!.replace(/^\[|\]$/g, ''), port: hm[2] ? Number(hm[2]) : 5432 };
  });
  let attrs: SessionAttrs = 'any';
  let rest = tail;
  const q = tail.indexOf('?');
  if (q >= 0) {
    const params = new URLSearchParams(tail.slice(q + 1));
    const wanted = params.get('target_session_attrs');
    if (wanted !== null) {
      if (!(ATTRS as readonly string[]).includes(wanted)) throw new Error(`target_session_attrs must be one of ${ATTRS.join(', ')}; got "${wanted}"`);
      attrs = wanted as SessionAttrs;
      params.delete('target_session_attrs');
    }
    const left = params.toString();
    rest = tail.slice(0, q) + (left ? `?${left}` : '');
  }
  return { prefix, hosts, rest, attrs };
}

const hostText = (h: { host: string; port: number }) => `${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`;

async function roleOf(client: pg.Client): Promise<{ readOnly: boolean; recovery: boolean }> {
  const { rows } = await client.query<{ ro: string; rec: boolean }>(`SELECT current_setting('transaction_read_only') AS ro, pg_is_in_recovery() AS rec`);
  return { readOnly: rows[0]!.ro === 'on', recovery: rows[0]!.rec };
}

function qualifies(attrs: SessionAttrs, role: { readOnly: boolean; recovery: boolean }, pass: 1 | 2): boolean {
  switch (attrs) {
    case 'any':
      return true;
    case 'read-write':
      return !role.readOnly;
    case 'primary':
      return !role.recovery;
    case 'read-only':
      return role.readOnly;
    case 'standby':
      return role.recovery;
    case 'prefer-standby':
      return pass === 2 || role.recovery;
  }
}

/** Tries the hosts in order (prefer-standby: twice, the second pass taking any); the first that qualifies. */
async function firstQualifyingHost(hosts: readonly { host: string; port: number }[], attrs: SessionAttrs, urlOf: (i: number) => string): Promise<number> {
  const errors: string[] = [];
  for (const pass of attrs === 'prefer-standby' ? ([1, 2] as const) : ([1] as const)) {
    for (let i = 0; i < hosts.length; i++) {
      const probe = new pg.Client({ connectionString: urlOf(i), connectionTimeoutMillis: 5_000 });
      probe.on('error', () => {});
      try {
        await probe.connect();
        if (attrs === 'any' || qualifies(attrs, await roleOf(probe), pass)) return i;
        errors.push(`${hostText(hosts[i]!)}: not ${attrs}`);
      } catch (err) {
        errors.push(`${hostText(hosts[i]!)}: ${(err as Error).message}`);
      } finally {
        void probe.end().catch(() => {});
      }
    }
  }
  throw new WrongServerRole(`no database host is ${attrs === 'any' ? 'reachable' : attrs} (${errors.join('; ')})`);
}

export function hostList(url: string): HostList {
  const { prefix, hosts, rest, attrs } = parseHostList(url);
  if (hosts.length === 1 && attrs === 'any') {
    return { hosts, attrs, clientConfig: () => ({ connectionString: url }), newClient: (config) => new pg.Client({ ...config, connectionString: url }) };
  }
  const urlOf = (i: number) => `${prefix}${hostText(hosts[i]!)}${rest}`;
  let current: number | undefined;
  let searching: Promise<number> | undefined;

  /** The index of the host to connect to, searched once at a time (concurrent callers share it). */
  const search = (): Promise<number> =>
    (searching ??= firstQualifyingHost(hosts, attrs, urlOf)
      .then((i) => (current = i))
      .finally(() => {
        searching = undefined;
      }));

  const forget = (i: number) => {
    if (current === i) current = undefined;
  };

  class HostListClient extends pg.Client {
    constructor(config: pg.ClientConfig) {
      super({ ...config, connectionString: urlOf(current ?? 0) });
    }

    override connect(): Promise<pg.Client>;
    override connect(callback: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): void;
    override connect(callback?: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): Promise<pg.Client> | void {
      const done = this.connectToList().then(() => this as pg.Client);
      if (!callback) return done;
      const cb = callback as (err: Error | null, c?: pg.Client) => void;
      done.then((c) => cb(null, c), (err: Error) => cb(err));
    }

    private async connectToList(): Promise<void> {
      const i = current ?? (await search());
      const { host, port } = hosts[i]!;
      // The parameters node-postgres connects with (and sends a cancel to).
      const self = this as unknown as { host: string; port: number; connectionParameters: { host: string; port: number } };
      self.host = self.connectionParameters.host = host;
      self.port = self.connectionParameters.port = port;
      try {
        await super.connect();
      } catch (err) {
        forget(i);
        throw err;
      }
      if (attrs !== 'any' && !qualifies(attrs, await roleOf(this), 2)) {
        forget(i);
        void this.end().catch(() => {});
        throw new WrongServerRole(`database host ${hostText(hosts[i]!)} is no longer ${attrs}`);
      }
    }
  }

  return { hosts, attrs, clientConfig: () => ({ Client: HostListClient as unknown as typeof pg.Client }), newClient: (config) => new HostListClient(config) };
}
