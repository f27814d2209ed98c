import { describe, expect, it } from 'vitest';
import { loadMigrations, migrate } from '../../src/db/migrate.js';
import { BACKENDS, openEmptyDatabase } from '../helpers/db.js';

/**
 * Migration 0690 on a database that already holds records: the returned amounts kept in
 * `metadata` move to the typed column, and the new CHECKs (NOT VALID) bind new writes without
 * refusing to migrate rows written before them.
 */

describe.each(BACKENDS)('migration 0690 over existing records on %s', (backend) => {
  it('moves metadata.returned_amount to the typed column and keeps older rows it does not check', async () => {
    const { db, close } = await openEmptyDatabase(backend);
    try {
      const all = loadMigrations();
      await migrate(db, all.filter((m) => m.name < '0690'));
      const [merchant] = await db.query<{ id: number }>("INSERT INTO merchants (name, document) VALUES ('Loja', '11444777000161') RETURNING id");
      const [account] = await db.query<{ id: number }>('INSERT INTO accounts (merchant_id) VALUES ($1) RETURNING id', [merchant!.id]);
      const insert = (id: string, kind: string, paymentStatus: string | null, metadata: object) =>
        db.query(
          `INSERT INTO transactions (transaction_id, account_id, kind, type, direction, status, payment_status, stage, amount, metadata)
           VALUES ($1, $2, $3, 'pix', 'outbound', 1, $4, 3, 100000, $5::jsonb)`,
          [id, account!.id, kind, paymentStatus, JSON.stringify(metadata)],
        );
      await insert('PART', 'cash_out', 'settled', { returned_amount: 30_000 });
      await insert('FULL', 'cash_out', 'returned', { returned_amount: 100_000 });
      await insert('NONE', 'cash_out', 'settled', {});
      await insert('OLDKIND', 'legacy_kind', null, {});

      expect((await migrate(db, all)).filter((n) => n >= '0690')).toContain('0690_ledger_backstops.sql');
      const rows = await db.query<{ transaction_id: string; returned_amount: number }>('SELECT transaction_id, returned_amount FROM transactions ORDER BY transaction_id');
      expect(rows).toEqual([
        { transaction_id: 'FULL', returned_amount: 100_000 },
        { transaction_id: 'NONE', returned_amount: 0 },
        { transaction_id: 'OLDKIND', returned_amount: 0 },
        { transaction_id: 'PART', returned_amount: 30_000 },
      ]);
      // A new write is held to the constraints.
      await expect(insert('NEWKIND', 'legacy_kind', null, {})).rejects.toMatchObject({ code: '23514', constraint: 'transactions_kind' });
    } finally {
      await close();
    }
  });
});
