import type { FastifyInstance, FastifyRequest } from 'fastify';
import { parseListParams } from '../../api/transactions/routes.js';
import { statement } from '../../transactions/statement.js';
import { brl, html, when } from '../html.js';
import { badge, errorText, type Portal } from '../kit.js';
import { can } from '../session.js';

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
    const q = statementQuery(req);
    let result;
    try {
      result = await statement(ctx, s.accountId, parseListParams(q));
    } catch (err) {
      return page(reply, layout(req, 'Statement', html`<div class="flash error" role="alert">${errorText(err)}</div><p><a href="/portal/statement">Clear the filters</a></p>`, '/portal/statement'), 400);
    }
    const link = (changes: Record<string, string>) => `?${new URLSearchParams({ ...q, ...changes }).toString()}`;
    const select = (name: string, options: string[]) =>
      html`<select name="${name}" id="f-${name}"><option value="">any</option>${options.map((o) => html`<option${q[name] === o ? html` selected` : ''}>${o}</option>`)}</select>`;
    const rows = result.data;
    const body = html`<form class="inline card" method="get" action="/portal/statement" aria-label="Filters">
<label for="f-status">Status ${select('status', ['settled', 'rejected', 'failed', 'processing'])}</label>
<label for="f-type">Type ${select('type', ['pix', 'ted', 'internal'])}</label>
<label>From <input type="date" name="date_from" value="${q.date_from ?? ''}"></label>
<label>To <input type="date" name="date_to" value="${q.date_to ?? ''}"></label>
<label>Per page <select name="per_page">${['20', '50', '100'].map((n) => html`<option${(q.per_page ?? '20') === n ? html` selected` : ''}>${n}</option>`)}</select></label>
<button type="submit">Filter</button> <a class="button secondary" href="/portal/statement.csv${link({})}" download>Export CSV</a></form>
<div class="scroll"><table><caption class="skip">Statement, page ${result.page}</caption><thead><tr><th>Date</th><th>Transaction</th><th class="hide-sm">Type</th><th>Counterparty</th><th>Status</th><th class="num">Amount</th><th class="num hide-sm">Fee</th></tr></thead><tbody>
${rows.length === 0 ? html`<tr><td colspan="7" class="muted">Nothing here.</td></tr>` : ''}
${rows.map(
  (r) => html`<tr><td>${when(r.created_at)}</td><td class="mono"><a href="/portal/transactions/${encodeURIComponent(r.transaction_id)}">${r.transaction_id}</a></td><td class="hide-sm">${r.type}</td><td>${r.counterparty_name}</td><td>${badge(r.status)}</td>
<td class="num">${r.direction === 'outbound' ? '−' : '+'}${brl(r.amount)}</td><td class="num hide-sm">${brl(r.fee_amount)}</td></tr>`,
)}
</tbody></table></div>
<p>${result.page > 1 ? html`<a href="${link({ page: String(result.page - 1) })}" rel="prev">← Newer</a> ` : ''}Page ${result.page}${rows.length >= result.per_page ? html` <a href="${link({ page: String(result.page + 1) })}" rel="next">Older →</a>` : ''}</p>`;
    return page(reply, layout(req, 'Statement', body, '/portal/statement'));
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
