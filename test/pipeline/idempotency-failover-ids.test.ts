import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/db.js';
import { IdempotencyStore } from '../../src/external/idempotency.js';
import { BACKENDS } from '../helpers/db.js';
import type { MerchantFixture } from '../helpers/client.js';
import type { TestServer } from '../helpers/server.js';
import { withPipelineServer } from './testRoutes.js';

/**
 * Issue 25, item 2. Taking over a key whose holder died reads the key (one statement) and then
 * takes it by its id (another). A failover between the two can lose the row read — committed on the
 * old primary, not yet on its standby — and the id it took, which the new primary gives the next
 * key: the takeover by id alone then took that other key (another scope, another request's lease)
 * and this request would record its answer there. The takeover names the row by id and the token
 * read with it.
 */
describe.each(BACKENDS)('an Idempotency-Key takeover after a failover reused the id, on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  withPipelineServer({ backend }, (server, merchant) => {
    s = server;
    m = merchant;
  });

  it('does not take over another key that now has the id it read', async () => {
    const scope = { merchantId: m.merchantId, method: 'POST', path: '/x', key: `idem-${randomUUID()}` };
    const other = { ...scope, key: `idem-${randomUUID()}` };
    // A key whose holder died (lease over): the next request with it takes it over.
    const first = await new IdempotencyStore(s.ctx.db, s.ctx.clock).claim(scope, 'h');
    if (first.kind !== 'claimed') throw new Error('expected a claim');
    const id = first.claim.id;
    await s.ctx.db.query(`UPDATE idempotency_keys SET locked_until = now() - interval '1 minute' WHERE id = $1`, [id]);

    // The failover, right after the takeover read the row: the row is gone, and another key —
    // held by a request that died too — now has its id.
    const otherToken = randomUUID();
    let failedOver = false;
    const db: Database = Object.create(s.ctx.db, {
      query: {
        value: async (text: string, params?: unknown[]) => {
          const rows = await s.ctx.db.query(text, params as never);
          if (!failedOver && /^\s*SELECT k\.id, k\.request_hash/.test(text)) {
            failedOver = true;
            await s.ctx.db.query('DELETE FROM idempotency_keys WHERE id = $1', [id]);
            await s.ctx.db.query(
              `INSERT INTO idempotency_keys (id, merchant_id, method, path, key, request_hash, status, owner_token, locked_until, expires_at)
               OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, $4, $5, 'h2', 'in_progress', $6, now() - interval '1 minute', now() + interval '1 day')`,
              [id, other.merchantId, other.method, other.path, other.key, otherToken],
            );
          }
          return rows;
        },
      },
    });
    const again = await new IdempotencyStore(db, s.ctx.clock).claim(scope, 'h');
    expect(failedOver).toBe(true);
    if (again.kind !== 'claimed') throw new Error(`expected a claim, got ${again.kind}`);
    // Its own key, claimed anew under another id; the other key is as its holder left it.
    expect(again.claim.id).not.toBe(id);
    const rows = await s.ctx.db.query<{ id: number; key: string; owner_token: string }>(
      'SELECT id::int AS id, key, owner_token::text AS owner_token FROM idempotency_keys WHERE key = ANY($1::text[]) ORDER BY key',
      [[scope.key, other.key]],
    );
    expect(rows.find((r) => r.key === other.key)).toEqual({ id: Number(id), key: other.key, owner_token: otherToken });
    expect(rows.find((r) => r.key === scope.key)?.id).toBe(Number(again.claim.id));
  });
});
