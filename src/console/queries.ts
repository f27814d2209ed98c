import type { Sql } from '../db/db.js';

/**
 * The console's read model across merchants (docs/console.md): the search by any identifier, an
 * account's keys, webhooks and recent records, the webhooks' health, the audit log filtered. Reads
 * only, each bounded; every write goes through a domain function (the pages call them).
 */

export interface SearchHit {
  kind: 'merchant' | 'account' | 'transaction' | 'pix key';
  label: string;
  detail: string;
  href: string;
}

const LIMIT = 50;

export async function searchAnything(db: Sql, raw: string): Promise<SearchHit[]> {
  const q = raw.trim().slice(0, 200);
  if (!q) return [];
  const hits: SearchHit[] = [];
  const digits = q.replace(/[.\-/\s]/g, '');
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(q) ? q.toLowerCase() : null;
  const num = /^\d{1,15}$/.test(q) ? Number(q) : null;

  const merchants = await db.query<{ id: number; name: string; document: string; account_id: number | null }>(
    `SELECT m.id, m.name, m.document, (SELECT min(a.id) FROM accounts a WHERE a.merchant_id = m.id) AS account_id
       FROM merchants m
      WHERE m.id = $1 OR m.document = $2 OR m.name ILIKE '%' || $3 || '%'
      ORDER BY m.id LIMIT ${LIMIT}`,
    [num, digits, q.replace(/[\\%_]/g, (c) => `\\${c}`)],
  );
  for (const m of merchants) {
    hits.push({ kind: 'merchant', label: m.name, detail: `merchant ${m.id} · document ${m.document}`, href: m.account_id ? `/console/accounts/${m.account_id}` : '/console' });
  }
  if (num !== null) {
    const accounts = await db.query<{ id: number; merchant_id: number; name: string }>(
      'SELECT a.id, a.merchant_id, m.name FROM accounts a JOIN merchants m ON m.id = a.merchant_id WHERE a.id = $1',
      [num],
    );
    for (const a of accounts) hits.push({ kind: 'account', label: a.name, detail: `account ${a.id} · merchant ${a.merchant_id}`, href: `/console/accounts/${a.id}` });
  }
  const txs = await db.query<{ transaction_id: string; kind: string; amount: number; account_id: number; end_to_end_id: string | null; external_id: string | null }>(
    `SELECT transaction_id, kind, amount, account_id, end_to_end_id, external_id FROM transactions
      WHERE transaction_id = $1 OR end_to_end_id = $1 OR external_id = $1 OR id = $2::uuid
      ORDER BY created_at DESC LIMIT ${LIMIT}`,
    [q, uuid],
  );
  for (const t of txs) {
    hits.push({
      kind: 'transaction',
      label: t.transaction_id,
      detail: `${t.kind} · account ${t.account_id}${t.end_to_end_id ? ` · e2e ${t.end_to_end_id}` : ''}${t.external_id ? ` · external ${t.external_id}` : ''}`,
      href: `/console/transactions/${encodeURIComponent(t.transaction_id)}`,
    });
  }
  const keys = await db.query<{ key: string; type: string; account_id: number }>(
    `SELECT key, type, account_id FROM pix_keys WHERE key = $1 OR key = $2 OR key = lower($1) LIMIT ${LIMIT}`,
    [q, digits],
  );
  for (const k of keys) hits.push({ kind: 'pix key', label: k.key, detail: `${k.type} key · account ${k.account_id}`, href: `/console/accounts/${k.account_id}` });
  return hits;
}

export interface TransactionHead {
  id: string;
  transaction_id: string;
  account_id: number;
  merchant_id: number;
  merchant_name: string;
  kind: string;
  direction: string;
  statement_status: string;
  amount: number;
  fee_amount: number;
  end_to_end_id: string | null;
  external_id: string | null;
  description: string;
  counterparty_name: string;
  created_at: Date;
}

export async function transactionHead(db: Sql, id: string): Promise<TransactionHead | undefined> {
  if (id.length > 200) return undefined;
  const [t] = await db.query<TransactionHead>(
    `SELECT t.id, t.transaction_id, t.account_id, a.merchant_id, m.name AS merchant_name, t.kind, t.direction, t.statement_status,
            t.amount, t.fee_amount, t.end_to_end_id, t.external_id, t.description, t.counterparty_name, t.created_at
       FROM transactions t JOIN accounts a ON a.id = t.account_id JOIN merchants m ON m.id = a.merchant_id
      WHERE t.transaction_id = $1 OR t.end_to_end_id = $1`,
    [id],
  );
  return t;
}

export async function accountHead(db: Sql, accountId: number) {
  const [r] = await db.query<{ merchant_id: number; name: string; document: string; merchant_status: string }>(
    'SELECT m.id AS merchant_id, m.name, m.document, m.status AS merchant_status FROM accounts a JOIN merchants m ON m.id = a.merchant_id WHERE a.id = $1',
    [accountId],
  );
  return r;
}

export async function recentTransactions(db: Sql, accountId: number) {
  return db.query<{ transaction_id: string; kind: string; direction: string; statement_status: string; amount: number; description: string; created_at: Date }>(
    `SELECT transaction_id, kind, direction, statement_status, amount, description, created_at FROM transactions
      WHERE account_id = $1 ORDER BY created_at DESC, id DESC LIMIT 20`,
    [accountId],
  );
}

export async function accountKeys(db: Sql, merchantId: number, accountId: number) {
  const apiKeys = await db.query<{ client_id: string; permissions: string[]; active: boolean; last_used_at: Date | null; last_used_ip: string | null }>(
    `SELECT k.client_id, k.permissions, k.active, u.last_used_at, u.last_used_ip FROM api_keys k LEFT JOIN api_key_usage u ON u.client_id = k.client_id
      WHERE k.merchant_id = $1 ORDER BY k.created_at DESC LIMIT ${LIMIT}`,
    [merchantId],
  );
  const pixKeys = await db.query<{ key: string; type: string; status: string }>(`SELECT key, type, status FROM pix_keys WHERE account_id = $1 ORDER BY created_at LIMIT ${LIMIT}`, [accountId]);
  return { apiKeys, pixKeys };
}

export interface WebhookHealth {
  id: string;
  merchant_id: number;
  merchant_name: string;
  url: string;
  description: string | null;
  is_active: boolean;
  pending: number;
  failed: number;
  delivered: number;
  oldest_pending: Date | null;
  last_status_code: number | null;
  last_error: string | null;
}

/** Webhooks across merchants (or of one), failing endpoints first, then the biggest backlog. */
export async function webhookHealth(db: Sql, merchantId: number | null): Promise<WebhookHealth[]> {
  return db.query<WebhookHealth>(
    `SELECT w.id, w.merchant_id, m.name AS merchant_name, w.url, w.description, w.is_active,
            count(*) FILTER (WHERE d.status = 'pending')::int AS pending,
            count(*) FILTER (WHERE d.status = 'failed')::int AS failed,
            count(*) FILTER (WHERE d.status = 'delivered')::int AS delivered,
            min(d.created_at) FILTER (WHERE d.status = 'pending') AS oldest_pending,
            (SELECT d2.last_status_code FROM webhook_deliveries d2 WHERE d2.webhook_id = w.id AND d2.last_attempt_at IS NOT NULL ORDER BY d2.last_attempt_at DESC LIMIT 1) AS last_status_code,
            (SELECT d2.last_error FROM webhook_deliveries d2 WHERE d2.webhook_id = w.id AND d2.last_attempt_at IS NOT NULL ORDER BY d2.last_attempt_at DESC LIMIT 1) AS last_error
       FROM webhooks w JOIN merchants m ON m.id = w.merchant_id
       LEFT JOIN webhook_deliveries d ON d.webhook_id = w.id AND d.created_at > now() - interval '30 days'
      WHERE w.deleted_at IS NULL AND ($1::bigint IS NULL OR w.merchant_id = $1)
      GROUP BY w.id, m.name
      ORDER BY count(*) FILTER (WHERE d.status = 'failed') DESC, count(*) FILTER (WHERE d.status = 'pending') DESC, w.created_at
      LIMIT 200`,
    [merchantId],
  );
}

export async function failedDeliveries(db: Sql, webhookId: string) {
  return db.query<{ id: string; event: string; status: string; attempts: number; last_status_code: number | null; created_at: Date }>(
    `SELECT id, event, status, attempts, last_status_code, created_at FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY created_at DESC LIMIT 20`,
    [webhookId],
  );
}

export interface AuditFilter {
  operator?: string | undefined;
  action?: string | undefined;
  from?: Date | undefined;
  to?: Date | undefined;
  before?: number | undefined;
  limit: number;
}

export async function auditRows(db: Sql, f: AuditFilter) {
  return db.query<{ id: number; at: Date; actor: string; client_ip: string; method: string; route: string; target: Record<string, unknown>; request_id: string; status: number | null }>(
    `SELECT id, at, actor, client_ip, method, route, target, request_id, status FROM admin_audit_log
      WHERE ($1::text IS NULL OR actor = $1 OR actor = 'operator:' || $1)
        AND ($2::text IS NULL OR route ILIKE '%' || $2 || '%')
        AND ($3::timestamptz IS NULL OR at >= $3) AND ($4::timestamptz IS NULL OR at < $4)
        AND ($5::bigint IS NULL OR id < $5)
      ORDER BY id DESC LIMIT $6`,
    [f.operator ?? null, f.action ? f.action.replace(/[\\%_]/g, (c) => `\\${c}`) : null, f.from ?? null, f.to ?? null, f.before ?? null, f.limit],
  );
}

/** Open MED cases across merchants, the nearest defense deadline first. */
export async function medQueue(db: Sql) {
  return db.query<{
    id: string; account_id: number; merchant_name: string; original_transaction_id: string; end_to_end_id: string; status: string; reason: string;
    amount: number; blocked_amount: number; defense_deadline: Date; created_at: Date;
  }>(
    `SELECT i.id, i.account_id, m.name AS merchant_name, t.transaction_id AS original_transaction_id, i.end_to_end_id, i.status, i.reason,
            i.amount, i.blocked_amount, i.defense_deadline, i.created_at
       FROM med_infractions i JOIN transactions t ON t.id = i.original_id JOIN accounts a ON a.id = i.account_id JOIN merchants m ON m.id = a.merchant_id
      WHERE i.status IN ('OPEN', 'defense_submitted')
      ORDER BY i.defense_deadline, i.id LIMIT 200`,
  );
}
