/** Checks of operator writes and of cash-out limits. */
import type { Op } from '../workload.js';
import type { Add, Q, TxRow } from './types.js';

/** An operator write that took effect, and the audit row key that would name it (`write|<id>` or `resolve|<id>`). */
interface Effect {
  what: string;
  key: string;
}

/** Every operator write that took effect has its audit row (operation and row in one transaction), and every acknowledged one a 2xx row. */
export async function operatorAuditRows(
  q: Q,
  ops: Op[],
  rows: TxRow[],
  infractions: { id: string; decision: string | null }[],
  add: Add,
  figures: Record<string, number>,
  workloadAccounts?: readonly number[],
): Promise<void> {
  const audit = await q<{ route: string; status: number; target: Record<string, unknown> }>('SELECT route, status, target FROM admin_audit_log WHERE status BETWEEN 200 AND 299');
  figures.audit_rows = audit.length;
  const named = new Set<string>();
  for (const a of audit) for (const f of ['transaction_id', 'id', 'infraction_id']) if (typeof a.target?.[f] === 'string') named.add(`${a.route.endsWith('/resolve') ? 'resolve' : 'write'}|${a.target[f]}`);
  const effects = operatorEffects(ops, rows, infractions, named, workloadAccounts);
  const { spare, unanswered } = unnamedRows(await q(
    'SELECT route, status, target FROM admin_audit_log WHERE status IS NULL OR status >= 500 OR status BETWEEN 200 AND 299',
  ));
  figures.audit_rows_unanswered = unanswered;
  let missing = 0;
  for (const e of effects) {
    if (named.has(e.key)) continue;
    const kind = e.key.split('|')[0]!;
    const left = spare.get(kind) ?? 0;
    if (left > 0) {
      spare.set(kind, left - 1);
      continue;
    }
    missing++;
    add('audit_row_missing', `${e.what} took effect with no audit row in admin_audit_log (neither a 2xx row naming it nor an unanswered one)`);
  }
  const acked = ops.filter((o) => o.acked && ['deposit', 'inbound', 'charge_pay', 'med_open', 'med_resolve', 'payout_return'].includes(o.kind)).length;
  figures.operator_writes_acknowledged = acked;
  figures.operator_effects_without_audit_row = missing;
  if (audit.length < acked) add('audit_row_missing', `${acked} operator writes acknowledged, ${audit.length} 2xx rows in admin_audit_log`);
}

/** Operator operations of the workload that took effect, known from the database. */
function operatorEffects(ops: Op[], rows: TxRow[], infractions: { id: string; decision: string | null }[], named: Set<string>, workloadAccounts?: readonly number[]): Effect[] {
  const byTid = new Map(rows.map((r) => [r.transaction_id, r]));
  const effects: Effect[] = [];
  // Deposits on the workload's accounts only: the server runs with APP_ENV=local and funds the demo
  // merchant it seeds on its empty database (src/seed.ts) at start-up, through no operator request.
  // Counted, that deposit took an unanswered row of another write, or, in a run with none, was
  // reported as an operator deposit without its row (seed 818498677).
  const ours = workloadAccounts ? new Set(workloadAccounts.map(String)) : undefined;
  for (const r of rows) {
    const operatorDeposit = r.kind === 'deposit' && (!ours || ours.has(String(r.account_id)));
    if (operatorDeposit || (r.kind === 'pix_in' && /^chaos-\d+$/.test(r.description))) effects.push({ what: `${r.kind} ${r.transaction_id}`, key: `write|${r.transaction_id}` });
  }
  for (const op of ops) {
    if (op.kind === 'charge_pay' && op.parent && byTid.get(op.parent)?.status === 1) {
      const tid = op.acked?.body?.transaction_id as string | undefined;
      if (tid) effects.push({ what: `payment of charge ${op.parent}`, key: `write|${tid}` });
    }
  }
  for (const r of rows) {
    if (r.kind !== 'payout_return') continue;
    const original = r.original_transaction_id ?? (r.metadata?.original_transaction_id as string | undefined);
    // The answer may name the return (when credited at once) or only the payout (the path's transaction_id).
    effects.push({ what: `payout_return ${r.transaction_id} of ${original ?? '?'}`, key: named.has(`write|${r.transaction_id}`) ? `write|${r.transaction_id}` : `write|${original}` });
  }
  for (const i of infractions) {
    effects.push({ what: `infraction ${i.id} opened`, key: `write|${i.id}` });
    if (i.decision) effects.push({ what: `infraction ${i.id} resolved ${i.decision}`, key: `resolve|${i.id}` });
  }
  return effects;
}

/**
 * A row whose status is NULL or 5xx: the operation committed with its row, and the process died
 * (or the status update failed) before the answer was recorded, or the answer failed after the
 * commit (a sandbox call whose notification was not applied within its 10 s); and a 2xx row whose
 * answer named no id (a payout return answered before the service had applied it) — such a row
 * does not name what it wrote, so each may stand for one unnamed effect of its kind (never more).
 * Returns how many such rows of each kind (`write`, `resolve`) may stand for an unnamed effect, and how many were unanswered.
 */
function unnamedRows(loose: { route: string; status: number | null; target: Record<string, unknown> | null }[]): { spare: Map<string, number>; unanswered: number } {
  const spare = new Map<string, number>();
  let unanswered = 0;
  for (const r of loose) {
    const namesOne = ['transaction_id', 'id', 'infraction_id'].some((f) => typeof r.target?.[f] === 'string');
    // (Only the payout return answers 2xx without naming its effect; any other 2xx row must name it.)
    if (r.status !== null && r.status < 300 && (namesOne || !r.route.endsWith('/return'))) continue;
    if (r.status === null || r.status >= 500) unanswered++;
    const kind = r.route.endsWith('/resolve') ? 'resolve' : 'write';
    spare.set(kind, (spare.get(kind) ?? 0) + 1);
  }
  return { spare, unanswered };
}

/** What each account sent in each limit window (cash_out_usage) never exceeds its limit. */
export async function limitWindows(q: Q, add: Add, figures: Record<string, number>): Promise<void> {
  const usage = await q<{ account_id: string; window_kind: string; window_start: Date; amount: string; daily: string; night: string }>(
    `SELECT u.account_id::text, u.window_kind, u.window_start, u.amount::text, a.cash_out_daily_limit_cents::text AS daily, a.cash_out_nighttime_limit_cents::text AS night
       FROM cash_out_usage u JOIN accounts a ON a.id = u.account_id`,
  );
  figures.limit_windows = usage.length;
  for (const u of usage) {
    const limit = BigInt(u.window_kind === 'night' ? u.night : u.daily) * 100n;
    if (BigInt(u.amount) > limit) add('limit_exceeded', `account ${u.account_id} sent ${u.amount} in its ${u.window_kind} window from ${new Date(u.window_start).toISOString()}, limit ${limit}`);
  }
}
