import type { FastifyInstance } from 'fastify';
import { transactionTimeline, type TimelineEntry } from '../../transactions/timeline.js';
import { html, type Html } from '../../portal/html.js';
import { at, brl, refusalText, type ConsoleKit } from '../kit.js';
import { searchAnything, transactionHead } from '../queries.js';

/** The search box (any identifier) and a transaction's detail with its timeline. */
export function searchPages(app: FastifyInstance, kit: ConsoleKit) {
  const { ctx, layout, page, allow } = kit;

  app.get<{ Querystring: { q?: string } }>('/console', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const q = typeof req.query.q === 'string' ? req.query.q.slice(0, 200) : '';
    const hits = q ? await searchAnything(ctx.db, q) : [];
    const body = html`<form class="inline card" method="get" action="/console" role="search">
<label>Merchant, account, transaction id, end-to-end id, external id, PIX key or document
<input name="q" value="${q}" size="48" maxlength="200" autofocus></label><button type="submit">Search</button></form>
${
  q
    ? hits.length
      ? html`<div class="scroll"><table data-testid="results"><thead><tr><th>What</th><th>Found</th><th>Detail</th></tr></thead><tbody>
${hits.map((h) => html`<tr><td><span class="badge">${h.kind}</span></td><td><a href="${h.href}">${h.label}</a></td><td class="muted">${h.detail}</td></tr>`)}</tbody></table></div>`
      : html`<p data-testid="no-results">Nothing matches <b>${q}</b>.</p>`
    : ''
}`;
    return page(reply, layout(req, 'Search', body, '/console'));
  });

  app.get<{ Params: { id: string } }>('/console/transactions/:id', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const t = await transactionHead(ctx.db, req.params.id);
    if (!t) return page(reply, layout(req, 'Transaction not found', html`<p>No transaction has the id <b>${req.params.id}</b>.</p>`), 404);
    let timeline: Html;
    try {
      const tl = await transactionTimeline({ db: ctx.db }, t.account_id, t.transaction_id);
      timeline = html`<div class="scroll"><table data-testid="timeline"><thead><tr><th>When (São Paulo)</th><th>What</th><th>Detail</th></tr></thead><tbody>
${tl.entries.map((e) => html`<tr data-kind="${e.kind}"><td class="num">${at(e.at)}</td><td>${entryTitle(e)}</td><td>${entryDetail(e)}</td></tr>`)}</tbody></table></div>`;
    } catch (err) {
      timeline = html`<p class="flash error">${refusalText(err)}</p>`;
    }
    const body = html`<div class="card grid">
<div><div class="label">Transaction id</div><div class="mono">${t.transaction_id}</div></div>
<div><div class="label">Merchant</div><div><a href="/console/accounts/${t.account_id}">${t.merchant_name}</a> <span class="muted">(account ${t.account_id})</span></div></div>
<div><div class="label">Kind</div><div>${t.kind} · ${t.direction}</div></div>
<div><div class="label">Status</div><div><span class="badge ${t.statement_status}">${t.statement_status}</span></div></div>
<div><div class="label">Amount</div><div class="figure">${brl(t.amount)}</div>${t.fee_amount ? html`<div class="muted">fee ${brl(t.fee_amount)}</div>` : ''}</div>
<div><div class="label">End-to-end id</div><div class="mono" data-testid="e2e">${t.end_to_end_id ?? '—'}</div></div>
<div><div class="label">External id</div><div class="mono">${t.external_id ?? '—'}</div></div>
<div><div class="label">Created</div><div>${at(t.created_at)}</div></div>
<div><div class="label">Description</div><div data-testid="description">${t.description || '—'}</div></div>
<div><div class="label">Counterparty</div><div>${t.counterparty_name || '—'}</div></div></div>
<h2>Timeline</h2>${timeline}`;
    return page(reply, layout(req, `Transaction ${t.transaction_id}`, body));
  });
}

function entryTitle(e: TimelineEntry): string {
  switch (e.kind) {
    case 'request': return e.portal_form ? 'Portal form' : 'API request';
    case 'record': return `Record ${e.step}`;
    case 'ledger': return 'Ledger postings';
    case 'rail': return 'Rail message';
    case 'event': return 'Event';
    case 'webhook_attempt': return 'Webhook attempt';
    case 'med': return `MED ${e.step}`;
    case 'refund': return 'Refund / return';
  }
}

function entryDetail(e: TimelineEntry): Html {
  switch (e.kind) {
    case 'request': return html`<span class="mono">${e.method} ${e.path}</span> · key <span class="mono">${e.idempotency_key}</span> · answer ${e.response_status ?? '—'}`;
    case 'record': return html`${e.status}${e.reason_code ? html` · ${e.reason_code}: ${e.reason}` : ''}`;
    case 'ledger': return html`${e.ledger_kind}: ${e.postings.map((p) => html`<span class="mono">${p.book} ${p.amount >= 0 ? '+' : ''}${brl(p.amount)}</span> `)}`;
    case 'rail': return html`<span class="mono">${e.message}</span>`;
    case 'event': return html`<span class="mono">${e.event}</span> · ${e.event_id}`;
    case 'webhook_attempt': return html`<span class="mono">${e.event}</span> → ${e.url} · attempt ${e.attempt} · ${e.status_code ?? e.error ?? '—'} (${e.duration_ms} ms)`;
    case 'med': return html`${e.infraction_id} · ${e.status} · ${brl(e.amount)}${e.decision ? html` · ${e.decision}` : ''}`;
    case 'refund': return html`<a href="/console/transactions/${e.transaction_id}">${e.transaction_id}</a> · ${e.refund_kind} · ${brl(e.amount)}`;
  }
}
