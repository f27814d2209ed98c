import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/db/db.js';
import * as store from '../../src/rail/sim/store.js';
import { BACKENDS } from '../helpers/db.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * The simulated rail's own bookkeeping commits without waiting for the disk: each of its hot
 * statements whose loss is harmless sets synchronous_commit off for its own transaction only
 * (`RELAXED_COMMIT`, src/db/db.ts; docs/decisions.md, "The simulated rail's commits"); the payment
 * order, whose acknowledgement pixgate records, commits synchronously (docs/decisions.md, q2-failover). Run here inside a transaction
 * (rolled back) to read the setting the statement's commit would see; the session keeps `on`.
 */
class RolledBack extends Error {}

describe.each(BACKENDS)("the simulated rail's commits on %s", (backend) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ backend, workers: false });
  });
  afterAll(async () => s?.close());

  /** synchronous_commit as the transaction sees it after `run`, then rolled back. */
  async function settingAfter(run: (tx: Sql) => Promise<unknown>): Promise<string> {
    let setting = '';
    await s.ctx.db
      .transaction(async (tx) => {
        await run(tx);
        setting = (await tx.query<{ synchronous_commit: string }>('SHOW synchronous_commit'))[0]!.synchronous_commit;
        throw new RolledBack();
      })
      .catch((err: unknown) => {
        if (!(err instanceof RolledBack)) throw err;
      });
    return setting;
  }

  const now = new Date();
  const order: store.OutboundOrder = {
    end_to_end_id: `E${randomBytes(12).toString('hex')}`,
    transaction_id: `PIXOUT-${randomBytes(6).toString('hex')}`,
    amount: 1000,
    payer_name: 'Loja',
    payer_document: '11444777000161',
    payer_ispb: '00000000',
    payer_account_id: 1,
    receiver_key: 'nobody@example.com',
    description: null,
    txid: null,
  };
  const terms: store.TakeTerms = { created_at: now, protectionDue: now, settlementDue: now, institutionIspb: '00000000', refusals: { keyNotFound: 'KEY_NOT_FOUND', sameInstitution: 'SAME' } };

  it('a statement of its own leaves the setting alone', async () => {
    expect(await settingAfter((tx) => tx.query('SELECT 1'))).toBe('on');
  });

  it('on for the payment order: its acknowledgement is as durable as pixgate\'s record of it (issue 25)', async () => {
    expect(await settingAfter((tx) => store.takeOutboundPayments(tx, [order], terms))).toBe('on');
  });

  it('off for the due settlements, the lease and the delete of notifications (each done again if lost)', async () => {
    expect(await settingAfter((tx) => store.settleDuePayments(tx, now, 10, null))).toBe('off');
    expect(await settingAfter((tx) => store.claimNotifications(tx, now, now, 10))).toBe('off');
    expect(await settingAfter((tx) => store.deleteNotifications(tx, [{ id: -1, notification_id: 'none' }]))).toBe('off');
    // Nothing stayed on the connection: the next transaction commits synchronously again.
    expect(await settingAfter((tx) => tx.query('SELECT 1'))).toBe('on');
  });
});
