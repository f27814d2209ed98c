import type { FastifyInstance, FastifyRequest } from 'fastify';
import { transactionTimeline, type TimelineEntry } from '../../transactions/timeline.js';
import { errorText } from '../errors.js';
import { html, type Html } from '../html.js';
import { dictionary, formatsOf } from '../i18n.js';
import type { Portal } from '../kit.js';
import { statusLabel } from '../messages.js';
import { portalRefusal } from '../refusal.js';
import { can } from '../session.js';

const M = dictionary(
  {
    title: 'Transaction timeline',
    back: 'Back to the transaction',
    when: 'When',
    what: 'What',
    detail: 'Detail',
    none: 'Nothing recorded.',
    request: 'API request',
    portalForm: 'Portal form',
    idempotencyKey: 'Idempotency-Key',
    formId: 'form id',
    answered: (status: string) => `answered ${status}`,
    record: 'Record',
    created: 'created',
    completed: 'completed',
    failed: 'failed',
    held: 'held by the rail',
    ledger: 'Ledger',
    rail: 'Rail',
    event: 'Event',
    webhook: 'Webhook attempt',
    noAnswer: 'no answer',
    med: 'MED',
    opened: 'case opened',
    defense: 'defense submitted',
    resolved: 'case resolved',
    refund: 'Refund / return',
    book: (book: string) => ({ available: 'available', pending: 'pending', blocked: 'blocked', institution: 'institution', other_account: 'other account' })[book] ?? book,
  },
  {
    title: 'Linha do tempo da transação',
    back: 'Voltar para a transação',
    when: 'Quando',
    what: 'O quê',
    detail: 'Detalhe',
    none: 'Nada registrado.',
    request: 'Requisição à API',
    portalForm: 'Formulário do portal',
    idempotencyKey: 'Idempotency-Key',
    formId: 'id do formulário',
    answered: (status) => `respondida com ${status}`,
    record: 'Registro',
    created: 'criado',
    completed: 'concluído',
    failed: 'falhou',
    held: 'retido pela rede',
    ledger: 'Razão contábil',
    rail: 'Rede (SPI)',
    event: 'Evento',
    webhook: 'Tentativa de webhook',
    noAnswer: 'sem resposta',
    med: 'MED',
    opened: 'caso aberto',
    defense: 'defesa enviada',
    resolved: 'caso resolvido',
    refund: 'Devolução',
    book: (book) => ({ available: 'disponível', pending: 'pendente', blocked: 'bloqueado', institution: 'instituição', other_account: 'outra conta' })[book] ?? book,
  },
);

/** One timeline entry as a table row: when, what, detail. */
function entryRow(req: FastifyRequest, e: TimelineEntry): Html {
  const m = M(req.i18n);
  const f = formatsOf(req.i18n);
  const row = (what: Html | string, detail: Html | string) =>
    html`<tr class="tl-${e.kind}" data-kind="${e.kind}"><td class="when">${f.dateTimeSeconds(e.at)}</td><td class="what">${what}</td><td class="detail">${detail}</td></tr>`;
  switch (e.kind) {
    case 'request':
      return row(
        e.portal_form ? m.portalForm : m.request,
        html`<code>${e.method} ${e.path}</code> · ${e.portal_form ? m.formId : m.idempotencyKey} <code data-testid="idempotency-key">${e.idempotency_key}</code>${e.response_status ? html` · ${m.answered(String(e.response_status))}` : ''}`,
      );
    case 'record':
      return row(m.record, html`${m[e.step]}${e.step === 'created' ? '' : html` · ${statusLabel(e.status, req.i18n)}`}${e.reason_code ? html` · ${e.reason_code} ${e.reason ?? ''}` : ''}`);
    case 'ledger':
      return row(
        m.ledger,
        html`<code>${e.ledger_kind}</code> #${e.ledger_transaction_id}<ul class="postings">${e.postings.map(
          (p) => html`<li><span>${m.book(p.book)}</span> <span class="num">${p.amount > 0 ? '+' : ''}${f.brl(p.amount)}</span></li>`,
        )}</ul>`,
      );
    case 'rail':
      return row(m.rail, html`<code>${e.message}</code><details><summary>JSON</summary><pre>${JSON.stringify(e.detail, null, 2)}</pre></details>`);
    case 'event':
      return row(m.event, html`<code>${e.event}</code> <span class="muted mono">${e.event_id}</span>`);
    case 'webhook_attempt':
      return row(
        m.webhook,
        html`<code>${e.event}</code> → <span class="mono">${e.url}</span> · #${e.attempt} · ${e.status_code !== null ? `HTTP ${e.status_code}` : `${m.noAnswer}: ${e.error ?? ''}`} · ${e.duration_ms} ms`,
      );
    case 'med':
      return row(
        m.med,
        html`<a href="/portal/med/${e.infraction_id}">${e.step === 'opened' ? m.opened : e.step === 'resolved' ? m.resolved : m.defense}</a> · ${f.brl(e.amount)}${e.decision ? html` · ${e.decision}` : ''}`,
      );
    case 'refund':
      return row(m.refund, html`<a href="/portal/transactions/${encodeURIComponent(e.transaction_id)}">${e.transaction_id}</a> · ${e.refund_kind} · ${f.brl(e.amount)}`);
  }
}

/** The transaction timeline (src/transactions/timeline.ts) as one page. */
export function timelinePage(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden } = portal;

  app.get<{ Params: { id: string } }>('/portal/transactions/:id/timeline', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'transfer:read')) return forbidden(req, reply, 'transfer:read');
    const m = M(req.i18n);
    let t;
    try {
      t = await transactionTimeline({ db: ctx.db }, s.accountId, req.params.id);
    } catch (err) {
      return page(reply, layout(req, m.title, html`<div class="flash error" role="alert">${errorText(err, req.i18n)}</div>`, '/portal/statement'), portalRefusal(err)?.statusCode ?? 500);
    }
    const body = html`<p class="mono">${t.transaction_id}${t.end_to_end_id ? html` · ${t.end_to_end_id}` : ''}</p>
<div class="scroll"><table class="timeline"><thead><tr><th>${m.when}</th><th>${m.what}</th><th>${m.detail}</th></tr></thead><tbody>
${t.entries.length ? t.entries.map((e) => entryRow(req, e)) : html`<tr><td colspan="3" class="muted">${m.none}</td></tr>`}
</tbody></table></div>
<p><a class="button secondary" href="/portal/transactions/${encodeURIComponent(t.transaction_id)}">${m.back}</a></p>`;
    return page(reply, layout(req, m.title, body, '/portal/statement'));
  });
}
