import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { revokeKey } from '../../auth/keyLifecycle.js';
import { resolveClientIp } from '../../http/clientIp.js';
import { operatorMay } from '../../auth/operators.js';
import type { AccountPatch } from '../../merchants/repository.js';
import * as merchants from '../../merchants/service.js';
import { limitWindows } from '../../pix/limits.js';
import { usageIn } from '../../pix/store/limitWindows.js';
import { one, type Form } from '../../portal/formBody.js';
import { html, parseReais } from '../../portal/html.js';
import { dictionary, formatCents } from '../../portal/i18n.js';
import { auditedWrite } from '../audit.js';
import { brl, lang, refusalText, type ConsoleKit } from '../kit.js';
import { CSV_MAX, cut, pageOf, pager, sendCsv } from '../paging.js';
import { accountHead, accountKeys, recentTransactions, webhookHealth } from '../queries.js';
import { webhookTable } from './webhooks.js';

const IDEMPOTENCY_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A merchant's account: balances, limits with today's usage, keys, webhooks, recent records; the deposit form. */
export function accountPages(app: FastifyInstance, kit: ConsoleKit) {
  const { ctx, layout, page, allow, csrf, flashAndBack } = kit;

  app.get<{ Params: { id: string } }>('/console/accounts/:id', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const id = /^\d{1,15}$/.test(req.params.id) ? Number(req.params.id) : NaN;
    const { L, at } = lang(req);
    const t = M(L);
    const head = Number.isFinite(id) ? await accountHead(ctx.db, id) : undefined;
    if (!head) return page(reply, layout(req, t.notFound, html`<p>${t.noAccount} ${req.params.id}.</p>`), 404);
    const { account, balances } = await merchants.getAccount(ctx.db, id);
    const usage = await usageIn(ctx.db, id, limitWindows(ctx.clock.now()));
    const { apiKeys, pixKeys } = await accountKeys(ctx.db, head.merchant_id, id);
    const hooks = await webhookHealth(ctx.db, head.merchant_id);
    const at0 = pageOf(req);
    const { rows: txs, more } = cut(await recentTransactions(ctx.db, id, at0.limit, at0.offset));
    const limit = (cents: number | null) => (cents === null ? t.noLimit : formatCents(cents));
    const mayDeposit = operatorMay(req.console!.operator.role, 'deposit');
    const mayLimits = operatorMay(req.console!.operator.role, 'limits');
    const mayKeys = operatorMay(req.console!.operator.role, 'keys');
    const body = html`<p class="muted">${t.merchant} ${head.merchant_id} · ${t.document} ${head.document} · ${t.merchantL} ${head.merchant_status} · ${t.account} ${account.status}</p>
<div class="grid">
<div class="card"><div class="label">${t.available}</div><div class="figure" data-testid="available">${brl(balances.available)}</div></div>
<div class="card"><div class="label">${t.blocked}</div><div class="figure">${brl(balances.blocked)}</div></div>
<div class="card"><div class="label">${t.pending}</div><div class="figure">${brl(balances.pending)}</div></div></div>
<h2>${t.limits}</h2>
<div class="scroll"><table><thead><tr><th>${t.limit}</th><th class="num">${t.setTo}</th><th class="num">${t.used}</th></tr></thead><tbody>
<tr><td>${t.one}</td><td class="num">${limit(account.cash_out_max_amount_cents)}</td><td class="num">—</td></tr>
<tr><td>${t.daily}</td><td class="num">${limit(account.cash_out_daily_limit_cents)}</td><td class="num" data-testid="usage-day">${brl(usage.get('day') ?? 0)}</td></tr>
<tr><td>${t.night}</td><td class="num">${limit(account.cash_out_nighttime_limit_cents)}</td><td class="num">${brl(usage.get('night') ?? 0)}</td></tr>
<tr><td>${t.fees}</td><td class="num" colspan="2">${t.cashOut} ${formatCents(account.cash_out_fee_cents)} · ${t.cashIn} ${formatCents(account.cash_in_fee_cents)}</td></tr></tbody></table></div>
${
  mayLimits
    ? html`<form class="inline card" method="post" action="/console/accounts/${id}/limits">${csrf(req)}
<label>${t.oneR} <input name="max" inputmode="decimal" maxlength="20" placeholder="${t.unchanged}"></label>
<label>${t.dailyR} <input name="daily" inputmode="decimal" maxlength="20" placeholder="${t.unchanged}"></label>
<label>${t.nightR} <input name="night" inputmode="decimal" maxlength="20" placeholder="${t.unchanged}"></label>
<button type="submit" class="secondary">${t.change}</button></form>`
    : ''
}
${
  mayDeposit
    ? html`<h2>${t.deposit}</h2><form class="stack card" method="post" action="/console/accounts/${id}/deposit">${csrf(req)}
<input type="hidden" name="idempotency_id" value="${randomUUID()}">
<label>${t.amountR} <input name="amount" inputmode="decimal" required maxlength="20" placeholder="1.234,56"></label>
<label>${t.reason} <input name="reason" required maxlength="140"></label>
<button type="submit">${t.credit}</button><p class="muted">${t.once}</p></form>`
    : ''
}
<h2>${t.apiKeys}</h2><div class="scroll"><table><thead><tr><th>${t.clientId}</th><th>${t.permissions}</th><th>${t.active}</th><th>${t.lastUse}</th>${mayKeys ? html`<th></th>` : ''}</tr></thead><tbody>
${apiKeys.map(
  (k) =>
    html`<tr><td class="mono">${k.client_id}</td><td>${k.permissions.join(', ')}</td><td>${k.active ? t.yes : t.revoked}</td><td>${k.last_used_at ? html`${at(k.last_used_at)} · ${k.last_used_ip}` : t.never}</td>${
      mayKeys
        ? html`<td>${k.active ? html`<form method="post" action="/console/accounts/${id}/keys/revoke">${csrf(req)}<input type="hidden" name="client_id" value="${k.client_id}"><button type="submit" data-revoke="${k.client_id}">${t.revoke}</button></form>` : ''}</td>`
        : ''
    }</tr>`,
)}</tbody></table></div>
<h2>${t.pixKeys}</h2><p>${pixKeys.length ? pixKeys.map((k) => html`<span class="badge">${k.type}</span> <span class="mono">${k.key}</span> `) : t.none}</p>
<h2>Webhooks</h2>${webhookTable(req, kit, hooks)}
<h2>${t.recent}</h2><div class="scroll"><table data-testid="recent"><thead><tr><th>${t.when}</th><th>${t.transaction}</th><th>${t.kind}</th><th>${t.status}</th><th class="num">${t.amount}</th><th>${t.description}</th></tr></thead><tbody>
${txs.map((t) => html`<tr><td>${at(t.created_at)}</td><td><a class="mono" href="/console/transactions/${t.transaction_id}">${t.transaction_id}</a></td><td class="nowrap">${t.kind}</td><td><span class="badge ${t.statement_status}">${t.statement_status}</span></td><td class="num">${t.direction === 'outbound' ? '−' : ''}${brl(t.amount)}</td><td>${t.description}</td></tr>`)}</tbody></table></div>
${pager(req, at0, more, `/console/accounts/${id}/transactions.csv`)}`;
    return page(reply, layout(req, head.name, body));
  });

  app.get<{ Params: { id: string } }>('/console/accounts/:id/transactions.csv', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const id = /^\d{1,15}$/.test(req.params.id) ? Number(req.params.id) : 0;
    const rows = await recentTransactions(ctx.db, id, CSV_MAX, 0);
    return sendCsv(reply, `account-${id}-transactions`, ['transaction_id', 'created_at', 'kind', 'direction', 'status', 'amount', 'description'],
      rows.map((r) => [r.transaction_id, r.created_at.toISOString(), r.kind, r.direction, r.statement_status, r.amount, r.description]));
  });

  app.post<{ Params: { id: string } }>('/console/accounts/:id/limits', async (req, reply) => {
    if (!allow(req, reply, 'limits')) return reply;
    const back = `/console/accounts/${encodeURIComponent(req.params.id)}`;
    const id = /^\d{1,15}$/.test(req.params.id) ? Number(req.params.id) : NaN;
    const f = req.body as Form;
    const { L } = lang(req);
    const t = M(L);
    const patch: AccountPatch = {};
    for (const [field, column] of [['max', 'cash_out_max_amount_cents'], ['daily', 'cash_out_daily_limit_cents'], ['night', 'cash_out_nighttime_limit_cents']] as const) {
      const text = (one(f, field) ?? '').trim();
      if (!text) continue;
      const cents = parseReais(text);
      if (cents === null) return flashAndBack(req, reply, 'error', t.typeReais(field), back);
      patch[column] = cents;
    }
    if (!Number.isFinite(id) || Object.keys(patch).length === 0) return flashAndBack(req, reply, 'error', t.nothing, back);
    try {
      await auditedWrite(ctx, req, `operator:${req.console!.operator.username}`, { account_id: id, ...patch }, () => merchants.updateAccount(ctx.db, id, patch));
      return flashAndBack(req, reply, 'ok', t.changed, back);
    } catch (err) {
      return flashAndBack(req, reply, 'error', refusalText(err, L), back);
    }
  });

  // Revoking an API key: at once in every process (the key's secret and any previous one in its
  // grace); the merchant gets api_key.revoked. Revoking a revoked key changes nothing.
  app.post<{ Params: { id: string } }>('/console/accounts/:id/keys/revoke', async (req, reply) => {
    if (!allow(req, reply, 'keys')) return reply;
    const back = `/console/accounts/${encodeURIComponent(req.params.id)}`;
    const id = /^\d{1,15}$/.test(req.params.id) ? Number(req.params.id) : NaN;
    const clientId = (one(req.body as Form, 'client_id') ?? '').trim();
    const { L } = lang(req);
    const t = M(L);
    const head = Number.isFinite(id) ? await accountHead(ctx.db, id) : undefined;
    if (!head || clientId === '' || clientId.length > 100) return flashAndBack(req, reply, 'error', t.nothing, back);
    const who = `operator:${req.console!.operator.username}`;
    try {
      await auditedWrite(ctx, req, who, { account_id: id, client_id: clientId }, () =>
        revokeKey(ctx, { type: 'operator', id: `console:${req.console!.operator.username}`, ip: resolveClientIp(req.socket.remoteAddress ?? '', req.headers['x-forwarded-for'], ctx.config.trustedProxies) }, head.merchant_id, clientId),
      );
      return flashAndBack(req, reply, 'ok', t.keyRevoked(clientId), back);
    } catch (err) {
      return flashAndBack(req, reply, 'error', refusalText(err, L), back);
    }
  });

  app.post<{ Params: { id: string } }>('/console/accounts/:id/deposit', async (req, reply) => {
    if (!allow(req, reply, 'deposit')) return reply;
    const back = `/console/accounts/${encodeURIComponent(req.params.id)}`;
    const id = /^\d{1,15}$/.test(req.params.id) ? Number(req.params.id) : NaN;
    const f = req.body as Form;
    const { L } = lang(req);
    const t = M(L);
    const key = one(f, 'idempotency_id') ?? '';
    const cents = parseReais(one(f, 'amount'));
    const reason = (one(f, 'reason') ?? '').trim();
    if (!Number.isFinite(id) || !IDEMPOTENCY_ID.test(key)) return flashAndBack(req, reply, 'error', t.outOfDate, back);
    if (cents === null || cents <= 0) return flashAndBack(req, reply, 'error', t.typeReais(t.amount), back);
    if (!reason || reason.length > 140) return flashAndBack(req, reply, 'error', t.reasonRequired, back);
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
      const text = r.replayed ? t.replayed(r.transactionId, brl(r.amount)) : t.credited(r.transactionId, brl(r.amount));
      return flashAndBack(req, reply, 'ok', text, back);
    } catch (err) {
      return flashAndBack(req, reply, 'error', refusalText(err, L), back);
    }
  });
}

const M = dictionary(
  {
    notFound: 'Account not found', noAccount: 'No account', noLimit: 'no limit', merchant: 'Merchant', document: 'document', merchantL: 'merchant',
    account: 'account', available: 'Available', blocked: 'Blocked (MED)', pending: 'Pending (in flight)', limits: "Limits and today's usage",
    limit: 'Limit', setTo: 'Set to', used: 'Used in the current window', one: 'One cash-out', daily: 'Daily cash-out',
    night: 'Nighttime cash-out (20:00–06:00)', fees: 'Fees', cashOut: 'cash-out', cashIn: 'cash-in', oneR: 'One cash-out (R$)', dailyR: 'Daily (R$)',
    nightR: 'Nighttime (R$)', unchanged: 'unchanged', change: 'Change the limits', deposit: 'Deposit', amountR: 'Amount (R$)',
    reason: "Reason (kept in the audit log and shown on the merchant's statement)", credit: 'Credit the deposit',
    once: 'This form credits once: sending it again (a double click, a reload) answers the first deposit.',
    apiKeys: 'API keys', clientId: 'Client id', permissions: 'Permissions', active: 'Active', lastUse: 'Last use', yes: 'yes', revoked: 'revoked',
    never: 'never', pixKeys: 'PIX keys', none: 'none', recent: 'Recent transactions', when: 'When', transaction: 'Transaction', kind: 'Kind',
    status: 'Status', amount: 'Amount', description: 'Description', nothing: 'Nothing to change.', changed: 'Limits changed.',
    outOfDate: 'The form was out of date (no idempotency id): reload it.', reasonRequired: 'Reason: required, at most 140 characters.',
    typeReais: (field: string) => `${field}: type reais, as 1.234,56.`,
    replayed: (id: string, amount: string) => `This form was sent before: the deposit ${id} was credited once (${amount}).`,
    credited: (id: string, amount: string) => `Deposit ${id} of ${amount} credited.`,
    revoke: 'Revoke', keyRevoked: (clientId: string) => `API key ${clientId} revoked: every process refuses it now.`,
  },
  {
    notFound: 'Conta não encontrada', noAccount: 'Não há a conta', noLimit: 'sem limite', merchant: 'Comerciante', document: 'documento', merchantL: 'comerciante',
    account: 'conta', available: 'Disponível', blocked: 'Bloqueado (MED)', pending: 'Pendente (em trânsito)', limits: 'Limites e uso de hoje',
    limit: 'Limite', setTo: 'Definido', used: 'Usado na janela atual', one: 'Um cash-out', daily: 'Cash-out diário',
    night: 'Cash-out noturno (20:00–06:00)', fees: 'Tarifas', cashOut: 'cash-out', cashIn: 'cash-in', oneR: 'Um cash-out (R$)', dailyR: 'Diário (R$)',
    nightR: 'Noturno (R$)', unchanged: 'sem alteração', change: 'Alterar os limites', deposit: 'Depósito', amountR: 'Valor (R$)',
    reason: 'Motivo (guardado no registro de auditoria e mostrado no extrato do comerciante)', credit: 'Creditar o depósito',
    once: 'Este formulário credita uma vez: enviá-lo de novo (clique duplo, recarregar) responde o primeiro depósito.',
    apiKeys: 'Chaves de API', clientId: 'Client id', permissions: 'Permissões', active: 'Ativa', lastUse: 'Último uso', yes: 'sim', revoked: 'revogada',
    never: 'nunca', pixKeys: 'Chaves PIX', none: 'nenhuma', recent: 'Transações recentes', when: 'Quando', transaction: 'Transação', kind: 'Tipo',
    status: 'Situação', amount: 'Valor', description: 'Descrição', nothing: 'Nada a alterar.', changed: 'Limites alterados.',
    outOfDate: 'O formulário estava desatualizado (sem id de idempotência): recarregue-o.', reasonRequired: 'Motivo: obrigatório, no máximo 140 caracteres.',
    typeReais: (field: string) => `${field}: digite reais, como 1.234,56.`,
    replayed: (id: string, amount: string) => `Este formulário já foi enviado: o depósito ${id} foi creditado uma vez (${amount}).`,
    credited: (id: string, amount: string) => `Depósito ${id} de ${amount} creditado.`,
    revoke: 'Revogar', keyRevoked: (clientId: string) => `Chave de API ${clientId} revogada: todos os processos a recusam agora.`,
  },
);
