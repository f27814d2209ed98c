import type { FastifyInstance, FastifyRequest } from 'fastify';
import { parseListParams } from '../../api/transactions/routes.js';
import { statement } from '../../transactions/statement.js';
import { errorText } from '../errors.js';
import { html } from '../html.js';
import { dictionary, formatsOf } from '../i18n.js';
import { badge, type Portal } from '../kit.js';
import { common, statusLabel } from '../messages.js';
import { can } from '../session.js';

const M = dictionary(
  {
    title: 'Statement',
    clear: 'Clear the filters',
    filters: 'Filters',
    status: 'Status',
    type: 'Type',
    internal: 'Internal',
    from: 'From',
    to: 'To',
    perPage: 'Per page',
    filter: 'Filter',
    csv: 'Export CSV',
    caption: (page: number) => `Statement, page ${page}`,
    date: 'Date',
    transaction: 'Transaction',
    counterparty: 'Counterparty',
    amount: 'Amount',
    fee: 'Fee',
    nothing: 'Nothing here.',
    newer: 'Newer',
    older: 'Older',
    page: (page: number) => `Page ${page}`,
  },
  {
    title: 'Extrato',
    clear: 'Limpar os filtros',
    filters: 'Filtros',
    status: 'Situação',
    type: 'Tipo',
    internal: 'Interna',
    from: 'De',
    to: 'Até',
    perPage: 'Por página',
    filter: 'Filtrar',
    csv: 'Exportar CSV',
    caption: (page) => `Extrato, página ${page}`,
    date: 'Data',
    transaction: 'Transação',
    counterparty: 'Contraparte',
    amount: 'Valor',
    fee: 'Tarifa',
    nothing: 'Nada por aqui.',
    newer: 'Mais recentes',
    older: 'Mais antigas',
    page: (page) => `Página ${page}`,
  },
);

/**
 * The statement's filter values and the status each shows on its rows (the spec's "Statement
 * status filter vs display": `settled` rows show `completed`, `processing` rows `pending`). The
 * filter offers each under the name the rows show.
 */
export const STATUS_FILTER_SHOWN = [
  ['settled', 'completed'],
  ['processing', 'pending'],
  ['rejected', 'rejected'],
  ['failed', 'failed'],
] as const;

/** The filters the statement page passes on to the statement (and to its CSV export). */
const STATEMENT_KEYS = ['status', 'type', 'date_from', 'date_to', 'page', 'per_page'] as const;

function statementQuery(req: FastifyRequest): Record<string, string> {
  const raw = req.query as Record<string, string>;
  const q = Object.create(null) as Record<string, string>;
  for (const k of STATEMENT_KEYS) if (typeof raw[k] === 'string' && raw[k] !== '') q[k] = raw[k];
  return q;
}

const CSV_COLUMNS = ['created_at', 'transaction_id', 'end_to_end_id', 'external_id', 'type', 'direction', 'status', 'payment_status', 'amount', 'fee_amount', 'net_amount', 'counterparty_name', 'description', 'completed_at'] as const;

/** A cell starting with one of these would run as a spreadsheet formula (formula injection). */
const FORMULA_STARTS = ['=', '+', '-', '@', '\t', '\r'];
/** A cell holding one of these is quoted (RFC 4180). */
const NEEDS_QUOTING = ['"', ',', '\n', '\r'];
const QUOTE = '"';

/** One CSV cell: a would-be formula gets a leading apostrophe; a quoted cell doubles its quotes. */
export function csvCell(value: unknown): string {
  let text = value === null || value === undefined ? '' : String(value);
  if (FORMULA_STARTS.some((c) => text.startsWith(c))) text = `'${text}`;
  if (!NEEDS_QUOTING.some((c) => text.includes(c))) return text;
  return QUOTE + text.replaceAll(QUOTE, QUOTE + QUOTE) + QUOTE;
}

/** The statement page (filters, pages) and its CSV export. */
export function statementPages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden } = portal;

  app.get('/portal/statement', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'statement:read')) return forbidden(req, reply, 'statement:read');
    const m = M(req.i18n);
    const f = formatsOf(req.i18n);
    const q = statementQuery(req);
    let result;
    try {
      result = await statement(ctx, s.accountId, parseListParams(q));
    } catch (err) {
      return page(reply, layout(req, m.title, html`<div class="flash error" role="alert">${errorText(err, req.i18n)}</div><p><a href="/portal/statement">${m.clear}</a></p>`, '/portal/statement'), 400);
    }
    const link = (changes: Record<string, string>) => `?${new URLSearchParams({ ...q, ...changes }).toString()}`;
    const select = (name: string, options: readonly (readonly [string, string])[]) =>
      html`<select name="${name}" id="f-${name}"><option value="">${common(req.i18n).any}</option>${options.map(([v, label]) => html`<option value="${v}"${q[name] === v ? html` selected` : ''}>${label}</option>`)}</select>`;
    // The filter names each status as the rows show it (spec: "Statement status filter vs display").
    const statuses = STATUS_FILTER_SHOWN.map(([filter, shown]) => [filter, statusLabel(shown, req.i18n)] as const);
    const rows = result.data;
    const body = html`<form class="inline card" method="get" action="/portal/statement" aria-label="${m.filters}">
<label for="f-status">${m.status} ${select('status', statuses)}</label>
<label for="f-type">${m.type} ${select('type', [['pix', 'PIX'], ['ted', 'TED'], ['internal', m.internal]])}</label>
<label>${m.from} <input type="date" name="date_from" value="${q.date_from ?? ''}"></label>
<label>${m.to} <input type="date" name="date_to" value="${q.date_to ?? ''}"></label>
<label>${m.perPage} <select name="per_page">${['20', '50', '100'].map((n) => html`<option${(q.per_page ?? '20') === n ? html` selected` : ''}>${n}</option>`)}</select></label>
<button type="submit">${m.filter}</button> <a class="button secondary" href="/portal/statement.csv${link({})}" download>${m.csv}</a></form>
<div class="scroll"><table class="statement"><caption class="skip">${m.caption(result.page)}</caption><thead><tr><th class="hide-sm">${m.date}</th><th class="hide-sm">${m.transaction}</th><th class="hide-sm">${m.type}</th><th>${m.counterparty}</th><th class="hide-sm">${m.status}</th><th class="num">${m.amount}</th><th class="num hide-sm">${m.fee}</th></tr></thead><tbody>
${rows.length === 0 ? html`<tr><td colspan="7" class="muted">${m.nothing}</td></tr>` : ''}
${rows.map((r) => {
  const href = `/portal/transactions/${encodeURIComponent(r.transaction_id)}`;
  // On a phone: two columns, the counterparty (with the date and status under it) and the amount.
  return html`<tr><td class="hide-sm"><a href="${href}">${f.dateTime(r.created_at)}</a></td><td class="mono hide-sm"><a href="${href}">${r.transaction_id}</a></td><td class="hide-sm">${r.type}</td><td class="party">${r.counterparty_name}<span class="show-sm"><a href="${href}">${f.dateTime(r.created_at)}</a> ${badge(r.status, req.i18n)}</span></td><td class="hide-sm">${badge(r.status, req.i18n)}</td>
<td class="num">${r.direction === 'outbound' ? '−' : '+'}${f.brl(r.amount)}</td><td class="num hide-sm">${f.brl(r.fee_amount)}</td></tr>`;
})}
</tbody></table></div>
<p>${result.page > 1 ? html`<a href="${link({ page: String(result.page - 1) })}" rel="prev">← ${m.newer}</a> ` : ''}${m.page(result.page)}${rows.length >= result.per_page ? html` <a href="${link({ page: String(result.page + 1) })}" rel="next">${m.older} →</a>` : ''}</p>`;
    return page(reply, layout(req, m.title, body, '/portal/statement'));
  });

  app.get('/portal/statement.csv', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'statement:read')) return forbidden(req, reply, 'statement:read');
    const result = await statement(ctx, s.accountId, parseListParams(statementQuery(req)));
    const lines = [CSV_COLUMNS.join(','), ...result.data.map((r) => CSV_COLUMNS.map((c) => csvCell((r as Record<string, unknown>)[c])).join(','))];
    return reply
      .type('text/csv; charset=utf-8')
      .header('content-disposition', `attachment; filename="statement-${s.accountId}-page${result.page}.csv"`)
      .send(`${lines.join('\r\n')}\r\n`);
  });
}
