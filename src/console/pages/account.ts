import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { operatorMay } from '../../auth/operators.js';
import type { AccountPatch } from '../../merchants/repository.js';
import * as merchants from '../../merchants/service.js';
import { limitWindows } from '../../pix/limits.js';
import { usageIn } from '../../pix/store/limitWindows.js';
import { one, type Form } from '../../portal/formBody.js';
import { html, parseReais } from '../../portal/html.js';
import { formatCents } from '../../portal/i18n.js';
import { auditedWrite } from '../audit.js';
import { at, brl, refusalText, type ConsoleKit } from '../kit.js';
import { accountHead, accountKeys, recentTransactions, webhookHealth } from '../queries.js';
import { webhookTable } from './webhooks.js';

const IDEMPOTENCY_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A merchant's account: balances, limits with today's usage, keys, webhooks, recent records; the deposit form. */
export function accountPages(app: FastifyInstance, kit: ConsoleKit) {
  const { ctx, layout, page, allow, csrf, flashAndBack } = kit;

  app.get<{ Params: { id: string } }>('/console/accounts/:id', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const id = /^\d{1,15}$/.test(req.params.id) ? Number(req.params.id) : NaN;
    const head = Number.isFinite(id) ? await accountHead(ctx.db, id) : undefined;
    if (!head) return page(reply, layout(req, 'Account not found', html`<p>No account ${req.params.id}.</p>`), 404);
    const { account, balances } = await merchants.getAccount(ctx.db, id);
    const usage = await usageIn(ctx.db, id, limitWindows(ctx.clock.now()));
    const { apiKeys, pixKeys } = await accountKeys(ctx.db, head.merchant_id, id);
    const hooks = await webhookHealth(ctx.db, head.merchant_id);
    const txs = await recentTransactions(ctx.db, id);
    const limit = (cents: number | null) => (cents === null ? 'no limit' : formatCents(cents));
    const mayDeposit = operatorMay(req.console!.operator.role, 'deposit');
    const mayLimits = operatorMay(req.console!.operator.role, 'limits');
    const body = html`<p class="muted">Merchant ${head.merchant_id} · document ${head.document} · merchant ${head.merchant_status} · account ${account.status}</p>
<div class="grid">
<div class="card"><div class="label">Available</div><div class="figure" data-testid="available">${brl(balances.available)}</div></div>
<div class="card"><div class="label">Blocked (MED)</div><div class="figure">${brl(balances.blocked)}</div></div>
<div class="card"><div class="label">Pending (in flight)</div><div class="figure">${brl(balances.pending)}</div></div></div>
<h2>Limits and today's usage</h2>
<div class="scroll"><table><thead><tr><th>Limit</th><th class="num">Set to</th><th class="num">Used in the current window</th></tr></thead><tbody>
<tr><td>One cash-out</td><td class="num">${limit(account.cash_out_max_amount_cents)}</td><td class="num">—</td></tr>
<tr><td>Daily cash-out</td><td class="num">${limit(account.cash_out_daily_limit_cents)}</td><td class="num" data-testid="usage-day">${brl(usage.get('day') ?? 0)}</td></tr>
<tr><td>Nighttime cash-out (20:00–06:00)</td><td class="num">${limit(account.cash_out_nighttime_limit_cents)}</td><td class="num">${brl(usage.get('night') ?? 0)}</td></tr>
<tr><td>Fees</td><td class="num" colspan="2">cash-out ${formatCents(account.cash_out_fee_cents)} · cash-in ${formatCents(account.cash_in_fee_cents)}</td></tr></tbody></table></div>
${
  mayLimits
    ? html`<form class="inline card" method="post" action="/console/accounts/${id}/limits">${csrf(req)}
<label>One cash-out (R$) <input name="max" inputmode="decimal" maxlength="20" placeholder="unchanged"></label>
<label>Daily (R$) <input name="daily" inputmode="decimal" maxlength="20" placeholder="unchanged"></label>
<label>Nighttime (R$) <input name="night" inputmode="decimal" maxlength="20" placeholder="unchanged"></label>
<button type="submit" class="secondary">Change the limits</button></form>`
    : ''
}
${
  mayDeposit
    ? html`<h2>Deposit</h2><form class="stack card" method="post" action="/console/accounts/${id}/deposit">${csrf(req)}
<input type="hidden" name="idempotency_id" value="${randomUUID()}">
<label>Amount (R$) <input name="amount" inputmode="decimal" required maxlength="20" placeholder="1.234,56"></label>
<label>Reason (kept in the audit log and shown on the merchant's statement) <input name="reason" required maxlength="140"></label>
<button type="submit">Credit the deposit</button><p class="muted">This form credits once: sending it again (a double click, a reload) answers the first deposit.</p></form>`
    : ''
}
<h2>API keys</h2><div class="scroll"><table><thead><tr><th>Client id</th><th>Permissions</th><th>Active</th><th>Last use</th></tr></thead><tbody>
${apiKeys.map((k) => html`<tr><td class="mono">${k.client_id}</td><td>${k.permissions.join(', ')}</td><td>${k.active ? 'yes' : 'revoked'}</td><td>${k.last_used_at ? html`${at(k.last_used_at)} · ${k.last_used_ip}` : 'never'}</td></tr>`)}</tbody></table></div>
<h2>PIX keys</h2><p>${pixKeys.length ? pixKeys.map((k) => html`<span class="badge">${k.type}</span> <span class="mono">${k.key}</span> `) : 'none'}</p>
<h2>Webhooks</h2>${webhookTable(req, kit, hooks)}
<h2>Recent transactions</h2><div class="scroll"><table data-testid="recent"><thead><tr><th>When</th><th>Transaction</th><th>Kind</th><th>Status</th><th class="num">Amount</th><th>Description</th></tr></thead><tbody>
${txs.map((t) => html`<tr><td>${at(t.created_at)}</td><td><a class="mono" href="/console/transactions/${t.transaction_id}">${t.transaction_id}</a></td><td class="nowrap">${t.kind}</td><td><span class="badge ${t.statement_status}">${t.statement_status}</span></td><td class="num">${t.direction === 'outbound' ? '−' : ''}${brl(t.amount)}</td><td>${t.description}</td></tr>`)}</tbody></table></div>`;
    return page(reply, layout(req, head.name, body));
  });

  app.post<{ Params: { id: string } }>('/console/accounts/:id/limits', async (req, reply) => {
    if (!allow(req, reply, 'limits')) return reply;
    const back = `/console/accounts/${encodeURIComponent(req.params.id)}`;
    const id = /^\d{1,15}$/.test(req.params.id) ? Number(req.params.id) : NaN;
    const f = req.body as Form;
    const patch: AccountPatch = {};
    for (const [field, column] of [['max', 'cash_out_max_amount_cents'], ['daily', 'cash_out_daily_limit_cents'], ['night', 'cash_out_nighttime_limit_cents']] as const) {
      const text = (one(f, field) ?? '').trim();
      if (!text) continue;
      const cents = parseReais(text);
      if (cents === null) return flashAndBack(req, reply, 'error', `${field}: type reais, as 1.234,56.`, back);
      patch[column] = cents;
    }
    if (!Number.isFinite(id) || Object.keys(patch).length === 0) return flashAndBack(req, reply, 'error', 'Nothing to change.', back);
    try {
      await auditedWrite(ctx, req, `operator:${req.console!.operator.username}`, { account_id: id, ...patch }, () => merchants.updateAccount(ctx.db, id, patch));
      return flashAndBack(req, reply, 'ok', 'Limits changed.', back);
    } catch (err) {
      return flashAndBack(req, reply, 'error', refusalText(err), back);
    }
  });

  app.post<{ Params: { id: string } }>('/console/accounts/:id/deposit', async (req, reply) => {
    if (!allow(req, reply, 'deposit')) return reply;
    const back = `/console/accounts/${encodeURIComponent(req.params.id)}`;
    const id = /^\d{1,15}$/.test(req.params.id) ? Number(req.params.id) : NaN;
    const f = req.body as Form;
    const key = one(f, 'idempotency_id') ?? '';
    const cents = parseReais(one(f, 'amount'));
    const reason = (one(f, 'reason') ?? '').trim();
    if (!Number.isFinite(id) || !IDEMPOTENCY_ID.test(key)) return flashAndBack(req, reply, 'error', 'The form was out of date (no idempotency id): reload it.', back);
    if (cents === null || cents <= 0) return flashAndBack(req, reply, 'error', 'Amount: type reais, as 1.234,56.', back);
    if (!reason || reason.length > 140) return flashAndBack(req, reply, 'error', 'Reason: required, at most 140 characters.', back);
    const who = `operator:${req.console!.operator.username}`;
    try {
      const r = await auditedWrite(
        ctx,
        req,
        who,
        { account_id: id, amount_cents: cents, reason, idempotency_id: key },
        () => merchants.deposit(ctx.db, ctx.clock, { accountId: id, amountCents: cents, description: reason, idempotencyKey: `console:${key}` }),
        (d) => ({ transaction_id: d.transactionId, replayed: d.replayed }),
      );
      const text = r.replayed ? `This form was sent before: the deposit ${r.transactionId} was credited once (${brl(r.amount)}).` : `Deposit ${r.transactionId} of ${brl(r.amount)} credited.`;
      return flashAndBack(req, reply, 'ok', text, back);
    } catch (err) {
      return flashAndBack(req, reply, 'error', refusalText(err), back);
    }
  });
}
