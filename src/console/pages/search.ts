import type { FastifyInstance } from 'fastify';
import { transactionTimeline, type TimelineEntry } from '../../transactions/timeline.js';
import { html, type Html } from '../../portal/html.js';
import { brl, lang, refusalText, type ConsoleKit } from '../kit.js';
import { dictionary, type PortalLocale } from '../../portal/i18n.js';
import { searchAnything, transactionHead } from '../queries.js';
import { pageOf, pager, PAGE_SIZE, sendCsv } from '../paging.js';

/** The search box (any identifier) and a transaction's detail with its timeline. */
export function searchPages(app: FastifyInstance, kit: ConsoleKit) {
  const { ctx, layout, page, allow } = kit;

  app.get<{ Querystring: { q?: string } }>('/console', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const { L } = lang(req);
    const t = M(L);
    const q = typeof req.query.q === 'string' ? req.query.q.slice(0, 200) : '';
    const all = q ? await searchAnything(ctx.db, q) : [];
    const at0 = pageOf(req);
    const hits = all.slice(at0.offset, at0.offset + PAGE_SIZE);
    const more = all.length > at0.offset + PAGE_SIZE;
    const body = html`<form class="inline card" method="get" action="/console" role="search">
<label>${t.box}
<input name="q" value="${q}" size="48" maxlength="200" autofocus></label><button type="submit">${t.search}</button></form>
${
  q
    ? hits.length
      ? html`<div class="scroll"><table data-testid="results"><thead><tr><th>${t.what}</th><th>${t.found}</th><th>${t.detail}</th></tr></thead><tbody>
${hits.map((h) => html`<tr><td><span class="badge">${h.kind}</span></td><td><a href="${h.href}">${h.label}</a></td><td class="muted">${h.detail}</td></tr>`)}</tbody></table></div>${pager(req, at0, more, `/console/search.csv?q=${encodeURIComponent(q)}`)}`
      : html`<p data-testid="no-results">${t.nothing} <b>${q}</b>.</p>`
    : ''
}`;
    return page(reply, layout(req, t.search, body, '/console'));
  });

  app.get<{ Querystring: { q?: string } }>('/console/search.csv', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const q = typeof req.query.q === 'string' ? req.query.q.slice(0, 200) : '';
    const hits = q ? await searchAnything(ctx.db, q) : [];
    return sendCsv(reply, 'search', ['kind', 'found', 'detail', 'link'], hits.map((h) => [h.kind, h.label, h.detail, h.href]));
  });

  app.get<{ Params: { id: string } }>('/console/transactions/:id', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const { L, at } = lang(req);
    const m = M(L);
    const t = await transactionHead(ctx.db, req.params.id);
    if (!t) return page(reply, layout(req, m.txNotFound, html`<p>${m.noTx} <b>${req.params.id}</b>.</p>`), 404);
    let timeline: Html;
    try {
      const tl = await transactionTimeline({ db: ctx.db }, t.account_id, t.transaction_id);
      timeline = html`<div class="scroll"><table data-testid="timeline"><thead><tr><th>${m.when}</th><th>${m.what}</th><th>${m.detail}</th></tr></thead><tbody>
${tl.entries.map((e) => html`<tr data-kind="${e.kind}"><td class="num">${at(e.at)}</td><td>${entryTitle(e, L)}</td><td>${entryDetail(e, L)}</td></tr>`)}</tbody></table></div>`;
    } catch (err) {
      timeline = html`<p class="flash error">${refusalText(err, L)}</p>`;
    }
    const body = html`<div class="card grid">
<div><div class="label">${m.txId}</div><div class="mono">${t.transaction_id}</div></div>
<div><div class="label">${m.merchant}</div><div><a href="/console/accounts/${t.account_id}">${t.merchant_name}</a> <span class="muted">(${m.account} ${t.account_id})</span></div></div>
<div><div class="label">${m.kind}</div><div>${t.kind} · ${t.direction}</div></div>
<div><div class="label">${m.status}</div><div><span class="badge ${t.statement_status}">${t.statement_status}</span></div></div>
<div><div class="label">${m.amount}</div><div class="figure">${brl(t.amount)}</div>${t.fee_amount ? html`<div class="muted">${m.fee} ${brl(t.fee_amount)}</div>` : ''}</div>
<div><div class="label">${m.e2e}</div><div class="mono" data-testid="e2e">${t.end_to_end_id ?? '—'}</div></div>
<div><div class="label">${m.externalId}</div><div class="mono">${t.external_id ?? '—'}</div></div>
<div><div class="label">${m.created}</div><div>${at(t.created_at)}</div></div>
<div><div class="label">${m.description}</div><div data-testid="description">${t.description || '—'}</div></div>
<div><div class="label">${m.counterparty}</div><div>${t.counterparty_name || '—'}</div></div></div>
<h2>${m.timeline}</h2>${timeline}`;
    return page(reply, layout(req, `${m.transaction} ${t.transaction_id}`, body));
  });
}

function entryTitle(e: TimelineEntry, L: PortalLocale): string {
  const m = M(L);
  switch (e.kind) {
    case 'request': return e.portal_form ? m.portalForm : m.apiRequest;
    case 'record': return `${m.record} ${e.step}`;
    case 'ledger': return m.ledger;
    case 'rail': return m.rail;
    case 'event': return m.event;
    case 'webhook_attempt': return m.attempt;
    case 'med': return `MED ${e.step}`;
    case 'refund': return m.refund;
  }
}

function entryDetail(e: TimelineEntry, L: PortalLocale): Html {
  const m = M(L);
  switch (e.kind) {
    case 'request': return html`<span class="mono">${e.method} ${e.path}</span> · ${m.key} <span class="mono">${e.idempotency_key}</span> · ${m.answer} ${e.response_status ?? '—'}`;
    case 'record': return html`${e.status}${e.reason_code ? html` · ${e.reason_code}: ${e.reason}` : ''}`;
    case 'ledger': return html`${e.ledger_kind}: ${e.postings.map((p) => html`<span class="mono">${p.book} ${p.amount >= 0 ? '+' : ''}${brl(p.amount)}</span> `)}`;
    case 'rail': return html`<span class="mono">${e.message}</span>`;
    case 'event': return html`<span class="mono">${e.event}</span> · ${e.event_id}`;
    case 'webhook_attempt': return html`<span class="mono">${e.event}</span> → ${e.url} · ${m.attemptN} ${e.attempt} · ${e.status_code ?? e.error ?? '—'} (${e.duration_ms} ms)`;
    case 'med': return html`${e.infraction_id} · ${e.status} · ${brl(e.amount)}${e.decision ? html` · ${e.decision}` : ''}`;
    case 'refund': return html`<a href="/console/transactions/${e.transaction_id}">${e.transaction_id}</a> · ${e.refund_kind} · ${brl(e.amount)}`;
  }
}

const M = dictionary(
  {
    box: 'Merchant, account, transaction id, end-to-end id, external id, PIX key or document',
    search: 'Search', what: 'What', found: 'Found', detail: 'Detail', nothing: 'Nothing matches',
    txNotFound: 'Transaction not found', noTx: 'No transaction has the id', when: 'When (São Paulo)',
    txId: 'Transaction id', merchant: 'Merchant', kind: 'Kind', status: 'Status', amount: 'Amount', e2e: 'End-to-end id',
    externalId: 'External id', created: 'Created', description: 'Description', counterparty: 'Counterparty', account: 'account',
    fee: 'fee', timeline: 'Timeline', transaction: 'Transaction', portalForm: 'Portal form', apiRequest: 'API request', record: 'Record',
    ledger: 'Ledger postings', rail: 'Rail message', event: 'Event', attempt: 'Webhook attempt', refund: 'Refund / return',
    key: 'key', answer: 'answer', attemptN: 'attempt',
  },
  {
    box: 'Comerciante, conta, id da transação, end-to-end id, id externo, chave PIX ou documento',
    search: 'Buscar', what: 'Tipo', found: 'Encontrado', detail: 'Detalhe', nothing: 'Nada corresponde a',
    txNotFound: 'Transação não encontrada', noTx: 'Nenhuma transação tem o id', when: 'Quando (São Paulo)',
    txId: 'Id da transação', merchant: 'Comerciante', kind: 'Tipo', status: 'Situação', amount: 'Valor', e2e: 'End-to-end id',
    externalId: 'Id externo', created: 'Criada em', description: 'Descrição', counterparty: 'Contraparte', account: 'conta',
    fee: 'tarifa', timeline: 'Linha do tempo', transaction: 'Transação', portalForm: 'Formulário do portal', apiRequest: 'Requisição à API', record: 'Registro',
    ledger: 'Lançamentos contábeis', rail: 'Mensagem do SPI', event: 'Evento', attempt: 'Tentativa de webhook', refund: 'Devolução',
    key: 'chave', answer: 'resposta', attemptN: 'tentativa',
  },
);
