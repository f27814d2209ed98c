import { describe, expect, it } from 'vitest';
import { loadMigrations, migrate } from '../../src/db/migrate.js';
import { BACKENDS, openEmptyDatabase } from '../helpers/db.js';

/**
 * Migration 0850 on a database that already holds records written the old way: the state kept in
 * `metadata` (limit windows, payer, resumable, held_at, reasons, return codes, infraction) moves to
 * its typed columns and leaves `metadata`, which keeps what the merchant supplied and display
 * copies; the new CHECKs bind new writes.
 */

describe.each(BACKENDS)('migration 0850 over existing records on %s', (backend) => {
  it('moves the state kept in metadata to typed columns and keeps the rest of metadata', async () => {
    const { db, close } = await openEmptyDatabase(backend);
    try {
      const all = loadMigrations();
      await migrate(db, all.filter((m) => m.name < '0850'));
      const [merchant] = await db.query<{ id: number }>("INSERT INTO merchants (name, document) VALUES ('Loja', '11444777000161') RETURNING id");
      const [account] = await db.query<{ id: number }>('INSERT INTO accounts (merchant_id) VALUES ($1) RETURNING id', [merchant!.id]);
      const insert = (id: string, kind: string, direction: string, status: number, paymentStatus: string | null, stage: number, metadata: object) =>
        db.query(
          `INSERT INTO transactions (transaction_id, account_id, kind, type, direction, status, payment_status, stage, amount, metadata)
           VALUES ($1, $2, $3, 'pix', $4, $5, $6, $7, 100000, $8::jsonb)`,
          [id, account!.id, kind, direction, status, paymentStatus, stage, JSON.stringify(metadata)],
        );
      const payer = { name: 'Loja', document: '11444777000161' };
      const shown = { recipient_bank_name: 'Banco', txid: 'PEDIDO42', emv: null };
      await insert('HELD', 'cash_out', 'outbound', 2, 'processing', 2, {
        ...shown,
        payer,
        limit_windows: [
          { kind: 'day', start: '2026-03-02T03:00:00.000Z' },
          { kind: 'night', start: '2026-03-02T23:00:00.000Z' },
        ],
        held_at: '2026-03-03T01:00:00.000Z',
      });
      await insert('TIMEOUT', 'cash_out', 'outbound', 4, 'failed', 3, {
        ...shown,
        payer,
        limit_windows: [{ kind: 'day', start: '2026-03-02T03:00:00.000Z' }],
        failure_code: 'provider_timeout',
        resumable: true,
      });
      await insert('REJECTED', 'cash_out', 'outbound', 3, 'rejected', 3, {
        ...shown,
        payer,
        reason_code: 'AC03',
        reason: 'Conta inexistente',
        rejected_at: '2026-03-03T01:00:00.000Z',
      });
      await insert('TEF', 'tef_out', 'outbound', 4, 'failed', 3, {
        to_account_id: null,
        failure_code: 'insufficient_balance',
        failure_detail: 'Available balance 0 is below 100000',
      });
      await insert('MEDREF', 'med_refund', 'outbound', 4, 'failed', 3, {
        return_code: 'FR01',
        original_transaction_id: 'PIXIN1',
        infraction_id: '6f1c2a7e-6a43-4d38-9d0c-3b8f8a9e0c11',
        reason_code: 'RETURN_DEADLINE_EXCEEDED',
        reason: 'Too late',
        failed_at: '2026-03-03T01:00:00.000Z',
      });
      await insert('RET', 'payout_return', 'inbound', 1, null, 3, { return_code: 'MD06', original_transaction_id: 'HELD' });
      await insert('PIXIN', 'pix_in', 'inbound', 1, null, 3, { txid: 'T1', charge_unmatched_reason: 'unknown_txid' });

      // Up to 0850 only: 0860 moves the display copies this test expects to find left in metadata.
      expect(await migrate(db, all.filter((m) => m.name < '0860'))).toContain('0850_typed_state.sql');
      const rows = await db.query(
        `SELECT transaction_id, limit_day_start, limit_night_start, payer_name, payer_document, resumable, held_at,
                reason_code, reason, return_code, infraction_id, metadata
           FROM transactions ORDER BY transaction_id`,
      );
      const none = { limit_day_start: null, limit_night_start: null, payer_name: null, payer_document: null, resumable: false, held_at: null };
      const noReason = { reason_code: null, reason: null, return_code: null, infraction_id: null };
      expect(rows).toEqual([
        {
          transaction_id: 'HELD',
          limit_day_start: new Date('2026-03-02T03:00:00.000Z'),
          limit_night_start: new Date('2026-03-02T23:00:00.000Z'),
          payer_name: 'Loja',
          payer_document: '11444777000161',
          resumable: false,
          held_at: new Date('2026-03-03T01:00:00.000Z'),
          ...noReason,
          metadata: shown,
        },
        {
          transaction_id: 'MEDREF',
          ...none,
          reason_code: 'RETURN_DEADLINE_EXCEEDED',
          reason: 'Too late',
          return_code: 'FR01',
          infraction_id: '6f1c2a7e-6a43-4d38-9d0c-3b8f8a9e0c11',
          metadata: { original_transaction_id: 'PIXIN1', failed_at: '2026-03-03T01:00:00.000Z' },
        },
        { transaction_id: 'PIXIN', ...none, ...noReason, metadata: { txid: 'T1', charge_unmatched_reason: 'unknown_txid' } },
        {
          transaction_id: 'REJECTED',
          ...none,
          payer_name: 'Loja',
          payer_document: '11444777000161',
          ...noReason,
          reason_code: 'AC03',
          reason: 'Conta inexistente',
          metadata: { ...shown, rejected_at: '2026-03-03T01:00:00.000Z' },
        },
        { transaction_id: 'RET', ...none, ...noReason, return_code: 'MD06', metadata: { original_transaction_id: 'HELD' } },
        {
          transaction_id: 'TEF',
          ...none,
          ...noReason,
          reason_code: 'insufficient_balance',
          reason: 'Available balance 0 is below 100000',
          metadata: { to_account_id: null },
        },
        {
          transaction_id: 'TIMEOUT',
          ...none,
          limit_day_start: new Date('2026-03-02T03:00:00.000Z'),
          payer_name: 'Loja',
          payer_document: '11444777000161',
          resumable: true,
          ...noReason,
          reason_code: 'provider_timeout',
          metadata: shown,
        },
      ]);

      // New writes are held to the constraints.
      const refused = (sql: string) => expect(db.query(sql)).rejects.toMatchObject({ code: '23514' });
      await refused(`UPDATE transactions SET status = 1, payment_status = 'settled', reason_code = NULL WHERE transaction_id = 'TIMEOUT'`);
      await expect(db.query(`UPDATE transactions SET status = 2, payment_status = 'processing', stage = 1, reason_code = NULL WHERE transaction_id = 'TIMEOUT'`)).rejects.toMatchObject({
        constraint: 'transactions_resumable',
      });
      await expect(db.query(`UPDATE transactions SET return_code = NULL WHERE transaction_id = 'RET'`)).rejects.toMatchObject({ constraint: 'transactions_return_code' });
      await expect(db.query(`UPDATE transactions SET infraction_id = NULL WHERE transaction_id = 'MEDREF'`)).rejects.toMatchObject({ constraint: 'transactions_infraction_id' });
      await expect(db.query(`UPDATE transactions SET payer_name = NULL WHERE transaction_id = 'HELD'`)).rejects.toMatchObject({ constraint: 'transactions_payer_name' });
      await expect(db.query(`UPDATE transactions SET held_at = now() WHERE transaction_id = 'PIXIN'`)).rejects.toMatchObject({ constraint: 'transactions_held_at' });
      await expect(db.query(`UPDATE transactions SET limit_day_start = now() WHERE transaction_id = 'PIXIN'`)).rejects.toMatchObject({ constraint: 'transactions_limit_windows' });
      await expect(db.query(`UPDATE transactions SET reason_code = 'X' WHERE transaction_id = 'PIXIN'`)).rejects.toMatchObject({ constraint: 'transactions_reason' });
    } finally {
      await close();
    }
  });
});
