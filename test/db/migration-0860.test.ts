import { describe, expect, it } from 'vitest';
import { loadMigrations, migrate } from '../../src/db/migrate.js';
import { BACKENDS, openEmptyDatabase } from '../helpers/db.js';

/**
 * Migration 0860 on a database that already holds records written the old way (after 0850): what
 * pixgate itself wrote into `metadata` moves to typed columns (recipient_bank_name,
 * charge_unmatched_reason, counterpart_account_id, pair_id, failed_at) or is dropped where another
 * row holds it (the original through `original_id`, a boleto settlement, a charge's txid);
 * `metadata` keeps what the merchant or the payer supplied. The new CHECKs bind new writes.
 */

describe.each(BACKENDS)('migration 0860 over existing records on %s', (backend) => {
  it('moves what pixgate wrote into metadata to typed columns or to the rows that hold it, and keeps what the merchant supplied', async () => {
    const { db, close } = await openEmptyDatabase(backend);
    try {
      const all = loadMigrations();
      await migrate(db, all.filter((m) => m.name < '0860'));
      const [merchant] = await db.query<{ id: number }>("INSERT INTO merchants (name, document) VALUES ('Loja', '11444777000161') RETURNING id");
      const [a] = await db.query<{ id: number }>('INSERT INTO accounts (merchant_id) VALUES ($1) RETURNING id', [merchant!.id]);
      const [b] = await db.query<{ id: number }>('INSERT INTO accounts (merchant_id) VALUES ($1) RETURNING id', [merchant!.id]);
      const ids: Record<string, string> = {};
      const insert = async (id: string, accountId: number, kind: string, direction: string, status: number, metadata: object, extra: Record<string, unknown> = {}) => {
        const cols = Object.keys(extra);
        const [row] = await db.query<{ id: string }>(
          `INSERT INTO transactions (transaction_id, account_id, kind, type, direction, status, stage, amount, metadata${cols.map((c) => `, ${c}`).join('')})
           VALUES ($1, $2, $3, $4, $5, $6, 3, 100000, $7::jsonb${cols.map((_, i) => `, $${i + 8}`).join('')}) RETURNING id`,
          [id, accountId, kind, kind.startsWith('tef') || kind === 'boleto_settlement' ? 'internal' : 'pix', direction, status, JSON.stringify(metadata), ...Object.values(extra)],
        );
        ids[id] = row!.id;
      };
      const payer = { payer_name: 'Loja', payer_document: '11444777000161' };
      await insert('PIXIN', a!.id, 'pix_in', 'inbound', 1, { txid: 'T1', charge_unmatched_reason: 'unknown_txid' }, { end_to_end_id: 'E1' });
      await insert('NOTXID', a!.id, 'pix_in', 'inbound', 1, { txid: null });
      await insert('OUT', a!.id, 'cash_out', 'outbound', 3, { recipient_bank_name: 'Banco', txid: 'PEDIDO42', emv: null, rejected_at: '2026-03-03T01:00:00.000Z' }, { ...payer, reason_code: 'AC03' });
      await insert('SETTLED', a!.id, 'cash_out', 'outbound', 1, { recipient_bank_name: null, txid: null, emv: '000201' }, payer);
      await insert('REF', a!.id, 'refund', 'outbound', 4, { original_transaction_id: 'PIXIN', original_end_to_end_id: 'E1', recipient_bank_name: 'Outro', failed_at: '2026-03-03T02:00:00.000Z' }, { original_id: ids.PIXIN, return_code: 'MD06', reason_code: 'X' });
      await insert('RET', a!.id, 'payout_return', 'inbound', 1, { original_transaction_id: 'SETTLED' }, { original_id: ids.SETTLED, return_code: 'MD06' });
      await insert('TEFOUT', a!.id, 'tef_out', 'outbound', 1, { to_account_id: b!.id });
      await insert('TEFIN', b!.id, 'tef_in', 'inbound', 1, { tef_transaction_id: 'TEFOUT', from_account_id: a!.id });
      await insert('TEFOTHER', a!.id, 'tef_out', 'outbound', 1, { to_account_id: null });
      await insert('CHG', a!.id, 'charge', 'inbound', 1, { txid: 'CHARGETXID1' });
      await db.query(
        `INSERT INTO pix_charges (transaction_uuid, account_id, txid, pix_key, pix_key_type, brcode, status, paid_at, expires_at, created_at, updated_at)
         VALUES ($1, $2, 'CHARGETXID1', 'loja@example.com', 'email', '000201', 'paid', now(), now() + interval '1 hour', now(), now())`,
        [ids.CHG, a!.id],
      );
      // A boleto settlement's record: its keys go only where its settlement row names it.
      await insert('BOLSET', a!.id, 'boleto_settlement', 'inbound', 1, { settlement_id: '6f1c2a7e-6a43-4d38-9d0c-3b8f8a9e0c11', boleto_count: 2 });
      await insert('BOLORPHAN', a!.id, 'boleto_settlement', 'inbound', 1, { settlement_id: '7f1c2a7e-6a43-4d38-9d0c-3b8f8a9e0c11', boleto_count: 1 });
      await db.transaction(async (tx) => {
        const [key] = await tx.query<{ id: number }>(`INSERT INTO central_api_keys (name, key_hash) VALUES ('central', $1) RETURNING id`, ['a'.repeat(64)]);
        const [lt] = await tx.query<{ id: number }>(`INSERT INTO ledger_transactions (kind, reference) VALUES ('boleto_settlement', 'x') RETURNING id`);
        const books = await tx.query<{ id: number }>(`SELECT id FROM ledger_accounts ORDER BY id LIMIT 2`);
        if (books.length === 2) {
          await tx.query('INSERT INTO ledger_entries (ledger_transaction_id, ledger_account_id, amount) VALUES ($1, $2, 1), ($1, $3, -1)', [lt!.id, books[0]!.id, books[1]!.id]);
        }
        await tx.query(
          `INSERT INTO boleto_settlements (id, central_key_id, beneficiary_ispb, account_id, boleto_count, amount_cents, transaction_id, ledger_transaction_id, settled_at)
           VALUES ('6f1c2a7e-6a43-4d38-9d0c-3b8f8a9e0c11', $1, '12345678', $2, 2, 1000, 'BOLSET', $3, now())`,
          [key!.id, a!.id, lt!.id],
        );
      });

      expect(await migrate(db, all)).toContain('0860_metadata_merchant_only.sql');
      const rows = await db.query<Record<string, unknown>>(
        `SELECT transaction_id, recipient_bank_name, charge_unmatched_reason, counterpart_account_id, pair_id, failed_at, metadata,
                (SELECT o.transaction_id FROM transactions o WHERE o.id = t.original_id) AS original_transaction_id
           FROM transactions t ORDER BY transaction_id`,
      );
      const none = { recipient_bank_name: null, charge_unmatched_reason: null, counterpart_account_id: null, pair_id: null, failed_at: null, original_transaction_id: null };
      expect(rows).toEqual([
        { transaction_id: 'BOLORPHAN', ...none, metadata: { settlement_id: '7f1c2a7e-6a43-4d38-9d0c-3b8f8a9e0c11', boleto_count: 1 } },
        { transaction_id: 'BOLSET', ...none, metadata: {} },
        { transaction_id: 'CHG', ...none, metadata: {} },
        { transaction_id: 'NOTXID', ...none, metadata: { txid: null } },
        { transaction_id: 'OUT', ...none, recipient_bank_name: 'Banco', failed_at: new Date('2026-03-03T01:00:00.000Z'), metadata: { txid: 'PEDIDO42', emv: null } },
        { transaction_id: 'PIXIN', ...none, charge_unmatched_reason: 'unknown_txid', metadata: { txid: 'T1' } },
        { transaction_id: 'REF', ...none, recipient_bank_name: 'Outro', failed_at: new Date('2026-03-03T02:00:00.000Z'), original_transaction_id: 'PIXIN', metadata: {} },
        { transaction_id: 'RET', ...none, original_transaction_id: 'SETTLED', metadata: {} },
        { transaction_id: 'SETTLED', ...none, metadata: { txid: null, emv: '000201' } },
        { transaction_id: 'TEFIN', ...none, counterpart_account_id: a!.id, pair_id: ids.TEFOUT, metadata: {} },
        { transaction_id: 'TEFOTHER', ...none, metadata: {} },
        { transaction_id: 'TEFOUT', ...none, counterpart_account_id: b!.id, metadata: {} },
      ]);

      // New writes are held to the constraints.
      const refused = (sql: string, constraint: string) => expect(db.query(sql)).rejects.toMatchObject({ code: '23514', constraint });
      await refused(`UPDATE transactions SET recipient_bank_name = 'Banco' WHERE transaction_id = 'PIXIN'`, 'transactions_recipient_bank_name');
      await refused(`UPDATE transactions SET charge_unmatched_reason = 'whatever' WHERE transaction_id = 'PIXIN'`, 'transactions_charge_unmatched_reason');
      await refused(`UPDATE transactions SET charge_unmatched_reason = 'paid' WHERE transaction_id = 'OUT'`, 'transactions_charge_unmatched_reason');
      await refused(`UPDATE transactions SET counterpart_account_id = account_id WHERE transaction_id = 'TEFOUT'`, 'transactions_counterpart_account_id');
      await refused(`UPDATE transactions SET counterpart_account_id = ${b!.id} WHERE transaction_id = 'OUT'`, 'transactions_counterpart_account_id');
      await refused(`UPDATE transactions SET pair_id = NULL WHERE transaction_id = 'TEFIN'`, 'transactions_pair_id');
      await refused(`UPDATE transactions SET failed_at = now() WHERE transaction_id = 'SETTLED'`, 'transactions_failed_at');
    } finally {
      await close();
    }
  });
});
